package mdfeed

import (
	"errors"
	"slices"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

func TestMDNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero: disabled", Config{}, true},
		{"smallest ring", Config{RingUpdates: MinRingUpdates}, true},
		{"largest ring", Config{RingUpdates: MaxRingUpdates}, true},
		{"ring too small", Config{RingUpdates: MinRingUpdates - 1}, false},
		{"ring too large", Config{RingUpdates: MaxRingUpdates + 1}, false},
		{"negative ring", Config{RingUpdates: -1}, false},
		{"datagram too small for a slot", Config{RingUpdates: 64, DatagramLen: 64}, false},
		{"datagram too large", Config{RingUpdates: 64, DatagramLen: wire.MaxFrameLen + 1}, false},
		{"negative reserve", Config{RingUpdates: 64, ReserveUpdates: -1}, false},
		{"negative heartbeat", Config{RingUpdates: 64, HeartbeatEveryNs: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New[addr](tc.cfg)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("New(%+v) = %v", tc.cfg, err)
			}
			if err == nil && f.Enabled() != (tc.cfg.RingUpdates > 0) {
				t.Fatalf("Enabled %v", f.Enabled())
			}
		})
	}
}

// TestMDAdd: the ring stays contiguous, by MD seq.
func TestMDAdd(t *testing.T) {
	type add struct {
		md   uint64
		keep bool
	}
	for _, tc := range []struct {
		name              string
		ring              int
		adds              []add // after 1..10
		first, last, cmdL uint64
		resets            uint64
	}{
		{"contiguous", 64, nil, 1, 10, 10, 0},
		{"next", 64, []add{{11, true}}, 1, 11, 11, 0},
		{"a discarded suffix re-applied replaces the history from there", 64, []add{{5, true}}, 1, 5, 5, 0},
		{"the first again", 64, []add{{1, true}, {2, true}}, 1, 2, 2, 0},
		{"past a hole restarts", 64, []add{{15, true}}, 15, 15, 15, 1},
		{"below the ring restarts", 64, []add{{5, true}, {3, true}}, 1, 3, 3, 0},
		{"wraps: keeps the newest", 16, []add{{11, true}, {12, true}, {13, true}, {14, true}, {15, true}, {16, true}, {17, true}}, 2, 17, 17, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, Config{RingUpdates: tc.ring})
			fill(t, f, 1, 10, sameCmd)
			for _, a := range tc.adds {
				if got := f.Add(a.md, update(a.md)); got != a.keep {
					t.Fatalf("Add(%d) = %v", a.md, got)
				}
			}
			st := f.Stats()
			if st.RingFirst != tc.first || st.RingLast != tc.last || st.Resets != tc.resets {
				t.Fatalf("ring %d..%d resets %d, want %d..%d resets %d", st.RingFirst, st.RingLast, st.Resets, tc.first, tc.last, tc.resets)
			}
			if cmd, p, ok := f.Entry(tc.last); !ok || cmd != tc.cmdL || !slices.Equal(p, update(tc.last)) {
				t.Fatalf("Entry(%d) = %d %x %v", tc.last, cmd, p, ok)
			}
			if _, _, ok := f.Entry(tc.last + 1); ok {
				t.Fatal("Entry past the ring")
			}
			if _, _, ok := f.Entry(tc.first - 1); ok && tc.first > 1 {
				t.Fatal("Entry below the ring")
			}
		})
	}
}

// TestMDAddRefuses: what the ring does not keep leaves it as it was.
func TestMDAddRefuses(t *testing.T) {
	ack := engine.AppendOutput(nil, &engine.Output{Kind: engine.KindAck})
	for _, tc := range []struct {
		name    string
		cfg     Config
		payload []byte
	}{
		{"disabled", Config{}, update(11)},
		{"not market data", Config{RingUpdates: 64}, ack},
		{"not the reference engine's", Config{RingUpdates: 64}, []byte("opaque")},
		{"empty", Config{RingUpdates: 64}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, tc.cfg)
			if f.Enabled() {
				fill(t, f, 1, 10, sameCmd)
			}
			before := f.Stats()
			if f.Add(11, tc.payload) {
				t.Fatal("kept")
			}
			if after := f.Stats(); after != before {
				t.Fatalf("stats %+v, were %+v", after, before)
			}
		})
	}
}

func TestMDFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ring     int
		reserve  int
		held     uint64 // 1..held
		released uint64 // published
		full     bool
	}{
		{"empty", 64, 8, 0, 0, false},
		{"all published", 64, 8, 64, 64, false},
		{"room for a command", 64, 8, 56, 0, false},
		{"within a command of the size", 64, 8, 57, 0, true},
		{"the reserve is at most a quarter", 64, 4096, 48, 0, false},
		{"a quarter", 64, 4096, 49, 0, true},
		{"published makes room", 64, 8, 100, 60, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, Config{RingUpdates: tc.ring, ReserveUpdates: tc.reserve})
			fill(t, f, 1, tc.held, sameCmd)
			publishAll(t, f, tc.released, ^uint64(0))
			if got := f.Full(); got != tc.full {
				t.Fatalf("Full = %v", got)
			}
			if want := map[bool]uint64{true: 1}[tc.full]; f.Stats().Backpressure != want {
				t.Fatalf("Backpressure %d", f.Stats().Backpressure)
			}
		})
	}
	if newFeed(t, Config{}).Full() {
		t.Fatal("a disabled feed is full")
	}
}

// TestMDPublish: in MD seq order, each update once its command is released,
// never above the state's MD seq, packed many to a frame whose seq is the
// first update's command.
func TestMDPublish(t *testing.T) {
	twoPerCmd := func(md uint64) uint64 { return (md + 1) / 2 }
	for _, tc := range []struct {
		name     string
		ring     int
		held     uint64
		cmdOf    func(uint64) uint64
		steps    [][2]uint64 // released, state MD seq
		want     []uint64    // MD seqs published, over all steps
		frames   []uint64    // the frames' seqs (nil: not checked)
		released uint64
		missed   uint64
	}{
		{"nothing released", 64, 10, sameCmd, [][2]uint64{{0, ^uint64(0)}}, nil, []uint64{}, 0, 0},
		{"all", 64, 10, sameCmd, [][2]uint64{{10, ^uint64(0)}}, seqRange(1, 10), []uint64{1}, 10, 0},
		{"by command", 64, 10, twoPerCmd, [][2]uint64{{3, ^uint64(0)}, {3, ^uint64(0)}, {5, ^uint64(0)}}, seqRange(1, 10), []uint64{1, 4}, 10, 0},
		{"not above the state's MD seq", 64, 10, sameCmd, [][2]uint64{{10, 7}}, seqRange(1, 7), []uint64{1}, 7, 0},
		{"then the rest", 64, 10, sameCmd, [][2]uint64{{10, 7}, {10, 10}}, seqRange(1, 10), []uint64{1, 8}, 10, 0},
		{"many frames", 4096, 100, sameCmd, [][2]uint64{{100, ^uint64(0)}}, seqRange(1, 100), nil, 100, 0},
		{"the ring moved past what was not published", 16, 40, sameCmd, [][2]uint64{{40, ^uint64(0)}}, seqRange(25, 40), []uint64{25}, 40, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, Config{RingUpdates: tc.ring})
			fill(t, f, 1, tc.held, tc.cmdOf)
			var frames []sent
			for _, s := range tc.steps {
				frames = append(frames, publishAll(t, f, s[0], s[1])...)
			}
			if got := seqsOf(frames); !slices.Equal(got, tc.want) {
				t.Fatalf("published %v, want %v", got, tc.want)
			}
			var firsts []uint64
			for _, fr := range frames {
				if fr.typ != wire.TypeOutput || fr.first != tc.cmdOf(fr.seqs[0]) {
					t.Fatalf("frame %s seq %d, first update %d", fr.typ, fr.first, fr.seqs[0])
				}
				firsts = append(firsts, fr.first)
			}
			if tc.frames != nil && !slices.Equal(firsts, tc.frames) {
				t.Fatalf("frames %v, want %v", firsts, tc.frames)
			}
			if tc.frames == nil && len(frames) < 2 {
				t.Fatalf("%d updates in %d frame(s)", tc.held, len(frames))
			}
			if st := f.Stats(); st.Released != tc.released || st.RepublishMissed != tc.missed {
				t.Fatalf("released %d missed %d, want %d %d", st.Released, st.RepublishMissed, tc.released, tc.missed)
			}
		})
	}
}

// TestMDPublishLeavesTheBatchAlone: with nothing to publish the caller's
// batch is untouched (the node flushes its own market data through it).
func TestMDPublishLeavesTheBatchAlone(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 64})
	fill(t, f, 1, 10, sameCmd)
	b := wire.NewBatch(0)
	b.Reset(wire.TypeOutput, origin, 77)
	b.Add([]byte("x"))
	if k := f.Publish(b, origin, 0, ^uint64(0)); k != 0 || b.FirstSeq() != 77 || b.Count() != 1 {
		t.Fatalf("Publish %d, batch at %d with %d", k, b.FirstSeq(), b.Count())
	}
}

