package standby

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// step is one input of a table test and what it must produce.
type step struct {
	op   string // "msg", "hb" (ObserveHighest), "reset"
	seq  uint64
	size int // payload length for "msg"; -1 means payloadFor(seq)

	applies []uint64 // seqs passed to ApplyFunc by this step, in order
	gap     string   // "" for no gap, else "from-to"
	err     error
}

func msg(seq uint64, applies []uint64, gap string) step {
	return step{op: "msg", seq: seq, size: -1, applies: applies, gap: gap}
}

func seqs(s ...uint64) []uint64 { return s }

func TestWindowRules(t *testing.T) {
	const max64 = ^uint64(0)
	tests := []struct {
		name  string
		cfg   Config
		steps []step
		// checked after the last step
		wantApplied uint64
		wantPending int
		wantGaps    string
		wantStats   Stats
	}{
		{
			name:        "in order applies each",
			steps:       []step{msg(1, seqs(1), ""), msg(2, seqs(2), ""), msg(3, seqs(3), "")},
			wantApplied: 3,
			wantStats:   Stats{Applied: 3},
		},
		{
			name: "duplicate of applied is ignored",
			steps: []step{
				msg(1, seqs(1), ""), msg(2, seqs(2), ""), msg(1, nil, ""), msg(2, nil, ""), msg(0, nil, ""),
			},
			wantApplied: 2,
			wantStats:   Stats{Applied: 2, Duplicates: 3},
		},
		{
			name:        "ahead is buffered and the first gap returned",
			steps:       []step{msg(4, nil, "1-3"), msg(6, nil, "1-3")},
			wantApplied: 0, wantPending: 2, wantGaps: "1-3 5-5",
			wantStats: Stats{Buffered: 2},
		},
		{
			name:        "duplicate of buffered is ignored",
			steps:       []step{msg(3, nil, "1-2"), msg(3, nil, "1-2")},
			wantPending: 1, wantGaps: "1-2",
			wantStats: Stats{Buffered: 1, Duplicates: 1},
		},
		{
			name: "filling the gap drains everything contiguous",
			steps: []step{
				msg(3, nil, "1-2"), msg(2, nil, "1-1"), msg(5, nil, "1-1"), msg(1, seqs(1, 2, 3), "4-4"),
				msg(4, seqs(4, 5), ""),
			},
			wantApplied: 5,
			wantStats:   Stats{Applied: 5, Drained: 3, Buffered: 3},
		},
		{
			name: "gap reported after a partial drain",
			steps: []step{
				msg(2, nil, "1-1"), msg(5, nil, "1-1"), msg(9, nil, "1-1"), msg(1, seqs(1, 2), "3-4"),
			},
			wantApplied: 2, wantPending: 2, wantGaps: "3-4 6-8",
			wantStats: Stats{Applied: 2, Drained: 1, Buffered: 3},
		},
		{
			name: "duplicate still reports the first gap",
			steps: []step{
				msg(1, seqs(1), ""), msg(3, nil, "2-2"), msg(1, nil, "2-2"),
			},
			wantApplied: 1, wantPending: 1, wantGaps: "2-2",
			wantStats: Stats{Applied: 1, Buffered: 1, Duplicates: 1},
		},
		{
			name: "last seq that fits the buffer is accepted",
			cfg:  Config{MaxPending: 4},
			// Applied 0: the window buffers 2..5 (MaxPending of them).
			steps:       []step{msg(5, nil, "1-4")},
			wantPending: 1, wantGaps: "1-4",
			wantStats: Stats{Buffered: 1},
		},
		{
			name:        "one beyond the buffer needs a snapshot",
			cfg:         Config{MaxPending: 4},
			steps:       []step{msg(3, nil, "1-2"), {op: "msg", seq: 6, size: -1, err: ErrNeedSnapshot}},
			wantPending: 1, wantGaps: "1-2",
			wantStats: Stats{Buffered: 1},
		},
		{
			name: "full buffer: a new seq needs a snapshot, a buffered one is a duplicate",
			cfg:  Config{MaxPending: 3},
			steps: []step{
				msg(2, nil, "1-1"), msg(3, nil, "1-1"), msg(4, nil, "1-1"),
				{op: "msg", seq: 5, size: -1, err: ErrNeedSnapshot},
				{op: "msg", seq: 1 << 40, size: -1, err: ErrNeedSnapshot},
				msg(3, nil, "1-1"),
				msg(1, seqs(1, 2, 3, 4), ""),
				msg(5, seqs(5), ""),
			},
			wantApplied: 5,
			wantStats:   Stats{Applied: 5, Drained: 3, Buffered: 3, Duplicates: 1},
		},
		{
			name: "message too large changes nothing, even in order",
			cfg:  Config{MaxMessageBytes: 8},
			steps: []step{
				{op: "msg", seq: 1, size: 9, err: ErrMessageTooLarge},
				{op: "msg", seq: 3, size: 9, err: ErrMessageTooLarge},
				{op: "msg", seq: 1, size: 8, applies: seqs(1)},
				{op: "msg", seq: 2, size: 0, applies: seqs(2)},
			},
			wantApplied: 2,
			wantStats:   Stats{Applied: 2},
		},
		{
			name:        "start resumes after the journal",
			cfg:         Config{Start: 100},
			steps:       []step{msg(100, nil, ""), msg(102, nil, "101-101"), msg(101, seqs(101, 102), "")},
			wantApplied: 102,
			wantStats:   Stats{Applied: 2, Drained: 1, Buffered: 1, Duplicates: 1},
		},
		{
			name: "heartbeat exposes a tail gap",
			steps: []step{
				msg(1, seqs(1), ""), {op: "hb", seq: 5}, {op: "hb", seq: 3},
			},
			wantApplied: 1, wantGaps: "2-5",
			wantStats: Stats{Applied: 1},
		},
		{
			name: "tail gap after the buffered messages",
			steps: []step{
				msg(3, nil, "1-2"), msg(4, nil, "1-2"), {op: "hb", seq: 9},
			},
			wantPending: 2, wantGaps: "1-2 5-9",
			wantStats: Stats{Buffered: 2},
		},
		{
			name: "reset forward drops covered, drains contiguous",
			steps: []step{
				msg(3, nil, "1-2"), msg(5, nil, "1-2"), msg(6, nil, "1-2"), msg(9, nil, "1-2"),
				{op: "reset", seq: 4, applies: seqs(5, 6), gap: "7-8"},
			},
			wantApplied: 6, wantPending: 1, wantGaps: "7-8",
			wantStats: Stats{Applied: 2, Drained: 2, Buffered: 4, Dropped: 1, Resets: 1},
		},
		{
			name: "reset beyond everything buffered",
			steps: []step{
				msg(3, nil, "1-2"), msg(5, nil, "1-2"),
				{op: "reset", seq: 10}, msg(11, seqs(11), ""),
			},
			wantApplied: 11,
			wantStats:   Stats{Applied: 1, Buffered: 2, Dropped: 2, Resets: 1},
		},
		{
			name: "reset to applied keeps the buffer",
			steps: []step{
				msg(1, seqs(1), ""), msg(3, nil, "2-2"), {op: "reset", seq: 1, gap: "2-2"},
			},
			wantApplied: 1, wantPending: 1, wantGaps: "2-2",
			wantStats: Stats{Applied: 1, Buffered: 1, Resets: 1},
		},
		{
			name: "reset backwards rewinds and drops everything",
			steps: []step{
				msg(1, seqs(1), ""), msg(2, seqs(2), ""), msg(4, nil, "3-3"), {op: "hb", seq: 7},
				{op: "reset", seq: 1}, msg(2, seqs(2), ""),
			},
			wantApplied: 2,
			wantStats:   Stats{Applied: 3, Buffered: 1, Dropped: 1, Resets: 1},
		},
		{
			name: "sequence numbers near the uint64 maximum",
			cfg:  Config{Start: max64 - 3, MaxPending: 8},
			steps: []step{
				msg(max64, nil, fmt.Sprintf("%d-%d", max64-2, max64-1)),
				msg(max64-2, seqs(max64-2), fmt.Sprintf("%d-%d", max64-1, max64-1)),
				msg(max64-1, seqs(max64-1, max64), ""),
				msg(max64, nil, ""), msg(0, nil, ""),
				{op: "hb", seq: max64},
			},
			wantApplied: max64,
			wantStats:   Stats{Applied: 3, Drained: 1, Buffered: 1, Duplicates: 2},
		},
		{
			name:        "buffered message at the uint64 maximum",
			cfg:         Config{Start: max64 - 3},
			steps:       []step{msg(max64, nil, fmt.Sprintf("%d-%d", max64-2, max64-1))},
			wantApplied: max64 - 3, wantPending: 1, wantGaps: fmt.Sprintf("%d-%d", max64-2, max64-1),
			wantStats: Stats{Buffered: 1},
		},
		{
			name: "ring wraps many times",
			cfg:  Config{MaxPending: 3},
			steps: func() []step {
				var s []step
				for base := uint64(0); base < 300; base += 3 {
					s = append(s,
						msg(base+3, nil, fmt.Sprintf("%d-%d", base+1, base+2)),
						msg(base+2, nil, fmt.Sprintf("%d-%d", base+1, base+1)),
						msg(base+1, seqs(base+1, base+2, base+3), ""))
				}
				return s
			}(),
			wantApplied: 300,
			wantStats:   Stats{Applied: 300, Drained: 200, Buffered: 200},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := mustHarness(tc.cfg)
			for i, s := range tc.steps {
				before := len(h.log)
				var gap Range
				var hasGap bool
				var err error
				switch s.op {
				case "msg":
					p := payloadFor(s.seq, h.maxBytes)
					if s.size >= 0 {
						p = bytes.Repeat([]byte{'z'}, s.size)
					}
					gap, hasGap, err = h.deliver(s.seq, p)
				case "hb":
					h.w.ObserveHighest(s.seq)
				case "reset":
					gap, hasGap = h.w.ResetTo(s.seq)
				}
				if !errors.Is(err, s.err) || (err != nil) != (s.err != nil) {
					t.Fatalf("step %d %s %d: err %v, want %v", i, s.op, s.seq, err, s.err)
				}
				var applied []uint64
				for _, e := range h.log[before:] {
					applied = append(applied, e.seq)
				}
				if !slices.Equal(applied, s.applies) {
					t.Fatalf("step %d %s %d: applied %v, want %v", i, s.op, s.seq, applied, s.applies)
				}
				gotGap := ""
				if hasGap {
					gotGap = fmtRanges([]Range{gap})
				}
				if gotGap != s.gap {
					t.Fatalf("step %d %s %d: gap %q, want %q", i, s.op, s.seq, gotGap, s.gap)
				}
			}
			if got := h.w.Applied(); got != tc.wantApplied {
				t.Errorf("Applied %d, want %d", got, tc.wantApplied)
			}
			if got := h.w.Ack(); got != tc.wantApplied {
				t.Errorf("Ack %d, want %d", got, tc.wantApplied)
			}
			if got := h.w.Pending(); got != tc.wantPending {
				t.Errorf("Pending %d, want %d", got, tc.wantPending)
			}
			if got := fmtRanges(h.w.Gaps(make([]Range, 0, 16))); got != tc.wantGaps {
				t.Errorf("Gaps %q, want %q", got, tc.wantGaps)
			}
			if got := h.w.Stats(); got != tc.wantStats {
				t.Errorf("Stats %+v, want %+v", got, tc.wantStats)
			}
			for _, e := range h.log {
				if want := string(payloadFor(e.seq, h.maxBytes)); e.payload != want && e.payload != strings.Repeat("z", len(e.payload)) {
					t.Errorf("seq %d applied with payload %x, want %x", e.seq, e.payload, want)
				}
			}
		})
	}
}

