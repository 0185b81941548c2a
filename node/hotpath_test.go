package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// drivenPrimary is a static primary driven by hand (no Start, so no
// fsync thread takes the syncer's kicks: TakeKick sees them).
func drivenPrimary(tb testing.TB, policy journal.SyncPolicy) (*Node, *stepClock) {
	return drivenPrimaryWith(tb, policy, nopNetwork{})
}

// drivenPrimaryOn is drivenPrimary (fsync none) on the given network.
func drivenPrimaryOn(tb testing.TB, nw transport.Network) (*Node, *stepClock) {
	return drivenPrimaryWith(tb, journal.SyncNone, nw)
}

func drivenPrimaryWith(tb testing.TB, policy journal.SyncPolicy, nw transport.Network) (*Node, *stepClock) {
	tb.Helper()
	return drivenPrimaryOnFS(tb, policy, nw, journal.NewMemFS(), "/j")
}

// drivenPrimaryFS is drivenPrimary with its journal in dir on fs.
func drivenPrimaryFS(tb testing.TB, policy journal.SyncPolicy, fs journal.FS, dir string) (*Node, *stepClock) {
	tb.Helper()
	return drivenPrimaryOnFS(tb, policy, nopNetwork{}, fs, dir)
}

func drivenPrimaryOnFS(tb testing.TB, policy journal.SyncPolicy, nw transport.Network, fs journal.FS, dir string, mods ...func(*nodeconfig.Config)) (*Node, *stepClock) {
	tb.Helper()
	clk := &stepClock{ns: 1}
	cfg := nodeconfig.Config{
		ID: 1, Stream: 9, Dir: dir, FS: fs, Network: nw, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{replayStandby: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RolePrimary, Epoch: 1, Journal: journal.Options{Policy: policy, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	return n, clk
}

// Under fsync none a command is durable when its batch is written, and
// nobody is woken for it: no kick of the syncer (issue 18, item 2).
func TestSyncNoneWakesNoSyncer(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncNone)
	for i := range uint64(5) {
		n.Deliver(commandFrame(7, i+1, 100), replayClient)
		clk.ns += int64(time.Millisecond)
		n.Tick()
	}
	st := n.Status()
	if st.Applied != 5 || st.Durable != 5 {
		t.Fatalf("applied %d durable %d, want 5 and 5", st.Applied, st.Durable)
	}
	if n.commit.TakeKick() {
		t.Fatal("fsync none kicked the syncer")
	}
}

// Under fsync group a batch that appended something wakes the syncer; a
// tick with nothing new to sync does not.
func TestSyncGroupKicksOnlyForUnsynced(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncGroup)
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	if !n.commit.TakeKick() {
		t.Fatal("an append did not kick the syncer")
	}
	clk.ns += int64(50 * time.Millisecond)
	if !n.SyncStep() {
		t.Fatal("the group commit did not sync")
	}
	if st := n.Status(); st.Durable != 1 {
		t.Fatalf("durable %d after the sync, want 1", st.Durable)
	}
	for range 3 {
		clk.ns += int64(time.Millisecond)
		n.Tick()
	}
	if n.commit.TakeKick() {
		t.Fatal("ticks with nothing to sync kicked the syncer")
	}
}

// With FsyncInlineBelowNs and a fast disk, the pass that appends a
// command fsyncs it itself: durable at once, the fsync thread never
// kicked, and the standby's ack releases the output with no fsync thread,
// SyncStep or agent pass in between. Without it, nothing is released
// until the fsync thread's commit has been picked up.
func TestInlineFsyncReleasesInThePass(t *testing.T) {
	for _, inline := range []bool{false, true} {
		n, _ := drivenPrimaryOnFS(t, journal.SyncGroup, nopNetwork{}, journal.NewMemFS(), "/j", func(cfg *nodeconfig.Config) {
			if inline {
				cfg.FsyncInlineBelowNs = nodeconfig.DefaultFsyncInlineBelowNs
			}
		})
		n.Deliver(commandFrame(7, 1, 100), replayClient)
		kicked := n.commit.TakeKick()
		ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: 1}
		n.Deliver(ack.Append(nil), n.cfg.Peers[replayStandby])
		st := n.Status()
		if inline {
			if kicked || st.Durable != 1 || st.Released != 1 || st.Fsync.Inline != 1 || st.Fsync.Thread != 0 {
				t.Fatalf("inline: kicked %v, durable %d, released %d, fsyncs %+v; want no kick, 1, 1, one inline", kicked, st.Durable, st.Released, st.Fsync)
			}
		} else if !kicked || st.Durable != 0 || st.Released != 0 || st.Fsync.Inline != 0 {
			t.Fatalf("on the thread: kicked %v, durable %d, released %d, fsyncs %+v; want a kick and nothing durable yet", kicked, st.Durable, st.Released, st.Fsync)
		}
	}
}

