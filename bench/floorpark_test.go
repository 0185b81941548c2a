package bench

import (
	"context"
	"net/netip"
	"runtime"
	"testing"

	"github.com/seqbus/seqbus/bus"
)

// TestFloorClientParks: the floor's open-loop client parks on its socket
// between sends, as client.Load does, and reads it about once per reply:
// almost no receive finds the socket empty (before, every spin and yield
// pass polled it). Counted by the socket, not by the wall clock; the echo
// runs in-process.
func TestFloorClientParks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrCh := make(chan netip.AddrPort, 1)
	done := make(chan error, 1)
	go func() {
		done <- ServeEcho(ctx, EchoConfig{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Idle: "block"}, func(a netip.AddrPort) { addrCh <- a })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	echo := <-addrCh
	const count = 1000
	cfg, err := FloorConfig{Binary: "unused", Hops: 2, Idle: "block", Rate: 5000, Count: count, Park: true}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	u, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	c := newFloorClient(cfg, u, echo)
	runtime.LockOSThread()
	res, err := c.run(ctx)
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != count || res.Pace.Sent != count {
		t.Fatalf("received %d, pace %+v, want %d", res.Received, res.Pace, count)
	}
	st := u.Counters()
	var reads uint64
	for _, b := range st.ReceiveBatches {
		reads += b
	}
	replies := uint64(count + cfg.Warmup)
	t.Logf("%d replies: %d reads, %d empty receives", replies, reads, st.EmptyReceives)
	// A generator behind its schedule reads after each send and may find
	// nothing: about once per reply at worst (765 of 1000 under CI's
	// load). Polling every pass, as before the park, makes one every
	// microsecond or so: about 200,000 over this run's 0.2 s. The bound
	// sits between the two, far from both.
	if max := 10 * replies; st.EmptyReceives > max {
		t.Fatalf("%d empty receives for %d replies, want at most %d: the generator polls instead of parking", st.EmptyReceives, replies, max)
	}
	if c.rx.P != nil || c.rx.Closed() {
		t.Fatal("run left its park open")
	}
}
