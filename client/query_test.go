package client

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/wire"
)

// memPair makes an in-memory network with the client's socket and a peer
// at peerAddr (the witness, a node) that the test reads; the peer closes
// at the end of the test, the client's socket with the client.
func memPair(t *testing.T, peerAddr string) (client, peer *bus.MemConn) {
	t.Helper()
	mem := bus.NewMemNetwork(1, bus.Faults{})
	peer, err := mem.Listen(netip.MustParseAddrPort(peerAddr), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	client, err = mem.Listen(netip.MustParseAddrPort("10.0.0.9:5000"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return client, peer
}

// drain reads everything waiting on c and returns the datagrams and the
// commands in them.
func drain(t *testing.T, c *bus.MemConn) (datagrams, commands int) {
	t.Helper()
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 65536)
	}
	sizes, from := make([]int, len(bufs)), make([]netip.AddrPort, len(bufs))
	for {
		n, err := c.Receive(bufs, sizes, from, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return datagrams, commands
		}
		datagrams += n
		for i := range n {
			if f, _, err := wire.Parse(bufs[i][:sizes[i]]); err == nil && f.Type == wire.TypeCommand {
				commands += int(f.Count)
			}
		}
	}
}

// TestWitnessQueryCadence: a client asks the witness who leads every
// QueryEvery, and ten times as often while a command waits unanswered
// for a fifth of it (the primary may be gone: the client finds the new
// one ~5 ms after the promotion, not ~50). An answer ends the fast
// cadence. The clock is the test's: pollLocked takes now.
func TestWitnessQueryCadence(t *testing.T) {
	conn, wit := memPair(t, "10.0.0.5:7000")
	cl, err := Dial(Options{Core: Config{Session: 7}, Conn: conn, Poll: true,
		Primary: netip.MustParseAddrPort("10.0.0.1:7000"), Witness: wit.LocalAddr(),
		Nodes: map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("10.0.0.1:7000")}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	queries := func() int { n, _ := drain(t, wit); return n }
	// run polls every 2 ms (PollIO's timer cadence) for d from start and
	// returns the witness queries sent.
	run := func(start int64, d time.Duration) int {
		for now := start; now < start+int64(d); now += timersEveryNs {
			cl.mu.Lock()
			cl.pollLocked(now)
			cl.mu.Unlock()
		}
		return queries()
	}

	// Idle first, in the 300 ms before the command (the command's send
	// time is the real clock's).
	t0 := monotime.Now() - int64(300*time.Millisecond)
	if got := run(t0, 200*time.Millisecond); got < 1 || got > 3 {
		t.Fatalf("idle for 200 ms: %d witness queries, want 2 or 3 (one per 100 ms)", got)
	}
	if _, err := cl.Submit(&order); err != nil {
		t.Fatal(err)
	}
	t1 := monotime.Now()
	if got := run(t1, 200*time.Millisecond); got < 16 || got > 21 {
		t.Fatalf("a command unanswered for 200 ms: %d witness queries, want ~18 (one per 10 ms after the first 20 ms)", got)
	}
	ack := engine.Output{Kind: engine.KindAck, ClientOrderID: 1, OrderID: 100, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}
	f := outputFrame(t, 1, 1, 1, ack)
	cl.onBatch([][]byte{f}, []int{len(f)}, nil)
	if n := cl.core.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the answer, want 0", n)
	}
	if got := run(t1+int64(200*time.Millisecond), 200*time.Millisecond); got > 3 {
		t.Fatalf("answered, then 200 ms: %d witness queries, want at most 3: the fast cadence must end with the answer", got)
	}
}

// TestRejoinResends: the witness names the new holder as it grants the
// lease, and the node promotes a few ms later, dropping the commands
// that reach it before. So after a switch the client resends everything
// in flight every tenth of QueryEvery until an answer arrives (at most
// rejoinResends times), not only after ResendAfterNs (250 ms).
func TestRejoinResends(t *testing.T) {
	conn, newPrimary := memPair(t, "10.0.0.2:7000")
	cl, err := Dial(Options{Core: Config{Session: 7}, Conn: conn, Poll: true, Primary: netip.MustParseAddrPort("10.0.0.1:7000")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const inFlight = 20
	for range inFlight {
		if _, err := cl.Submit(&order); err != nil {
			t.Fatal(err)
		}
	}
	t0 := monotime.Now()
	cl.mu.Lock()
	cl.primary = newPrimary.LocalAddr()
	cl.switchedLocked(t0)
	cl.mu.Unlock()
	if _, got := drain(t, newPrimary); got != inFlight {
		t.Fatalf("at the switch: %d commands resent, want %d", got, inFlight)
	}
	poll := func(at time.Duration) int {
		cl.mu.Lock()
		cl.pollLocked(t0 + int64(at))
		cl.mu.Unlock()
		_, n := drain(t, newPrimary)
		return n
	}
	if got := poll(5 * time.Millisecond); got != 0 {
		t.Fatalf("5 ms after the switch: %d resent, want 0 (the quick resends are 10 ms apart)", got)
	}
	var resent []int
	for at := 10 * time.Millisecond; at <= 100*time.Millisecond; at += 10 * time.Millisecond {
		resent = append(resent, poll(at))
	}
	want := []int{inFlight, inFlight, inFlight, inFlight, inFlight, 0, 0, 0, 0, 0}
	if !slices.Equal(resent, want) {
		t.Fatalf("resent every 10 ms after a switch with no answer: %v, want %v (rejoinResends of them, then none)", resent, want)
	}

	// A second switch, and an answer 12 ms after it: the quick resends stop.
	t1 := t0 + int64(200*time.Millisecond)
	cl.mu.Lock()
	cl.switchedLocked(t1)
	cl.mu.Unlock()
	drain(t, newPrimary)
	cl.mu.Lock()
	cl.pollLocked(t1 + int64(10*time.Millisecond))
	ack := engine.Output{Kind: engine.KindAck, ClientOrderID: 1, OrderID: 100, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}
	o := ack
	cl.core.OnOutput(&o, t1+int64(12*time.Millisecond))
	cl.mu.Unlock()
	if _, got := drain(t, newPrimary); got != inFlight {
		t.Fatalf("10 ms after the second switch: %d resent, want %d", got, inFlight)
	}
	for at := 20 * time.Millisecond; at <= 60*time.Millisecond; at += 10 * time.Millisecond {
		cl.mu.Lock()
		cl.pollLocked(t1 + int64(at))
		cl.mu.Unlock()
		if _, got := drain(t, newPrimary); got != 0 {
			t.Fatalf("%v after the switch, answered at 12 ms: %d resent, want 0", at, got)
		}
	}
}
