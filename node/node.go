package node

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/lease"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/snapshot"
	"github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/storage"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// assignMask sizes the ring of assign times (64k seqs in flight).
const assignMask = 1<<16 - 1

// Node is one seqbus process.
type Node struct {
	cfg nodeconfig.Config

	mu sync.Mutex

	// st: the journal, the snapshots, the state machine rebuilt from
	// them and the refetch state (package storage). j and snaps are its
	// journal and snapshot store, the same objects for the node's life.
	st    *storage.Storage
	j     *journal.Journal
	snaps *snapshot.Store

	// rep: the protocol's state across roles (replica.Replica): the
	// term (role, epoch, fence, history), the in-sync set, the disk
	// watch, the history id, the follower core, the leader core of the
	// term led, the session table and the followed primary's address;
	// node carries out what it decides.
	rep   *replica.Replica[netip.AddrPort]
	lease *lease.Client // keeper and backend (nil for a static node)
	rel   releaseTrack  // assign -> release latency, first release, observer

	replayState // session replay: the output history and its budget
	lifecycle   // the agent, the fsync thread's kick, stop, status writer

	// tr: the sockets, the MACs and the pass's send queue.
	tr       *transport.Transport
	frameBuf []byte // scratch: one frame being encoded, reused

	stages nodeconfig.StageObserver // Config.Observer, if it implements it
	stats  status.Stats
	md     mdState // market-data ring and recovery (mdfeed.go)
}

// replayState is session replay's (sessionreplay.go): the core (the
// output history, the request budget, the recompute slot, the replay
// frame), a standby's recording emitter and the recompute's goroutine
// hand-off. Every role keeps it.
type replayState struct {
	replay      *session.Replay
	recompute   replayRecompute // the journal fallback (sessionrecompute.go)
	histEmitter historyEmitter
}

// lifecycle is the node's threads and their signals.
type lifecycle struct {
	start time.Time
	// agent runs the duty cycle (agent.go); nil until Start, and always
	// for a node the simulator drives by hand.
	agent *agent
	// statusWrite writes the status file (nil: writeFileAtomic); tests
	// replace it to see what holds the lock while it runs.
	statusWrite func(path string, b []byte) error
	// commit is the fsync thread (storage.Committer), kicked after
	// appends; started only under fsync group and always.
	commit *storage.Committer
	stop   chan struct{}
	wg     sync.WaitGroup
	closed bool
}

// New opens the journal, recovers the state machine from the latest
// snapshot and the journal, and opens the sockets. Start begins the loops.
func New(cfg nodeconfig.Config) (*Node, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		tr:       transport.New(cfg.TransportConfig()),
		frameBuf: make([]byte, 0, wire.MaxFrameLen),
		rel:      newReleaseTrack(),
		lifecycle: lifecycle{
			start: time.Now(),
			stop:  make(chan struct{}),
		},
	}
	rc := replica.ReplicaConfig[netip.AddrPort]{Roles: replica.RolesConfig{NoFencing: cfg.Unsafe.NoFencing}, DiskStallNs: cfg.DiskStallNs,
		Follower: cfg.FollowerConfig(), MaxSessions: cfg.MaxSessions, Peers: cfg.Peers}
	if cfg.Clock == nil {
		// Not under the simulator, whose thousands of node starts a run
		// would each pay it: the first promotion allocates there.
		var err error
		if rc.Memory, err = replica.NewLeaderMemory(replica.LeaderConfig{Sequencer: cfg.SequencerConfig(), PublisherCapacity: cfg.PublisherCapacity}); err != nil {
			return nil, err
		}
	}
	n.rep = replica.NewReplica(rc)
	n.replay = session.New(cfg.ReplayConfig())
	if err := n.mdInit(); err != nil {
		return nil, err
	}
	n.stages, _ = n.cfg.Observer.(nodeconfig.StageObserver)
	// The sockets first: a port in use or a group that cannot be joined
	// fails the start before the directory is created, locked or read.
	if err := n.tr.Open(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	err := n.openLease()
	if err == nil {
		err = n.recover()
	}
	if err == nil {
		n.commit = storage.NewCommitter(n.j, cfg.Journal.Policy, n.wakeAgent, storage.Inline{BelowNs: cfg.FsyncInlineBelowNs, NowNs: n.nowNs})
		err = n.takeRole()
	}
	if err != nil {
		_ = n.lease.Close() // logged by lease
		n.tr.Close()
		if n.st != nil {
			n.st.Close()
		}
		return nil, err
	}
	return n, nil
}

