//go:build linux

package bus

import (
	"testing"
	"time"
)

// countAgent counts datagrams and allocates nothing.
type countAgent struct {
	datagrams  int
	deadlineNs int64
}

func (a *countAgent) DoWork(now int64, rx *Received) int {
	work := 0
	for {
		b, ok := rx.Next()
		if !ok {
			return work
		}
		for j := 0; j < b.Len(); j++ {
			if pkt, _ := b.Datagram(j); len(pkt) > 0 {
				a.datagrams++
			}
		}
		work += b.Len()
	}
}

func (a *countAgent) DeadlineNs() int64 { return a.deadlineNs }
func (a *countAgent) Pending() bool     { return false }

// The runner's pass, park and wake allocate nothing (issue 18: zero
// allocations per pass), on real sockets with a poller.
func TestRunnerDoesNotAllocate(t *testing.T) {
	a, b := genPair(t, true, nil)
	ag := &countAgent{}
	r, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs}, ag, b)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Polling() {
		t.Fatal("no poller over a UDP socket on Linux")
	}
	msg := [][]byte{[]byte("datagram")}
	to := b.LocalAddr()
	cases := []struct {
		name string
		fn   func()
	}{
		{"empty pass", func() { r.PassAt(testNowNs()) }},
		{"pass with a datagram", func() {
			if err := a.Send(msg, to); err != nil {
				t.Fatal(err)
			}
			before := ag.datagrams
			for range 1_000_000 {
				if r.PassAt(testNowNs()); ag.datagrams > before {
					return
				}
			}
			t.Fatal("the datagram never reached the agent")
		}},
		{"park past the deadline", func() {
			ag.deadlineNs = testNowNs() - 1
			r.park(testNowNs())
		}},
		{"wake, then park", func() {
			ag.deadlineNs = testNowNs() + int64(time.Second)
			r.parked.Store(true)
			r.Wake()
			r.parked.Store(false)
			r.park(testNowNs()) // ends at once: the eventfd is set
			r.PassAt(testNowNs())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn()
			if allocs := testing.AllocsPerRun(50, tc.fn); allocs != 0 {
				t.Fatalf("%.1f allocations", allocs)
			}
		})
	}
}