// TestRejectedLeavesEverythingUnchanged checks the rule that an
// ErrNeedSnapshot (and ErrMessageTooLarge) call changes no observable,
// counters included.
func TestRejectedLeavesEverythingUnchanged(t *testing.T) {
	h := mustHarness(Config{MaxPending: 4, MaxMessageBytes: 16})
	for _, seq := range []uint64{1, 2, 4, 6} {
		if _, _, err := h.deliver(seq, payloadFor(seq, 16)); err != nil {
			t.Fatal(err)
		}
	}
	h.w.ObserveHighest(8)
	before := observe(h.w, len(h.log))
	for _, c := range []struct {
		seq  uint64
		size int
		want error
	}{
		{7 + 1, 0, ErrNeedSnapshot}, // Applied 2 + 1 + MaxPending 4 is the last that fits
		{1 << 63, 0, ErrNeedSnapshot},
		{^uint64(0), 3, ErrNeedSnapshot},
		{3, 17, ErrMessageTooLarge},
		{5, 17, ErrMessageTooLarge},
		{1, 17, ErrMessageTooLarge},
	} {
		gap, hasGap, err := h.deliver(c.seq, make([]byte, c.size))
		if err != c.want || hasGap || gap != (Range{}) {
			t.Fatalf("seq %d size %d: (%v, %v, %v), want zero gap and %v", c.seq, c.size, gap, hasGap, err, c.want)
		}
		if after := observe(h.w, len(h.log)); !after.equal(before) {
			t.Fatalf("seq %d: observables changed\nbefore %+v\nafter  %+v", c.seq, before, after)
		}
	}
}