// takeRole starts the node in its configured role.
func (n *Node) takeRole() error {
	if n.cfg.Role != nodeconfig.RolePrimary {
		return n.becomeStandby()
	}
	err := n.becomePrimary(n.cfg.Epoch)
	// A static primary's history is all its own: announce it from 0 (on
	// an error the node is discarded).
	n.rep.Roles().History().Reset()
	return err
}

// nowNs is monotonic nanoseconds since the node started (Go's monotonic
// clock; never the wall clock).
func (n *Node) nowNs() int64 {
	if n.cfg.Clock != nil {
		return n.cfg.Clock.NowNs()
	}
	return int64(time.Since(n.start))
}

// recover opens the journal and rebuilds the state machine from it
// (package storage).
func (n *Node) recover() error {
	st, err := storage.Open(storage.Config{
		FS: n.cfg.FS, Dir: n.cfg.Dir, Journal: n.cfg.JournalOptions(), SetAsideCorrupt: n.cfg.Role != nodeconfig.RolePrimary,
		NewStateMachine: n.cfg.NewStateMachine, Log: n.cfg.Log,
		// Inline under a simulated clock, where everything runs on the
		// simulator's one goroutine.
		Snapshots: snapshot.Config{Inline: n.cfg.Clock != nil, NowNs: n.nowNs, Every: n.cfg.SnapshotEvery,
			ChunkBytes: wire.MaxSnapshotData(n.tr.DatagramLen()), Burst: nodeconfig.SnapshotChunkBurst, Log: n.cfg.Log},
		Hooks: storage.Hooks{Refill: n.refillHistory, Rebuilt: n.rebuiltFrom, Batch: n.stageBatch, Emitter: n.applyOut, Applied: n.replayed},
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.st, n.j, n.snaps = st, st.Journal(), st.Snapshots()
	if err := n.rebuilt(st.Rebuild()); err != nil {
		return fmt.Errorf("node: %w", err) // New closes the storage
	}
	// The status file is read before its first rewrite: the durable seq
	// the last run reported is what the history must still reach, and
	// the market data it knew released need not be published again.
	if last, ok := status.ReadLast(n.cfg.StatusFile, n.cfg.ID); ok && n.cfg.StatusFile != "" {
		if err := st.CheckDurableClaim(last.Durable, n.cfg.StatusFile); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		n.md.KnownReleased(last.MDReleased)
	}
	n.rep.Roles().Recovered()
	n.rep.Identity().Set(st.History())
	n.cfg.Log.Info("recovered", "applied", n.eng().AppliedSeq(), "epoch", n.rep.Roles().Epoch(), "journal_first", n.j.First(), "history", status.Hash64(st.History()))
	n.holdAcks()
	return nil
}

// eng is the state machine (rebuilt by storage).
func (n *Node) eng() engine.StateMachine { return n.st.Engine() }

// rebuilt follows a rebuild that returned err: the fence refuses epochs
// older than the history's, and status sees what is applied.
func (n *Node) rebuilt(err error) error {
	if err != nil {
		return err
	}
	n.rep.Roles().Fence().Accept(n.st.HighestEpoch())
	n.stats.Applied = n.eng().AppliedSeq()
	return nil
}

// refillHistory is a rebuild's first step: session replay's history and
// the market-data ring refilled with the outputs below the snapshot.
func (n *Node) refillHistory(j *journal.Journal) error {
	n.replay.Reset()
	return n.historyBelowSnapshot(j)
}

// rebuiltFrom and replayed tell the observer what a rebuild replays.
func (n *Node) rebuiltFrom(snapSeq uint64) {
	if o := n.cfg.Observer; o != nil {
		o.Rebuilt(n.cfg.ID, snapSeq)
	}
}

func (n *Node) replayed(epoch, seq uint64, payload []byte) {
	if o := n.cfg.Observer; o != nil {
		o.Applied(n.cfg.ID, epoch, seq, payload)
	}
}

// Close stops every goroutine, syncs and closes the journal, writes the
// final status and closes the sockets. It is safe to call twice.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	// The agent first: the fsync thread may still wake it until it is
	// gone, and the poller outlives both.
	n.stopAgent()
	n.commit.Stop()
	close(n.stop)
	n.wg.Wait()
	if n.agent != nil {
		n.agent.runner.Close()
	}
	// Nothing is released any more: a primary gives its lease up, so a
	// standby takes over at once; a standby tells its primary it is
	// leaving, so the primary stops waiting for its acks at once (before
	// the sockets close).
	n.mu.Lock()
	n.giveUpLease("closing")
	n.sayLeaving()
	n.mu.Unlock()
	_ = n.lease.Close() // logged by lease
	n.tr.Close()
	n.mu.Lock()
	n.finishSnapshotWrite()
	err := n.j.Sync()
	st := n.statusLocked()
	if cerr := n.st.Close(); err == nil {
		err = cerr
	}
	n.mu.Unlock()
	n.writeStatus(&st) // the final status, off the lock like the others
	return err
}

func (n *Node) onDatagram(pkt []byte, from netip.AddrPort, now int64) {
	f, _, err := wire.Parse(pkt)
	if err != nil {
		n.stats.CountDrop(err)
		return
	}
	if n.cfg.Key != nil && !n.tr.Verify(&f, n.rep.Roles().Fence().Highest(), now) { // without a key, no call at all
		return
	}
	if wire.IsLease(f.Type) {
		n.onLease(pkt, from, now)
		return
	}
	if f.Type == wire.TypeReplayRequest {
		n.onReplayRequest(&f, from, now) // from a client, like COMMAND
		return
	}
	if wire.IsMDRecovery(f.Type) {
		n.onMDRecovery(&f, from, now)
		return
	}
	if f.Node == n.cfg.ID && f.Type != wire.TypeCommand {
		return // our own multicast, looped back
	}
	if f.Stream != n.cfg.Stream && f.Type != wire.TypeCommand {
		n.stats.DropWrongStream++
		return
	}
	if _, ok := n.cfg.Peers[f.Node]; !ok && f.Type != wire.TypeCommand {
		n.stats.DropUnknownNode++ // not a configured node of this cluster
		return
	}
	if !n.tr.Fresh(&f) {
		return
	}
	if n.rep.Roles().Primary() {
		n.primaryFrame(&f, from, now)
	} else {
		n.standbyFrame(&f, from, now)
	}
}

func (n *Node) afterBatch(now int64) {
	if n.lease.Keeper() != nil {
		// What the lease replies of this batch decided (promotion,
		// step-down, a lapse) is carried out here, between batches.
		n.leaseChanged(now)
	}
	if n.rep.Roles().Primary() {
		n.primaryAfterBatch(now)
	} else {
		n.standbyAfterBatch(now)
	}
}

func (n *Node) onDurable(now int64) {
	if n.rep.Roles().Primary() {
		n.setDurable()
		n.release(now)
	} else {
		n.rep.Follower().DurableAck(n.j.Durable(), now)
		n.followerReady()
	}
}

func (n *Node) origin() wire.Origin {
	return wire.Origin{Stream: n.cfg.Stream, Node: n.cfg.ID, Epoch: n.rep.Roles().Epoch()}
}

// Released is the primary's released watermark (0 on a standby); cheap,
// unlike Status.
func (n *Node) Released() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.rep.Roles().Primary() {
		return 0
	}
	return n.rep.Leader().Primary().Gate().Released()
}

// SocketReports says what the kernel granted each socket (buffers,
// busy-poll), for start-up warnings and `stat`.
func (n *Node) SocketReports() []bus.Report { return n.tr.Reports() }

// Role returns the current role.
func (n *Node) Role() nodeconfig.Role {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.role()
}

// role is the current role (the lock held).
func (n *Node) role() nodeconfig.Role {
	if n.rep.Roles().Primary() {
		return nodeconfig.RolePrimary
	}
	return nodeconfig.RoleStandby
}
