package bus

import (
	"testing"
	"time"
)

// TestReceiveStamp: the kernel's stamp is when the datagram reached the
// socket (inside the sender's sendto, on loopback), not when the reader
// took it: a reader that comes late reads the sender's time.
func TestReceiveStamp(t *testing.T) {
	a, b := genPair(t, true, nil)
	ub := b.(*UDP)
	if _, ok := ub.ReceiveStamp(); ok {
		t.Fatalf("ReceiveStamp before any datagram: ok")
	}
	rx := newBatch(4, 256)
	// send sends one datagram, waits, reads it, and returns the send's
	// wall-clock window, the read's time and the stamp.
	send := func(wait time.Duration) (before, after, read, at time.Time) {
		t.Helper()
		before = time.Now().Round(0) // wall clock: the stamp has no monotonic reading
		if err := a.Send([][]byte{[]byte("x")}, ub.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		after = time.Now().Round(0)
		time.Sleep(wait)
		n, err := ub.Receive(rx.bufs, rx.sizes, rx.from, time.Second)
		if err != nil || n != 1 {
			t.Fatalf("Receive: %d, %v", n, err)
		}
		read = time.Now().Round(0)
		at, ok := ub.ReceiveStamp()
		if !ok {
			t.Fatalf("no stamp after a datagram")
		}
		return before, after, read, at
	}
	// The kernel turns stamping on for the first socket in the system
	// from a work queue: until it has, a datagram reads as the time of
	// the call. Wait for the first stamped one (bounded).
	for i := 0; ; i++ {
		before, after, _, at := send(0)
		if !at.Before(before) && !at.After(after) {
			break
		}
		if i == 100 {
			t.Fatalf("no datagram stamped at its send after %d tries", i)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for round := range 3 {
		// The reader comes late on purpose: the stamp must not move.
		before, after, read, at := send(20 * time.Millisecond)
		if at.Before(before) || at.After(after) {
			t.Errorf("round %d: stamp %v outside the send [%v, %v] (read at %v)", round, at, before, after, read)
		}
		if !at.Before(read) {
			t.Errorf("round %d: stamp %v not before the late read %v", round, at, read)
		}
	}
}
