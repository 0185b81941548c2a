package bus

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingReceiver never has data; it counts polls and parks.
type countingReceiver struct {
	polls, parks int
	parkWait     time.Duration
}

func (c *countingReceiver) Receive(_ [][]byte, _ []int, _ []netip.AddrPort, wait time.Duration) (int, error) {
	if wait == 0 {
		c.polls++
	} else {
		c.parks++
		c.parkWait = wait
	}
	return 0, nil
}

func TestIdleReceiveIsBounded(t *testing.T) {
	cases := []struct {
		idle         Idle
		polls, parks int
		parkWait     time.Duration
	}{
		{Idle{Kind: IdleBackoff}, BackoffSpinsDefault + BackoffYieldsDefault, 1, ParkDefault},
		{Idle{Kind: IdleBackoff, Spins: 3, Yields: 2, Park: time.Millisecond}, 5, 1, time.Millisecond},
		{Idle{Kind: IdleBackoff, Spins: 1 << 30, Yields: 1 << 30}, 2 * PollsPerCallMax, 1, ParkDefault},
		{Idle{Kind: IdleBusySpin}, PollsPerCallMax, 0, 0},
		{Idle{Kind: IdleYield}, PollsPerCallMax, 0, 0},
		{Idle{Kind: IdleBlock, Park: 7 * time.Millisecond}, 0, 1, 7 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.idle.Kind.String(), func(t *testing.T) {
			var r countingReceiver
			b := newBatch(1, 8)
			n, err := tc.idle.Receive(&r, b.bufs, b.sizes, b.from)
			if n != 0 || err != nil {
				t.Fatalf("Receive = %d, %v", n, err)
			}
			if r.polls != tc.polls || r.parks != tc.parks || r.parkWait != tc.parkWait {
				t.Errorf("polls %d parks %d (wait %v), want %d, %d (%v)",
					r.polls, r.parks, r.parkWait, tc.polls, tc.parks, tc.parkWait)
			}
		})
	}
}

// scriptedReceiver returns data on the k-th call.
type scriptedReceiver struct {
	calls, dataOn int
	err           error
}

func (s *scriptedReceiver) Receive(_ [][]byte, sizes []int, _ []netip.AddrPort, _ time.Duration) (int, error) {
	s.calls++
	if s.calls == s.dataOn {
		sizes[0] = 1
		return 1, s.err
	}
	return 0, nil
}

func TestIdleReceiveStopsAtFirstData(t *testing.T) {
	for _, kind := range []IdleKind{IdleBackoff, IdleBusySpin, IdleYield} {
		r := &scriptedReceiver{dataOn: 3}
		b := newBatch(1, 8)
		if n, _ := (Idle{Kind: kind}).Receive(r, b.bufs, b.sizes, b.from); n != 1 || r.calls != 3 {
			t.Errorf("%v: n %d after %d calls, want 1 after 3", kind, n, r.calls)
		}
	}
	// Data found in the yield phase of a back-off.
	r := &scriptedReceiver{dataOn: 4}
	b := newBatch(1, 8)
	if n, _ := (Idle{Kind: IdleBackoff, Spins: 2, Yields: 5}).Receive(r, b.bufs, b.sizes, b.from); n != 1 || r.calls != 4 {
		t.Errorf("back-off yield phase: n %d after %d calls", n, r.calls)
	}
}

func TestLoopDeliversEveryIdle(t *testing.T) {
	kinds := []IdleKind{IdleBackoff, IdleBusySpin, IdleYield, IdleBlock}
	for _, tr := range transports {
		for _, kind := range kinds {
			t.Run(tr.name+"/"+kind.String(), func(t *testing.T) {
				a, b := genPair(t, tr.real, nil)
				var got atomic.Int64
				var mu sync.Mutex
				var last string
				l, err := StartLoop(b, LoopConfig{Idle: Idle{Kind: kind, Park: 5 * time.Millisecond}, BatchSize: 8},
					func(bufs [][]byte, sizes []int, _ []netip.AddrPort) {
						got.Add(int64(len(sizes)))
						mu.Lock()
						last = string(bufs[len(sizes)-1][:sizes[len(sizes)-1]])
						mu.Unlock()
					})
				if err != nil {
					t.Fatal(err)
				}
				msgs := payloads(50)
				if err := a.Send(msgs, b.LocalAddr()); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(5 * time.Second)
				for got.Load() < 50 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if err := l.Stop(); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				if got.Load() != 50 || last != string(msgs[49]) {
					t.Fatalf("loop delivered %d, last %q", got.Load(), last)
				}
			})
		}
	}
}

func TestLoopEndsOnClose(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, b := genPair(t, tr.real, nil)
			l, err := StartLoop(b, LoopConfig{Idle: Idle{Park: time.Millisecond}}, func([][]byte, []int, []netip.AddrPort) {})
			if err != nil {
				t.Fatal(err)
			}
			if l.Err() != nil {
				t.Fatal("Err before the loop ended")
			}
			b.Close()
			select {
			case <-l.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("loop still running after Close")
			}
			if !errors.Is(l.Err(), ErrClosed) || !errors.Is(l.Stop(), ErrClosed) {
				t.Errorf("Err %v, want ErrClosed", l.Err())
			}
		})
	}
}

func TestLoopPinCPU(t *testing.T) {
	_, b := genPair(t, false, nil)
	if _, err := StartLoop(b, LoopConfig{PinCPU: true, CPU: -1}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("CPU -1: %v, want ErrConfig", err)
	}
	l, err := StartLoop(b, LoopConfig{PinCPU: true, CPU: 0, Idle: Idle{Kind: IdleBlock, Park: time.Millisecond}},
		func([][]byte, []int, []netip.AddrPort) {})
	if errors.Is(err, ErrUnsupported) {
		t.Skip("CPU pinning unsupported here")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
}
