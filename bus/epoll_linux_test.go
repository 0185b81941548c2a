package bus

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func newPollerWith(t *testing.T, socks ...*UDP) *Poller {
	t.Helper()
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, u := range socks {
		if err := p.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func unicast(t *testing.T) *UDP {
	t.Helper()
	u, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// A park on several sockets returns when a datagram arrives on any of
// them, reports which one (bit i for the i-th added), and keeps reporting
// it until it is read (level-triggered). The park's bound is a minute: only
// the arrival can end it in time.
func TestPollerWakesOnArrival(t *testing.T) {
	a, b, sender := unicast(t), unicast(t), unicast(t)
	p := newPollerWith(t, a, b)
	if p.Sockets() != 2 {
		t.Fatalf("%d sockets", p.Sockets())
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		_ = sender.Send([][]byte{[]byte("x")}, b.LocalAddr())
	}()
	ready, err := p.Wait(int64(time.Minute))
	if err != nil || ready != 1<<1 {
		t.Fatalf("Wait = %b, %v; want socket 1 ready", ready, err)
	}
	if ready, _ := p.Wait(0); ready != 1<<1 {
		t.Fatalf("unread datagram: Wait(0) = %b, want it reported again", ready)
	}
	bufs, sizes, from := [][]byte{make([]byte, 16)}, make([]int, 1), make([]netip.AddrPort, 1)
	if n, err := b.Receive(bufs, sizes, from, 0); n != 1 || err != nil {
		t.Fatalf("Receive = %d, %v", n, err)
	}
	if ready, _ := p.Wait(0); ready != 0 {
		t.Fatalf("after the read: Wait(0) = %b, want nothing ready", ready)
	}
}

// Wake from another goroutine ends a park at once and is consumed by it;
// wakes before a park are not lost (the eventfd counts them).
func TestPollerWake(t *testing.T) {
	p := newPollerWith(t, unicast(t))
	go func() {
		time.Sleep(20 * time.Millisecond)
		_ = p.Wake()
	}()
	ready, err := p.Wait(int64(time.Minute))
	if err != nil || ready != PollWoken {
		t.Fatalf("Wait = %b, %v; want woken only", ready, err)
	}
	if ready, _ := p.Wait(0); ready != 0 {
		t.Fatalf("the wake was not consumed: %b", ready)
	}
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	if ready, _ := p.Wait(int64(time.Minute)); ready != PollWoken {
		t.Fatalf("a wake before the park was lost: %b", ready)
	}
	if ready, _ := p.Wait(0); ready != 0 {
		t.Fatalf("two wakes before a park: still woken on the second Wait (%b)", ready)
	}
}

// Every park is bounded: with nothing arriving it returns nothing after
// its timeout, both below the hold-the-P bound and above it; a negative
// timeout is refused; a zero timeout polls.
func TestPollerTimeouts(t *testing.T) {
	p := newPollerWith(t, unicast(t))
	for _, d := range []time.Duration{0, 2 * time.Millisecond, 30 * time.Millisecond} {
		start := time.Now()
		ready, err := p.Wait(int64(d))
		if err != nil || ready != 0 {
			t.Fatalf("Wait(%v) = %b, %v", d, ready, err)
		}
		if el := time.Since(start); el < d {
			t.Fatalf("Wait(%v) returned after %v", d, el)
		}
	}
	if _, err := p.Wait(-1); !errors.Is(err, ErrConfig) {
		t.Fatalf("negative timeout: %v, want ErrConfig", err)
	}
}

// Polling and parking allocate nothing.
func TestPollerDoesNotAllocate(t *testing.T) {
	p := newPollerWith(t, unicast(t), unicast(t))
	allocs := testing.AllocsPerRun(100, func() {
		_ = p.Wake()
		if ready, err := p.Wait(int64(time.Second)); ready != PollWoken || err != nil {
			t.Fatalf("Wait = %b, %v", ready, err)
		}
		if _, err := p.Wait(0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per wake and poll", allocs)
	}
}

// After Close, Wake says so rather than write to a reused fd number.
func TestPollerClose(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wake(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wake after Close: %v", err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}
