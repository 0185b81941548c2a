package client

import (
	"net/netip"
	"slices"
	"sync/atomic"
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
// cadence. The clock is the test's: pollLocked takes now, and the
// client reads it for a command's send time.
func TestWitnessQueryCadence(t *testing.T) {
	conn, wit := memPair(t, "10.0.0.5:7000")
	var clock atomic.Int64
	clock.Store(monotime.Now())
	cl, err := Dial(Options{Core: Config{Session: 7}, Conn: conn, Poll: true,
		Primary: netip.MustParseAddrPort("10.0.0.1:7000"), Witness: wit.LocalAddr(),
		Nodes: map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("10.0.0.1:7000")}, clock: clock.Load})
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

	// Idle first, in the 300 ms before the command.
	t0 := clock.Load() - int64(300*time.Millisecond)
	if got := run(t0, 200*time.Millisecond); got < 1 || got > 3 {
		t.Fatalf("idle for 200 ms: %d witness queries, want 2 or 3 (one per 100 ms)", got)
	}
	if _, err := cl.Submit(&order); err != nil {
		t.Fatal(err)
	}
	t1 := clock.Load()
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
	var clock atomic.Int64 // the commands' send times
	clock.Store(monotime.Now())
	cl, err := Dial(Options{Core: Config{Session: 7}, Conn: conn, Poll: true, Primary: netip.MustParseAddrPort("10.0.0.1:7000"), clock: clock.Load})
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
	t0 := clock.Load()
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

// TestNotLeading: a NOT_LEADING from the node the client sends to makes it
// ask the witness at once and every timersEveryNs (not after its
// commands waited a fifth of QueryEvery, then every tenth); the holder
// the witness then names ends the hurry, and the quick resends to it
// come every timersEveryNs over the usual span. A notice from another
// address, or of an epoch older than the holder named, changes nothing.
func TestNotLeading(t *testing.T) {
	conn, wit := memPair(t, "10.0.0.5:7000")
	n1, n2 := netip.MustParseAddrPort("10.0.0.1:7000"), netip.MustParseAddrPort("10.0.0.2:7000")
	// The client's clock is the test's: the hurry after a notice is
	// QueryEvery long, and a loaded machine once took longer than that
	// between the notice and the witness's answer below.
	var clock atomic.Int64
	clock.Store(monotime.Now())
	cl, err := Dial(Options{Core: Config{Session: 7}, Conn: conn, Poll: true,
		Primary: n1, Witness: wit.LocalAddr(), Nodes: map[uint32]netip.AddrPort{1: n1, 2: n2}, clock: clock.Load})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	queries := func() int { n, _ := drain(t, wit); return n }
	notice := func(from netip.AddrPort, node uint32, epoch uint64) {
		f := (&wire.NotLeading{Origin: wire.Origin{Node: node, Epoch: epoch}}).Append(nil)
		cl.onBatch([][]byte{f}, []int{len(f)}, []netip.AddrPort{from})
	}
	poll := func(from, to int64) {
		for now := from; now < to; now += timersEveryNs {
			cl.mu.Lock()
			cl.pollLocked(now)
			cl.mu.Unlock()
		}
	}
	if _, err := cl.Submit(&order); err != nil {
		t.Fatal(err)
	}
	t0 := clock.Add(int64(time.Millisecond))
	poll(t0, t0+int64(time.Millisecond))
	queries()

	notice(n2, 2, 1) // not the node the client sends to
	if got, st := queries(), cl.Stats(); got != 0 || st.NotLeading != 0 {
		t.Fatalf("NOT_LEADING from another node: %d queries, NotLeading %d; want 0, 0", got, st.NotLeading)
	}
	notice(n1, 1, 1)
	if got, st := queries(), cl.Stats(); got != 1 || st.NotLeading != 1 {
		t.Fatalf("NOT_LEADING from the primary: %d queries at once, NotLeading %d; want 1, 1", got, st.NotLeading)
	}
	// The command is ~1 ms old: without the notice, no query for 100 ms.
	now := clock.Add(int64(time.Millisecond))
	poll(now, now+int64(10*time.Millisecond))
	clock.Store(now + int64(10*time.Millisecond))
	if got := queries(); got < 4 || got > 5 {
		t.Fatalf("10 ms after NOT_LEADING: %d queries, want 4 or 5 (one per %v)", got, time.Duration(timersEveryNs))
	}

	// The witness names node 2 at epoch 2: the client switches and resends.
	info := (&wire.Lease{Type: wire.TypeLeaseInfo, Origin: wire.Origin{Epoch: 2}, Holder: 2}).Append(nil)
	cl.onBatch([][]byte{info}, []int{len(info)}, []netip.AddrPort{wit.LocalAddr()})
	sw := cl.rejoinNs
	if cl.Primary() != n2 || cl.Failovers() != 1 {
		t.Fatalf("after the witness named node 2: primary %v, failovers %d", cl.Primary(), cl.Failovers())
	}
	if cl.rejoinEvery != timersEveryNs || cl.rejoinLeft != 25 || cl.hurryUntil != 0 {
		t.Fatalf("switch after NOT_LEADING: resends every %v, %d left, hurry until %d; want every %v, 25, 0",
			time.Duration(cl.rejoinEvery), cl.rejoinLeft, cl.hurryUntil, time.Duration(timersEveryNs))
	}
	// A stale notice (epoch 1, from the new primary's address) is ignored.
	notice(n2, 2, 1)
	if st := cl.Stats(); st.NotLeading != 1 || cl.hurryUntil != 0 {
		t.Fatalf("NOT_LEADING of epoch 1 after the witness named epoch 2: NotLeading %d, hurry %d; want 1, 0", st.NotLeading, cl.hurryUntil)
	}
	// Without a notice, a switch keeps the usual spacing.
	cl.mu.Lock()
	cl.switchedLocked(sw)
	cl.mu.Unlock()
	if cl.rejoinEvery != int64(DefaultQueryEvery)/10 || cl.rejoinLeft != rejoinResends {
		t.Fatalf("a switch with no notice: resends every %v, %d left; want %v, %d",
			time.Duration(cl.rejoinEvery), cl.rejoinLeft, DefaultQueryEvery/10, rejoinResends)
	}
}
