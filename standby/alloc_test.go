package standby

import "testing"

// The message path must not allocate: not for in-order apply, not for
// buffering and draining out-of-order messages, not for reporting gaps.
func TestNoAllocations(t *testing.T) {
	payload := make([]byte, 64)
	var sink uint64
	apply := func(seq uint64, p []byte) { sink += seq + uint64(len(p)) }
	cases := []struct {
		name string
		run  func(t *testing.T, w *Window) func()
	}{
		{"in order", func(t *testing.T, w *Window) func() {
			seq := uint64(0)
			return func() {
				seq++
				w.OnMessage(seq, payload)
			}
		}},
		{"pairs swapped", func(t *testing.T, w *Window) func() {
			seq := uint64(0)
			return func() {
				w.OnMessage(seq+2, payload) // buffered, gap reported
				w.OnMessage(seq+1, payload) // applied, then 2 drained
				seq += 2
			}
		}},
		{"gap of 100 then drain", func(t *testing.T, w *Window) func() {
			seq := uint64(0)
			return func() {
				for i := uint64(2); i <= 100; i++ {
					w.OnMessage(seq+i, payload)
				}
				w.OnMessage(seq+1, payload)
				seq += 100
			}
		}},
		{"duplicates and rejects", func(t *testing.T, w *Window) func() {
			return func() {
				w.OnMessage(0, payload)
				w.OnMessage(1<<40, payload)
				w.OnMessage(1, []byte{})
			}
		}},
		{"gaps with capacity", func(t *testing.T, w *Window) func() {
			for seq := uint64(2); seq < 200; seq += 3 {
				w.OnMessage(seq, payload)
			}
			w.ObserveHighest(300)
			var nak [16]Range
			return func() {
				if len(w.Gaps(nak[:0])) != 16 {
					t.Fatal("expected 16 gaps")
				}
				w.ObserveHighest(301)
			}
		}},
		{"reset", func(t *testing.T, w *Window) func() {
			seq := uint64(0)
			return func() {
				w.OnMessage(seq+3, payload)
				w.OnMessage(seq+5, payload)
				w.ResetTo(seq + 3)
				w.OnMessage(seq+4, payload)
				seq += 5
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := New(Config{}, apply)
			if err != nil {
				t.Fatal(err)
			}
			f := c.run(t, w)
			if n := testing.AllocsPerRun(200, f); n != 0 {
				t.Fatalf("%v allocations per run, want 0", n)
			}
		})
	}
}
