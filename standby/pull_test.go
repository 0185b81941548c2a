package standby

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type appliedMsg struct {
	seq     uint64
	payload string
}

// TestPullMatchesCallback: a pull Window (Offer, Next) hands out exactly
// what a callback Window applies, in the same order, with the same
// counters, gaps and errors, over random lossy, reordering, duplicating
// input with resets; including a window as wide as its ring, where
// Applied+1's slot can hold Applied+1+slots (that case panicked the first
// pull Window).
func TestPullMatchesCallback(t *testing.T) {
	for _, pending := range []int{64, 100, 128} {
		for seed := uint64(1); seed <= 200; seed++ {
			r := rand.New(rand.NewPCG(seed, uint64(pending)))
			var want, got []appliedMsg
			cfg := Config{MaxPending: pending, MaxMessageBytes: 16}
			cw, err := New(cfg, func(seq uint64, p []byte) { want = append(want, appliedMsg{seq, string(p)}) })
			if err != nil {
				t.Fatal(err)
			}
			pw, err := NewPull(cfg)
			if err != nil {
				t.Fatal(err)
			}
			pull := func() {
				for {
					seq, p, ok := pw.Next()
					if !ok {
						return
					}
					got = append(got, appliedMsg{seq, string(p)})
				}
			}
			var gw, gp [4]Range
			for step := 0; step < 400; step++ {
				switch r.IntN(20) {
				case 0:
					s := cw.Applied() + uint64(r.IntN(2*pending)) - min(cw.Applied(), 5)
					cw.ResetTo(s)
					pw.ResetTo(s)
					pull()
				default:
					seq := cw.Applied() + uint64(r.IntN(pending+10))
					if r.IntN(8) == 0 {
						seq = cw.Applied() + 1 + uint64(pending) // the slot Applied+1 shares
					}
					payload := []byte{byte(seq), byte(seq >> 8)}
					_, _, cerr := cw.OnMessage(seq, payload)
					inOrder, perr := pw.Offer(seq, payload)
					if cerr != perr {
						t.Fatalf("pending %d seed %d: seq %d: errors %v and %v", pending, seed, seq, cerr, perr)
					}
					if inOrder {
						got = append(got, appliedMsg{seq, string(payload)})
					}
					pull()
				}
				if cw.Applied() != pw.Applied() || cw.Highest() != pw.Highest() || cw.Stats() != pw.Stats() {
					t.Fatalf("pending %d seed %d step %d: callback %d/%d %+v, pull %d/%d %+v", pending, seed, step,
						cw.Applied(), cw.Highest(), cw.Stats(), pw.Applied(), pw.Highest(), pw.Stats())
				}
				if !slices.Equal(cw.Gaps(gw[:0]), pw.Gaps(gp[:0])) {
					t.Fatalf("pending %d seed %d step %d: gaps %v and %v", pending, seed, step, cw.Gaps(gw[:0]), pw.Gaps(gp[:0]))
				}
			}
			if !slices.Equal(want, got) {
				t.Fatalf("pending %d seed %d: applied %v, pulled %v", pending, seed, want, got)
			}
		}
	}
}

// The pull Window's message path does not allocate either.
func TestPullNoAllocations(t *testing.T) {
	w, err := NewPull(Config{MaxPending: 256})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 64)
	seq := uint64(0)
	var sink uint64
	allocs := testing.AllocsPerRun(1000, func() {
		w.Offer(seq+3, payload) // buffered
		w.Offer(seq+2, payload) // buffered
		if ok, _ := w.Offer(seq+1, payload); ok {
			sink++
		}
		for {
			s, p, ok := w.Next()
			if !ok {
				break
			}
			sink += s + uint64(len(p))
		}
		seq += 3
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message group", allocs)
	}
	if w.Applied() != seq {
		t.Fatalf("applied %d, want %d", w.Applied(), seq)
	}
}
