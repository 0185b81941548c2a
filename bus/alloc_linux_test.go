//go:build linux

package bus

import (
	"os"
	"testing"
	"time"
)

// The spin path must not allocate: a collector run in a spin loop is what
// turns an 8 µs p99 into 32 µs.
func TestZeroAllocs(t *testing.T) {
	a, b := genPair(t, true, reasonFilter)
	s, rs := multicastHostIfRoot(t)
	rb := newBatch(BatchSizeMax, 256)
	msgs := payloads(BatchSizeMax)
	msgs[3] = []byte("2 dropped by the filter")
	to := b.LocalAddr()
	cases := []struct {
		name string
		fn   func()
	}{
		{"poll empty", func() { b.Receive(rb.bufs, rb.sizes, rb.from, 0) }},
		{"busy-spin idle on empty", func() { (Idle{Kind: IdleBusySpin}).Receive(b, rb.bufs[:1], rb.sizes, rb.from) }},
		{"send and receive a batch, one dropped", func() {
			if err := a.Send(msgs, to); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < len(msgs)-1; {
				n, err := b.Receive(rb.bufs, rb.sizes, rb.from, 0)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
		}},
		{"counters snapshot", func() { _ = b.Counters() }},
	}
	if s != nil {
		cases = append(cases, struct {
			name string
			fn   func()
		}{"multicast send and receive", func() {
			if err := s.Send(msgs[:8], testGroup); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < 8; {
				n, err := rs[0].Receive(rb.bufs, rb.sizes, rb.from, 0)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn() // warm up: first calls may grow runtime structures
			if allocs := testing.AllocsPerRun(50, tc.fn); allocs != 0 {
				t.Errorf("%v allocs/op, want 0", allocs)
			}
		})
	}
	// A timed park may allocate (deadline error inside net); it is the idle
	// path, so only check it stays small and bounded.
	if allocs := testing.AllocsPerRun(5, func() { b.Receive(rb.bufs, rb.sizes, rb.from, time.Microsecond) }); allocs > 8 {
		t.Errorf("timed park: %v allocs/op", allocs)
	}
}

func multicastHostIfRoot(t *testing.T) (*UDP, []*UDP) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	return multicastHost(t, 1, nil)
}
