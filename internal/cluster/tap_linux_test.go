package cluster

import (
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
)

// TestTapStampsArrival: an output the tap's reader takes late is recorded
// at its arrival on the socket (the kernel's stamp), not at the read: a
// check of when a node sent must not blame the node for a slow reader.
func TestTapStampsArrival(t *testing.T) {
	tx, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	rxConn, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tap := NewTap(rxConn)
	defer tap.Close()
	frame, _ := outputFrame(t)
	bufs, sizes, from := [][]byte{make([]byte, 2048)}, []int{0}, []netip.AddrPort{{}}
	// send sends the frame, waits, reads it through the tap, and returns
	// the send's wall-clock window and the stamp recorded.
	send := func(wait time.Duration) (before, after, read, at time.Time) {
		t.Helper()
		before = time.Now().Round(0)
		if err := tx.Send([][]byte{frame}, rxConn.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		after = time.Now().Round(0)
		time.Sleep(wait)
		if n, err := tap.Receive(bufs, sizes, from, time.Second); err != nil || n != 1 {
			t.Fatalf("Receive: %d, %v", n, err)
		}
		read = time.Now().Round(0)
		seen := tap.Snapshot()
		return before, after, read, seen[len(seen)-1].At
	}
	// The kernel turns stamping on for the first socket in the system
	// from a work queue (until then the read's time is recorded): wait
	// for the first datagram stamped at its send (bounded).
	for i := 0; ; i++ {
		before, after, _, at := send(0)
		if !at.Before(before) && !at.After(after) {
			break
		}
		if i == 100 {
			t.Fatalf("no output stamped at its send after %d tries", i)
		}
		time.Sleep(5 * time.Millisecond)
	}
	before, after, read, at := send(30 * time.Millisecond)
	if at.Before(before) || at.After(after) {
		t.Errorf("recorded %v, outside the send [%v, %v]; read at %v", at, before, after, read)
	}
}
