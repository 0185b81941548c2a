package node

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/wire"
)

// withAgent gives a hand-driven node the agent and its runner without
// starting the thread, so a test runs passes itself (runner.PassAt).
func withAgent(t testing.TB, n *Node) *agent {
	t.Helper()
	a, err := newAgent(n)
	if err != nil {
		t.Fatal(err)
	}
	n.agent = a
	return a
}

// The agent's pass runs the timer work when its deadline has passed by
// the clock it is given, and not before: there is no ticker goroutine.
func TestAgentPassRunsTimersByTheClock(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncNone)
	a := withAgent(t, n)
	mc := n.tr.Sockets().MulticastSend.(*nopEndpoint)
	before := mc.sent
	a.runner.PassAt(a.nextTickNs - 1)
	if mc.sent != before {
		t.Fatalf("a pass before the tick deadline sent %d multicast frames", mc.sent-before)
	}
	// Idle for 50 ms: the primary's heartbeat interval (10 ms) has passed.
	clk.ns += int64(50 * time.Millisecond)
	due := a.nextTickNs + int64(50*time.Millisecond)
	a.runner.PassAt(due)
	if mc.sent == before {
		t.Fatal("a pass past the tick deadline did not run the tick (no heartbeat)")
	}
	if a.nextTickNs <= due {
		t.Fatalf("next tick at %d, not after the pass at %d", a.nextTickNs, due)
	}
}

// The fsync thread only syncs and publishes the durable seq; the agent's
// next pass picks it up and releases (never the fsync thread, never a
// timer).
func TestAgentPicksUpDurableFromTheFsyncThread(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncGroup)
	a := withAgent(t, n)
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: 1}
	n.Deliver(ack.Append(nil), n.cfg.Peers[replayStandby])
	if r := n.Released(); r != 0 {
		t.Fatalf("released %d before anything was durable", r)
	}
	if err := n.j.Sync(); err != nil { // what the fsync thread does
		t.Fatal(err)
	}
	if r := n.Released(); r != 0 {
		t.Fatalf("released %d by the fsync alone", r)
	}
	a.runner.PassAt(clk.ns)
	if r := n.Released(); r != 1 {
		t.Fatalf("released %d after the agent's pass, want 1", r)
	}
}

// A pass that finds nothing allocates nothing.
func TestAgentEmptyPassDoesNotAllocate(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncGroup)
	a := withAgent(t, n)
	if allocs := testing.AllocsPerRun(100, func() { a.runner.PassAt(clk.ns) }); allocs != 0 {
		t.Fatalf("%.1f allocations per empty pass", allocs)
	}
}

// A parked agent is woken by the fsync thread through the eventfd: with
// ticks a minute apart, no status file, no resend and no other traffic,
// nothing else could wake it to release the outputs.
func TestFsyncThreadWakesParkedAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 1)
	defer c.closeAll()
	n := c.start(1, func(cfg *nodeconfig.Config) {
		cfg.Journal.Policy = journal.SyncGroup
		cfg.TickIntervalNs = int64(time.Minute)
		cfg.Idle.Kind = 0 // block: park at once
	})
	if !n.agent.runner.Polling() {
		t.Fatal("the agent has no poller on real sockets")
	}
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 7, ResendAfterNs: int64(time.Hour)}, Primary: c.addrs[1], Idle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 200, Count: 20, Seed: 1, Drain: 10 * time.Second}, nil)
	if err != nil || rep.Stats.Answered != 20 {
		t.Fatalf("load: %v, answered %d of 20 (parks %d)", err, rep.Stats.Answered, n.agent.runner.Parks())
	}
	if n.agent.runner.Parks() == 0 {
		t.Fatal("the agent never parked")
	}
}

