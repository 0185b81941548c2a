package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/nodeconfig"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

var testIdle = bus.Idle{Kind: bus.IdleBlock}

// freePort returns a UDP port on 127.0.0.1 that was free a moment ago.
// It is picked below the kernel's ephemeral range (32768 and up by
// default), from a per-process random start, so a socket another test or
// process binds to port 0 in the meantime (a client, a probe) never takes
// it between this check and the node's bind.
func freePort(t testing.TB) uint16 {
	t.Helper()
	for i := 0; i < 1000; i++ {
		p := testPortLow + int(testPortNext.Add(1))%testPortSpan
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err != nil {
			continue // taken: try the next one
		}
		c.Close()
		return uint16(p)
	}
	t.Fatal("no free UDP port in the test range")
	return 0
}

// The test port range, and the next offset into it (random per process,
// so parallel test binaries start far apart).
const testPortLow, testPortSpan = 20000, 12000

var testPortNext = func() *atomic.Uint32 {
	var n atomic.Uint32
	n.Store(uint32(rand.IntN(testPortSpan)))
	return &n
}()

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEngine() (engine.StateMachine, error) {
	return engine.New(engine.NodeConfig())
}

type cluster struct {
	t     testing.TB
	group netip.AddrPort
	addrs map[uint32]netip.AddrPort
	dirs  map[uint32]string
	nodes map[uint32]*Node
}

// newCluster describes n nodes on loopback (node 1 the static primary) on
// a random multicast group and port, so parallel tests never share one.
func newCluster(t testing.TB, n int) *cluster {
	c := &cluster{t: t, addrs: map[uint32]netip.AddrPort{}, dirs: map[uint32]string{}, nodes: map[uint32]*Node{}}
	c.group = netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 77, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), freePort(t))
	for id := uint32(1); id <= uint32(n); id++ {
		c.addrs[id] = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), freePort(t))
		c.dirs[id] = t.TempDir()
	}
	return c
}

func (c *cluster) config(id uint32) nodeconfig.Config {
	peers := map[uint32]netip.AddrPort{}
	for pid, a := range c.addrs {
		if pid != id {
			peers[pid] = a
		}
	}
	cfg := nodeconfig.Config{
		ID: id, Stream: 9, Dir: c.dirs[id], Listen: c.addrs[id], Group: c.group, Interface: "lo",
		Peers: peers, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 20},
		NewStateMachine: newEngine, Log: testLogger(c.t).With("node", id), Idle: testIdle,
	}
	if id == 1 {
		cfg.Role, cfg.Epoch = nodeconfig.RolePrimary, 1
	}
	return cfg
}

func (c *cluster) start(id uint32, mutate func(*nodeconfig.Config)) *Node {
	cfg := c.config(id)
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		c.t.Fatalf("node %d: %v", id, err)
	}
	if err := n.Start(); err != nil {
		c.t.Fatalf("node %d start: %v", id, err)
	}
	c.nodes[id] = n
	return n
}

func (c *cluster) stop(id uint32) {
	if n := c.nodes[id]; n != nil {
		n.Close()
		delete(c.nodes, id)
	}
}

func (c *cluster) closeAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