func TestGapsBoundedByCapacity(t *testing.T) {
	h := mustHarness(Config{MaxPending: 64})
	for seq := uint64(2); seq <= 40; seq += 2 { // gaps 1,3,5,...,39
		h.deliver(seq, nil)
	}
	h.w.ObserveHighest(50)
	all := h.w.Gaps(make([]Range, 0, 32))
	if len(all) != 21 || all[0] != (Range{1, 1}) || all[19] != (Range{39, 39}) || all[20] != (Range{41, 50}) {
		t.Fatalf("Gaps = %v", all)
	}
	for capacity := 0; capacity <= 22; capacity++ {
		dst := make([]Range, 1, capacity+1)
		dst[0] = Range{7, 7} // existing content is kept
		got := h.w.Gaps(dst)
		n := min(capacity, len(all))
		if len(got) != 1+n || cap(got) != capacity+1 || got[0] != (Range{7, 7}) || !slices.Equal(got[1:], all[:n]) {
			t.Fatalf("cap %d: Gaps = %v", capacity, got)
		}
	}
	if got := h.w.Gaps(nil); got != nil {
		t.Fatalf("Gaps(nil) = %v, want nil (never allocates)", got)
	}
}

func TestPayloadIsCopiedWhenBuffered(t *testing.T) {
	var got []string
	w, err := New(Config{MaxMessageBytes: 4}, func(seq uint64, p []byte) { got = append(got, string(p)) })
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("bbbb")
	w.OnMessage(2, buf[:2])
	copy(buf, "xxxx")
	w.OnMessage(3, buf[:3])
	copy(buf, "aaaa")
	w.OnMessage(1, buf[:1])
	if want := []string{"a", "bb", "xxx"}; !slices.Equal(got, want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
}

func TestNewConfig(t *testing.T) {
	noop := func(uint64, []byte) {}
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{MaxPending: 1, MaxMessageBytes: 1}, true},
		{Config{MaxPending: MaxPendingLimit, MaxMessageBytes: 1}, true},
		{Config{MaxPending: -1}, false},
		{Config{MaxPending: MaxPendingLimit + 1}, false},
		{Config{MaxMessageBytes: -1}, false},
		{Config{MaxMessageBytes: MaxMessageBytesLimit + 1}, false},
		{Config{MaxPending: MaxPendingLimit, MaxMessageBytes: MaxMessageBytesLimit}, false},
	} {
		w, err := New(c.cfg, noop)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("New(%+v) err = %v", c.cfg, err)
		}
		if c.ok && w.MaxPending() != max(c.cfg.MaxPending, 0) && c.cfg.MaxPending != 0 {
			t.Errorf("New(%+v).MaxPending() = %d", c.cfg, w.MaxPending())
		}
	}
	if w, _ := New(Config{}, noop); w.MaxPending() != DefaultMaxPending || w.maxMessageBytes != DefaultMaxMessageBytes {
		t.Errorf("defaults: %d, %d", w.MaxPending(), w.maxMessageBytes)
	}
	mustPanic(t, "nil apply", func() { New(Config{}, nil) })
}