// A status write that hangs (a stuck disk) stops nothing: the agent keeps
// running its timers (heartbeats go out) while the writer is stuck.
func TestHungStatusWriteStopsNoTimers(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 1)
	defer c.closeAll()
	stuck := make(chan struct{})
	var entered atomic.Bool
	cfg := c.config(1)
	cfg.StatusFile = t.TempDir() + "/status.json"
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.statusWrite = func(path string, b []byte) error {
		entered.Store(true)
		<-stuck
		return status.WriteFileAtomic(path, b)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	c.nodes[1] = n
	defer close(stuck)
	deadline := time.Now().Add(10 * time.Second)
	for !entered.Load() {
		if time.Now().After(deadline) {
			t.Fatal("no status write began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sent := n.Status().MulticastSend.DatagramsSent
	for n.Status().MulticastSend.DatagramsSent < sent+5 {
		if time.Now().After(deadline) {
			t.Fatalf("heartbeats stopped while the status write hung (%d sent)", n.Status().MulticastSend.DatagramsSent)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Pending, the agent's half of the wake handshake, sees everything the
// other threads publish before they wake the runner: a durable rise and
// a failed fsync (the fsync thread), a finished recompute. The park's
// check once missed the recompute, which then waited for the next tick.
func TestAgentPendingSeesEveryPublication(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncGroup)
	a := withAgent(t, n)
	if a.Pending() {
		t.Fatal("pending with nothing published")
	}
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	if err := n.j.Sync(); err != nil {
		t.Fatal(err)
	}
	if !a.Pending() {
		t.Fatal("a durable rise is not pending")
	}
	a.runner.PassAt(clk.ns)
	if a.Pending() {
		t.Fatal("still pending after the pass took the durable rise")
	}
	n.cfg.FS.(*journal.MemFS).SetSyncError(errors.New("disk gone"))
	n.Deliver(commandFrame(7, 2, 100), replayClient)
	n.commit.Commit() // the fsync thread's commit, failing
	if !a.Pending() {
		t.Fatal("a failed fsync is not pending")
	}
	a.runner.PassAt(clk.ns)
	n.recompute.done.Store(&session.Result{})
	if !a.Pending() {
		t.Fatal("a finished recompute is not pending")
	}
}

// slowSyncFS is a journal FS whose fsyncs take at least delay: a disk
// slower than the inline bound.
type slowSyncFS struct {
	journal.FS
	delay time.Duration
}

type slowSyncFile struct {
	journal.File
	delay time.Duration
}

func (s slowSyncFS) OpenFile(name string, flag int, perm os.FileMode) (journal.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{File: f, delay: s.delay}, nil
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.delay) // the disk's own time, not a wait for anything in the test
	return f.File.Sync()
}

// A primary and a standby on real sockets under fsync group with an
// inline bound: on a disk faster than the bound both fsync mostly on
// their agents, on one slower than it both keep the fsync thread after the one
// inline fsync that measured the disk; every command is answered either
// way, and everything is durable on both. (The bounds are set for
// journal.MemFS under the race detector, not the production default.)
func TestInlineFsyncFollowsTheDisk(t *testing.T) {
	defer goleak.VerifyNone(t)
	// The fast disk's bound is far above MemFS's fsyncs even with the
	// race detector and a loaded machine preempting the agent mid-fsync:
	// a 10 ms bound once measured MemFS at 14 ms on average under CI-like
	// load (go test -p 4 beside a disk writer). The slow disk's fsync
	// sleeps four times its bound, so it is measured slow however loaded
	// the machine is.
	const slowBound = 10 * time.Millisecond
	for _, disk := range []struct {
		name  string
		fs    func() journal.FS
		bound time.Duration
		fast  bool
	}{
		{"fast", func() journal.FS { return journal.NewMemFS() }, 250 * time.Millisecond, true},
		{"slow", func() journal.FS { return slowSyncFS{FS: journal.NewMemFS(), delay: 4 * slowBound} }, slowBound, false},
	} {
		t.Run(disk.name, func(t *testing.T) {
			c := newCluster(t, 2)
			defer c.closeAll()
			mutate := func(cfg *nodeconfig.Config) {
				cfg.Journal.Policy = journal.SyncGroup
				cfg.FS = disk.fs()
				cfg.FsyncInlineBelowNs = int64(disk.bound)
			}
			c.start(2, mutate)
			c.start(1, mutate)
			cl, err := client.Dial(client.Options{Core: client.Config{Session: 7}, Primary: c.addrs[1], Idle: testIdle})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			const count = 200
			rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 1000, Count: count, Seed: 1, Drain: 10 * time.Second}, nil)
			if err != nil || rep.Stats.Answered != count {
				t.Fatalf("load: %v, answered %d of %d", err, rep.Stats.Answered, count)
			}
			for _, id := range []uint32{1, 2} {
				st := c.nodes[id].Status()
				f := st.Fsync
				if st.Durable < count {
					t.Errorf("node %d: durable %d, want %d", id, st.Durable, count)
				}
				if disk.fast && f.Inline <= f.Thread {
					t.Errorf("node %d on a fast disk: fsyncs %+v, want most inline", id, f)
				}
				if !disk.fast && (f.Inline > 1 || f.Thread == 0) {
					t.Errorf("node %d on a slow disk: fsyncs %+v, want at most the first inline, the rest on the thread", id, f)
				}
			}
		})
	}
}