// The fsync thread's group commit allocates nothing (it did once per
// sync: the error's address escaped), so fsync group keeps the hot
// path's zero mallocs per command (issue 18).
func TestGroupCommitAllocatesNothing(t *testing.T) {
	n, clk := drivenPrimaryFS(t, journal.SyncGroup, journal.OSFS{}, t.TempDir())
	withAgent(t, n)
	id := uint64(0)
	allocs := testing.AllocsPerRun(200, func() {
		id++
		n.mu.Lock()
		if err := n.j.Append(1, id, []byte("record"), clk.ns); err != nil {
			t.Fatal(err)
		}
		if err := n.j.Flush(); err != nil {
			t.Fatal(err)
		}
		n.mu.Unlock()
		before := n.j.Durable()
		n.commit.Commit()
		if n.j.Durable() <= before {
			t.Fatalf("durable %d after a sync, was %d", n.j.Durable(), before)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per group commit, want 0", allocs)
	}
}

// The status file is marshalled and written with the node's lock free: a
// slow disk delays no command (issue 18, item 5). The write hook checks
// that the lock is free while it runs, on the ticker's path and Close's.
func TestStatusWrittenOffTheLock(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncNone)
	n.cfg.StatusFile = t.TempDir() + "/status.json"
	var writes, lockedWrites int
	var last status.Status
	n.statusWrite = func(path string, b []byte) error {
		writes++
		if !n.mu.TryLock() {
			lockedWrites++
		} else {
			n.mu.Unlock()
		}
		if err := json.Unmarshal(b, &last); err != nil {
			t.Errorf("status does not parse: %v", err)
		}
		return status.WriteFileAtomic(path, b)
	}
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	clk.ns += int64(time.Millisecond)
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: 1}
	n.Deliver(ack.Append(nil), n.cfg.Peers[replayStandby])
	n.publishStatus()
	if writes != 1 || last.Applied != 1 || last.Role != "primary" {
		t.Fatalf("%d writes, last applied %d role %q; want 1 write of applied 1 as primary", writes, last.Applied, last.Role)
	}
	// The release's latency percentiles, read off the lock
	// (finishStatus), are in the file.
	if last.Released != 1 || last.LatencyUs["count"] != 1 || last.LatencyUs["p50"] < 1000 || last.LatencyUs["p50"] > 1010 || last.WrittenAt == "" {
		t.Fatalf("released %d, latency_us %v, written_at %q; want 1 release of 1 ms (1 %%) and the write time", last.Released, last.LatencyUs, last.WrittenAt)
	}
	n.Deliver(commandFrame(7, 2, 100), replayClient)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if writes != 2 || last.Applied != 2 {
		t.Fatalf("Close: %d writes, last applied %d; want the final status (2 writes, applied 2)", writes, last.Applied)
	}
	if lockedWrites != 0 {
		t.Fatalf("%d of %d status writes ran under the node's lock", lockedWrites, writes)
	}
	b, err := os.ReadFile(n.cfg.StatusFile)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk status.Status
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.Applied != 2 {
		t.Fatalf("status.json on disk: applied %d, err %v", onDisk.Applied, err)
	}
}

// On real sockets on one host, the primary's multicast receiver gets none
// of its own DATA (it left the group), while the same-host standby, whose
// socket shares the host and the sender's loopback, gets and applies all
// of it (issue 18, item 4).
func TestPrimaryDoesNotReceiveItsOwnMulticast(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	c.start(1, nil)
	c.start(2, nil)
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 5_000, Count: 500, Seed: 1, Drain: 10 * time.Second}, nil)
	if err != nil || rep.Stats.Answered != 500 {
		t.Fatalf("load: %v, answered %d of 500", err, rep.Stats.Answered)
	}
	c.waitConverged(10 * time.Second)
	p, s := c.nodes[1].Status(), c.nodes[2].Status()
	if got := p.Multicast.DatagramsReceived; got != 0 {
		t.Fatalf("the primary's multicast receiver got %d datagrams (%d its own), want 0", got, p.Multicast.Drops.OwnFrame)
	}
	if s.Multicast.DatagramsReceived == 0 || s.Applied != p.Applied {
		t.Fatalf("standby: %d multicast datagrams, applied %d of %d", s.Multicast.DatagramsReceived, s.Applied, p.Applied)
	}
	if p.Node.GroupMembershipErrors != 0 {
		t.Fatalf("%d group membership errors", p.Node.GroupMembershipErrors)
	}
}

// memberEndpoint records group membership changes.
type memberEndpoint struct {
	nopEndpoint
	joined bool
	calls  int
}

func (e *memberEndpoint) LeaveGroup() error  { e.joined = false; e.calls++; return nil }
func (e *memberEndpoint) RejoinGroup() error { e.joined = true; e.calls++; return nil }

type memberNetwork struct {
	nopNetwork
	mc *memberEndpoint
}

func (m memberNetwork) MulticastReceiver(netip.AddrPort, string, bus.Filter) (transport.Endpoint, error) {
	return m.mc, nil
}

// A primary leaves the group when it starts leading and rejoins it when it
// steps down to follow a newer epoch.
func TestPrimaryLeavesGroupAndRejoinsOnStepDown(t *testing.T) {
	clk := &stepClock{ns: 1}
	mc := &memberEndpoint{joined: true}
	cfg := nodeconfig.Config{
		ID: 1, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: memberNetwork{mc: mc}, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{replayStandby: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RolePrimary, Epoch: 1, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if mc.joined || n.Role() != nodeconfig.RolePrimary {
		t.Fatalf("leading, still joined (%v) or role %v", mc.joined, n.Role())
	}
	n.mu.Lock()
	rd := n.rep.Roles().Lease(replica.Decision{Do: replica.StepDown, Epoch: 2})
	n.stepDown(&rd)
	n.mu.Unlock()
	if !mc.joined || n.Role() != nodeconfig.RoleStandby {
		t.Fatalf("stepped down, joined %v, role %v", mc.joined, n.Role())
	}
}