func TestReentrantCallPanics(t *testing.T) {
	var w *Window
	w, _ = New(Config{}, func(seq uint64, p []byte) { w.OnMessage(seq+1, nil) })
	mustPanic(t, "reentrant OnMessage", func() { w.OnMessage(1, nil) })
	// The guard is released by the panic, so a recovering runtime can go on.
	w.apply = func(uint64, []byte) {}
	if _, _, err := w.OnMessage(1, nil); err != nil || w.Applied() != 1 {
		t.Fatalf("after recovered panic: err %v applied %d", err, w.Applied())
	}
}

func TestRejectsCount(t *testing.T) {
	var r Rejects
	for _, err := range []error{nil, ErrNeedSnapshot, ErrNeedSnapshot, ErrMessageTooLarge, fmt.Errorf("x: %w", ErrNeedSnapshot), errors.New("other")} {
		r.Count(err)
	}
	if r != (Rejects{NeedSnapshot: 3, MessageTooLarge: 1, Other: 1}) {
		t.Fatalf("Rejects = %+v", r)
	}
}

func TestRangeLen(t *testing.T) {
	for _, c := range []struct {
		r    Range
		want uint64
	}{{Range{1, 1}, 1}, {Range{3, 7}, 5}, {Range{7, 3}, 0}, {Range{0, ^uint64(0)}, ^uint64(0)}} {
		if got := c.r.Len(); got != c.want {
			t.Errorf("%v.Len() = %d, want %d", c.r, got, c.want)
		}
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}