// waitConverged waits until every node applied the primary's last seq with
// its state hash.
func (c *cluster) waitConverged(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := c.nodes[1].Status()
		ok := true
		var msg string
		for id, n := range c.nodes {
			s := n.Status()
			if s.Applied != p.Applied || s.StateHash != p.StateHash {
				ok = false
				msg = fmt.Sprintf("node %d applied %d hash %x; primary %d %x", id, s.Applied, s.StateHash, p.Applied, p.StateHash)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not converged: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dialClient(t testing.TB, primary netip.AddrPort, session uint64) *client.Client {
	cl, err := client.Dial(client.Options{Core: client.Config{Session: session, MaxInFlight: 1024}, Primary: primary, Idle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestReplicatesAndGates(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 3)
	defer c.closeAll()
	for id := uint32(1); id <= 3; id++ {
		c.start(id, nil)
	}
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: 20_000, Seed: 1, Drain: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("load: %v (%+v)", err, rep)
	}
	// Resends (answered from the dedup table as duplicates) are legitimate
	// when the shared machine stalls a process past the resend timeout.
	if rep.Stats.Duplicates > 0 {
		t.Logf("%d resends answered as duplicates", rep.Stats.Duplicates)
	}
	if rep.Stats.Answered != 20_000 {
		for id, n := range c.nodes {
			t.Logf("node %d: %+v", id, n.Status())
		}
		t.Fatalf("answered %d duplicates %d: %+v", rep.Stats.Answered, rep.Stats.Duplicates, rep)
	}
	c.waitConverged(10 * time.Second)
	p := c.nodes[1].Status()
	if p.Released != p.Applied || p.Applied < 20_000 || p.Applied > 20_000+rep.Stats.Resent {
		t.Fatalf("primary applied %d released %d", p.Applied, p.Released)
	}
	for id := uint32(2); id <= 3; id++ {
		s := c.nodes[id].Status()
		if s.Journal.LastSeq != p.Applied {
			t.Fatalf("standby %d journal ends at %d", id, s.Journal.LastSeq)
		}
	}
}

// TestReplicatesWithGRO: with UDP_GRO on every node socket (--gro) a
// standby reads the primary's segmented DATA runs whole, cuts them back
// into frames, and everything is answered and replicated as without it.
func TestReplicatesWithGRO(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	gro := func(cfg *nodeconfig.Config) { cfg.Tuning.GRO = true }
	c.start(1, gro)
	c.start(2, gro)
	for _, r := range c.nodes[2].SocketReports() {
		if !r.SendOnly && !r.GRO {
			t.Skipf("the kernel refused UDP_GRO on %v: %v", r.Local, r.GROErr)
		}
	}
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	const count = 20_000
	rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 200_000, Count: count, Seed: 1, Drain: 10 * time.Second}, nil)
	if err != nil || rep.Stats.Answered != count {
		t.Fatalf("load: %v, answered %d of %d (%+v)", err, rep.Stats.Answered, count, rep)
	}
	c.waitConverged(10 * time.Second)
	s := c.nodes[2].Status()
	if p := c.nodes[1].Status(); s.Journal.LastSeq != p.Applied || p.Released != p.Applied {
		t.Fatalf("standby journal ends at %d; primary applied %d, released %d", s.Journal.LastSeq, p.Applied, p.Released)
	}
	m := s.Multicast.Counters
	t.Logf("standby read %d DATA datagrams, %d of the reads coalesced runs", m.DatagramsReceived, m.CoalescedReceives)
}

// (TestGateHoldsWithoutStandbyAck, which slept to see that nothing was
// released without a standby's ack, is replica/testdata/gating.txt now:
// the same rule, in the core, with no clock.)

// TestAckDelayBatchesAcks: with AckDelayNs a standby sends far fewer acks,
// and everything is still released.
func TestAckDelayBatchesAcks(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	c.start(1, nil)
	const delay = 20 * time.Millisecond
	c.start(2, func(cfg *nodeconfig.Config) { cfg.AckDelayNs = int64(delay) })
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 5_000, Count: 5_000, Seed: 2, Drain: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("load: %v %+v", err, rep)
	}
	st := c.nodes[2].Status()
	up := time.Duration(st.UptimeNs)
	bound := uint64(up/delay + up/time.Duration(nodeconfig.DefaultAckIntervalNs) + 10)
	if st.Node.AcksSent > bound {
		t.Fatalf("%d acks in %v with a %v ack delay (bound %d)", st.Node.AcksSent, up, delay, bound)
	}
	t.Logf("%d acks in %v (bound %d)", st.Node.AcksSent, up, bound)
}

// TestSyncFailureStopsReleases: when the primary's disk refuses fsync,
// nothing more becomes durable, so nothing more is released, and the node
// says so (counted, logged once) instead of releasing undurable outputs.
func TestSyncFailureStopsReleases(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	disk := journal.NewMemFS()
	c.start(1, func(cfg *nodeconfig.Config) { cfg.FS = disk; cfg.Journal.Policy = journal.SyncAlways })
	c.start(2, nil)
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	order := &engine.Request{Op: engine.OpNewOrder, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}
	submitAndWait := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := cl.Submit(order); err != nil {
				t.Fatal(err)
			}
		}
	}
	submitAndWait(5)
	deadline := time.Now().Add(5 * time.Second)
	for cl.Stats().Answered < 5 {
		if time.Now().After(deadline) {
			t.Fatal("not released with a healthy disk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	disk.SetSyncError(errors.New("disk on fire"))
	submitAndWait(5)
	// At least one new command is applied (journaled, unsynced) and the
	// fsync has failed. Not necessarily all five: once the fsync failed the
	// journal is failed for good and refuses later appends, so commands
	// arriving in later batches are never applied (the client resends).
	deadline = time.Now().Add(10 * time.Second)
	for st := c.nodes[1].Status(); st.Applied <= 5 || st.Node.SyncErrors == 0; st = c.nodes[1].Status() {
		if time.Now().After(deadline) {
			t.Fatalf("after the disk failed: applied %d, sync errors %d", st.Applied, st.Node.SyncErrors)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	st := c.nodes[1].Status()
	if st.Released != 5 || cl.Stats().Answered != 5 || st.Node.SyncErrors == 0 {
		t.Fatalf("released %d, answered %d, sync errors %d after the disk failed", st.Released, cl.Stats().Answered, st.Node.SyncErrors)
	}
}

// A node whose port is taken fails to start before it touches its
// directory: nothing is created, locked or marked new, so fixing the
// port and starting again finds the directory as it was (here: none).
func TestPortInUseTouchesNoDirectory(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 1)
	pc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(c.addrs[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	cfg := c.config(1)
	cfg.Dir = c.dirs[1] + "/node"
	if n, err := New(cfg); err == nil {
		n.Close()
		t.Fatal("a node started on a port in use")
	}
	if _, err := os.Stat(cfg.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory after a failed bind: %v, want none", err)
	}
}