func TestMDPromoted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ring        int
		held        uint64
		learned     uint64 // released learned from heartbeats
		stateMD     uint64
		noRepublish bool
		from, to    uint64 // returned (to < from: none)
		st          Stats  // Republished, RepublishMissed, Released
	}{
		{"empty ring", 64, 0, 0, 0, false, 1, 0, Stats{}},
		{"all released", 64, 10, 10, 10, false, 1, 0, Stats{Released: 10}},
		{"the unreleased tail", 64, 10, 6, 10, false, 7, 10, Stats{Republished: 4, Released: 6}},
		{"not above the state's MD seq", 64, 10, 6, 8, false, 7, 8, Stats{Republished: 2, Released: 6}},
		{"nothing learned", 64, 10, 0, 10, false, 1, 10, Stats{Republished: 10}},
		{"below the ring is missed", 16, 40, 10, 40, false, 25, 40, Stats{Republished: 16, RepublishMissed: 14, Released: 24}},
		{"UNSAFE no republish", 64, 10, 6, 10, true, 1, 0, Stats{Released: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, Config{RingUpdates: tc.ring, NoRepublish: tc.noRepublish})
			fill(t, f, 1, tc.held, sameCmd)
			f.OnHeartbeat(heartbeatFrame(t, tc.learned), 0)
			from, to := f.Promoted(tc.stateMD)
			if from != tc.from || to != tc.to {
				t.Fatalf("Promoted = %d..%d, want %d..%d", from, to, tc.from, tc.to)
			}
			st := f.Stats()
			if st.Republished != tc.st.Republished || st.RepublishMissed != tc.st.RepublishMissed || st.Released != tc.st.Released {
				t.Fatalf("stats %+v, want %+v", st, tc.st)
			}
			if want := seqRange(tc.from, tc.to); !slices.Equal(seqsOf(publishAll(t, f, ^uint64(0), tc.stateMD)), want) {
				t.Fatalf("then published other than %v", want)
			}
		})
	}
}

// TestMDKnownReleased: an MD seq known released by other means (the last
// run's status file) raises Released, never lowers it, and bounds what a
// promotion publishes again.
func TestMDKnownReleased(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 64})
	fill(t, f, 1, 10, sameCmd)
	f.KnownReleased(8)
	f.KnownReleased(3)
	if f.Released() != 8 {
		t.Fatalf("Released %d, want 8", f.Released())
	}
	if from, to := f.Promoted(10); from != 9 || to != 10 || f.Stats().Republished != 2 {
		t.Fatalf("Promoted = %d..%d, republished %d; want 9..10, 2", from, to, f.Stats().Republished)
	}
}

func heartbeatFrame(t testing.TB, mdSeq uint64) *wire.Frame {
	t.Helper()
	b := (&wire.Heartbeat{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 1}, Released: 1, MDSeq: mdSeq}).Append(nil)
	fr, _, err := wire.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return &fr
}

// TestMDOnHeartbeat: the highest released MD seq is remembered; other
// frames change nothing.
func TestMDOnHeartbeat(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 64})
	for _, tc := range []struct{ md, want uint64 }{{5, 5}, {3, 5}, {9, 9}} {
		f.OnHeartbeat(heartbeatFrame(t, tc.md), 0)
		if f.Released() != tc.want {
			t.Fatalf("after %d: released %d, want %d", tc.md, f.Released(), tc.want)
		}
	}
	b := (&wire.MDRequest{Kind: wire.MDRequestSnapshot}).Append(nil)
	fr, _, _ := wire.Parse(b)
	f.OnHeartbeat(&fr, 0)
	if f.Released() != 9 {
		t.Fatal("a frame that is not a heartbeat moved released")
	}
}

func TestMDHeartbeatDue(t *testing.T) {
	const every = 10
	f := newFeed(t, Config{RingUpdates: 64, HeartbeatEveryNs: every})
	for i, tc := range []struct {
		released uint64
		nowNs    int64
		due      bool
	}{
		{0, 100, false}, // nothing released yet: the sequencer's idle heartbeats do
		{5, 100, true},  // releases moved
		{6, 105, false}, // not again so soon
		{6, 110, true},  // an interval later
		{6, 200, false}, // releases did not move since
		{7, 200, true},
	} {
		if got := f.HeartbeatDue(tc.released, tc.nowNs); got != tc.due {
			t.Fatalf("step %d: HeartbeatDue(%d, %d) = %v", i, tc.released, tc.nowNs, got)
		}
	}
}
