package sim

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime/debug"
	"strings"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/node"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
	"github.com/seqbus/seqbus/witness"
)

// Mutation disables one safety mechanism of the real cores, to prove the
// checker notices (test-only).
type Mutation uint8

// Mutations.
const (
	MutNone Mutation = iota
	// MutNoFencing: nodeconfig.Unsafe.NoFencing.
	MutNoFencing
	// MutNoGating: nodeconfig.Unsafe.NoGating.
	MutNoGating
	// MutLeaseFromReply: nodeconfig.Unsafe.LeaseFromReply (sentAt taken after the
	// reply instead of before sending).
	MutLeaseFromReply
	// MutNoQuarantine: witness.Unsafe.NoQuarantine.
	MutNoQuarantine
	// MutNoMDRepublish: nodeconfig.Unsafe.NoMDRepublish.
	MutNoMDRepublish
	// MutNoSessionReplay: nodeconfig.Unsafe.NoSessionReplay (replay requests
	// ignored: outputs lost in flight or never released are not delivered).
	MutNoSessionReplay
)

// Mutations lists every knob, for tests and the CLI.
var Mutations = []Mutation{MutNoFencing, MutNoGating, MutLeaseFromReply, MutNoQuarantine, MutNoMDRepublish, MutNoSessionReplay}

func (m Mutation) String() string {
	switch m {
	case MutNone:
		return "none"
	case MutNoFencing:
		return "no-fencing"
	case MutNoGating:
		return "no-gating"
	case MutLeaseFromReply:
		return "lease-from-reply"
	case MutNoQuarantine:
		return "no-quarantine"
	case MutNoMDRepublish:
		return "no-md-republish"
	case MutNoSessionReplay:
		return "no-session-replay"
	}
	return fmt.Sprintf("Mutation(%d)", uint8(m))
}

// Knobs are what shapes a run beyond its seed and mutation: a replay, a
// regression line and a soak carry them to be the same run (Options,
// Result and Regression embed them). The zero value is the CI
// configuration.
type Knobs struct {
	// DatagramBytes is every node's and client's datagram size (0: the
	// default, wire.DefaultDatagramLen): jumbo frames through the same
	// faults (TestSimJumbo).
	DatagramBytes int
	// Keyed gives the nodes, the witness and the clients one master key
	// (drawn from the seed), so every frame carries a MAC and every
	// keyed path (a new epoch's key, RETRANSMITs of older epochs to a
	// refetching node, snapshot chunks, lease requests) runs through the
	// same faults (TestSimKeyed).
	Keyed bool
	// Nodes is the cluster's size, 2..MaxNodes (0: DefaultNodes, a
	// primary and two standbys): 2 is the smallest deployment, a primary
	// and one standby, whose in-sync set empties when that standby does
	// (TestSimTwoNodes).
	Nodes int
	// InlineSync has every node fsync on its own agent when it appends
	// (Config.FsyncInlineBelowNs; a simulated fsync takes no time, so
	// always), not at the group committer's SyncStep: durability, acks
	// and releases in the same pass as the append, through the same
	// crashes and disk faults (TestSimInlineSync).
	InlineSync bool
	// Graceful makes half the primary crashes, and half the crashes of
	// a standby, planned stops instead: the process is closed
	// (node.Close: its journal synced; a primary's lease given up, so a
	// standby leads at once; a standby's primary told, so it stops
	// waiting for its acks) and started again after the fault, as
	// `seqbus node` does on SIGTERM (TestSimGraceful).
	Graceful bool
	// Moments crashes a node, now and then, at a moment of the protocol
	// it has just passed (moments.go): it was promoted, stepped down,
	// followed a new epoch or installed a fetched snapshot; the crash
	// comes before anything more reaches it, the restart 10..300 ms
	// later (TestSimMoments).
	Moments bool
	// DiskStalls makes half the pauses hang the node's writeback instead:
	// it runs on and its writes land, but its fsync step does not run, so
	// nothing it writes becomes durable until the fault ends (a device
	// that stops completing writes). Its disk watch must take it out of
	// leading (replica.DiskWatch) without breaking an invariant
	// (TestSimDiskStalls). Under InlineSync they stay pauses: a hung
	// inline fsync blocks the agent.
	DiskStalls bool
	// RejectProbes puts a firewall on every node's host that rejects the
	// primaries' probes with "port unreachable" (as an nftables reject
	// rule would) while the node runs: every probe of a live standby is
	// refused, so a member overdue for any reason (loss, a partition, a
	// pause) is marked gone and proposed for removal at once, and must be
	// added back once it acks again, with every invariant holding
	// (TestSimRejectedProbes).
	RejectProbes bool
}

// Options configures a run. The zero value is the CI configuration.
type Options struct {
	// Mutation disables a safety mechanism (MutNone for the real cores).
	Mutation Mutation
	// Trace, when set, receives the readable event log: every datagram,
	// fault, role change and release, and the nodes' own logs.
	Trace io.Writer
	// FaultNs is the length of the fault phase (DefaultFaultNs when 0);
	// QuietNs bounds the quiet phase in which every command must be
	// answered (DefaultQuietNs when 0).
	FaultNs, QuietNs int64
	// Knobs shape the run: a replay of it needs the same.
	Knobs

	// externalOnly drops the checks that read the node's own report of
	// its gate (ReleaseEvent fields), to show what the outside
	// observations alone catch (tests).
	externalOnly bool
	// scenario, when set, replaces the seed's drawn faults and network
	// (tests; see scenario_test.go).
	scenario *scenario
}

// scenario is a fixed fault schedule on a calm network: no loss or
// duplication, every client sending on every tick, so that a stall is
// the faults' doing. The seed still draws delays, drift and disks.
type scenario struct {
	faults []fault
	// fullInSync makes convergence also require every standby back in
	// the primary's in-sync set.
	fullInSync bool
	// crashAfterInstallNs, when not 0, crashes a node the moment it has
	// installed a fetched snapshot (before anything more reaches it) and
	// restarts it this long after: once per node.
	crashAfterInstallNs int64
	// snapshotEvery, when not 0, is the nodes' SnapshotEvery.
	snapshotEvery uint64
}

// Defaults, in simulated time.
const (
	// DefaultFaultNs: 3 s of faults is ten leases of 300 ms, room for
	// several failovers per seed.
	DefaultFaultNs = 3_000_000_000
	// DefaultQuietNs: after the faults stop, every command must be
	// answered and every replica converged within 4 s (a witness
	// quarantine, a failover and a catch-up take about a second).
	DefaultQuietNs = 4_000_000_000
)

// The simulated cluster.
const (
	// DefaultNodes is the cluster's size when Options.Nodes is 0: a
	// primary and two standbys. MaxNodes bounds Options.Nodes.
	DefaultNodes = 3
	MaxNodes     = 5
	numClients   = 3
	tickNs       = 1_000_000
	clientTick   = 5_000_000
	maxHeld      = 1024 // datagrams a paused node's socket buffer holds
)

// Lease is the sim's lease configuration: a third of the default, so a
// seed sees more failovers; the margin keeps the default's 15 %.
func Lease() arbiter.Config {
	return arbiter.Config{LeaseDurationNs: 300_000_000, RenewIntervalNs: 75_000_000, MarginNs: 45_000_000, RetryNs: 15_000_000}
}

// Result is what one seed did.
type Result struct {
	Seed     uint64
	Mutation Mutation
	// Knobs are the run's: a replay needs them to be the same run.
	Knobs
	Violations []string
	// Schedule is the seed's parameters and fault schedule, readable.
	Schedule string
	// Digest is a hash of every datagram sent with its time: two runs of
	// one seed must agree on it (the replay guarantee).
	Digest uint64
	// MaxAnswerGapNs is the longest a client waited, during the fault
	// phase, with commands in flight and no answer arriving (client-tick
	// resolution), and MaxAnswerGapAt when that wait ended: the release
	// gap the faults caused, as a client sees it.
	MaxAnswerGapNs, MaxAnswerGapAt int64
	SimNs                          int64
	Stats                          Stats
	// installs: the snapshots a scenario crashed a node after
	// (scenario.crashAfterInstallNs).
	installs []installRecord
}

// Failed reports whether an invariant failed.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Stats is what a run covered.
type Stats struct {
	Events, Datagrams, Lost, Duplicated, Partitioned, Unroutable uint64
	Commands, Answered, Releases, Promotions, Crashes, Pauses    uint64
	// Stops: planned stops of a primary or a standby
	// (Options.Graceful); StandbysLeaving: the primaries' count of
	// in-sync standbys that announced theirs (status StandbysLeaving);
	// LeasesReleased: releases the witness took (a node gave its lease
	// up: node.Close, a broken journal); MomentCrashes: the crashes of
	// Options.Moments (counted in Crashes too); DiskHangs: the hung
	// writebacks of Options.DiskStalls, DiskStalls the nodes' disk
	// watches that found them (status DiskStalls).
	Stops, StandbysLeaving, LeasesReleased, MomentCrashes uint64
	DiskHangs, DiskStalls                                 uint64
	// Probes: probes the primaries sent (a standby holding a release
	// back); ProbesRefused: the refusals that came back (no process at
	// the port); StandbysUnreachable: members a refusal marked gone
	// (status StandbysUnreachable).
	Probes, ProbesRefused, StandbysUnreachable             uint64
	WitnessCrashes, Partitions, Spikes, SnapshotsInstalled uint64
	HighestEpoch, Released                                 uint64
	// LargestDatagram is the longest datagram any host sent (bytes).
	LargestDatagram uint64
	// RetransmitsReceived: RETRANSMIT frames the nodes took. BadMACs:
	// frames the nodes dropped for a missing or bad MAC (none in a
	// keyed run: nothing in the simulation forges); UnknownKeys: for an
	// epoch whose key they do not hold (a deposed primary's retired
	// epoch, a derivation past its rate limit), or a RETRANSMIT signed
	// under an epoch they do not follow.
	RetransmitsReceived, BadMACs, UnknownKeys uint64
	// InlineSyncs and ThreadSyncs: the fsyncs the nodes ran on their
	// agent (Options.InlineSync) and by the committer's step.
	InlineSyncs, ThreadSyncs uint64
	// StaleRefused: OUTPUT and REPLAY_END frames the clients' epoch
	// fence refused (client.Core.Fence): a deposed primary's, arriving
	// after its successor's.
	StaleRefused uint64
}

// Add sums s and o.
func (s *Stats) Add(o Stats) {
	s.Events += o.Events
	s.Datagrams += o.Datagrams
	s.Lost += o.Lost
	s.Duplicated += o.Duplicated
	s.Partitioned += o.Partitioned
	s.Unroutable += o.Unroutable
	s.Commands += o.Commands
	s.Answered += o.Answered
	s.Releases += o.Releases
	s.Promotions += o.Promotions
	s.Crashes += o.Crashes
	s.Stops += o.Stops
	s.StandbysLeaving += o.StandbysLeaving
	s.Probes += o.Probes
	s.ProbesRefused += o.ProbesRefused
	s.StandbysUnreachable += o.StandbysUnreachable
	s.LeasesReleased += o.LeasesReleased
	s.MomentCrashes += o.MomentCrashes
	s.DiskHangs += o.DiskHangs
	s.DiskStalls += o.DiskStalls
	s.Pauses += o.Pauses
	s.WitnessCrashes += o.WitnessCrashes
	s.Partitions += o.Partitions
	s.Spikes += o.Spikes
	s.SnapshotsInstalled += o.SnapshotsInstalled
	s.HighestEpoch = max(s.HighestEpoch, o.HighestEpoch)
	s.LargestDatagram = max(s.LargestDatagram, o.LargestDatagram)
	s.Released += o.Released
	s.RetransmitsReceived += o.RetransmitsReceived
	s.BadMACs += o.BadMACs
	s.UnknownKeys += o.UnknownKeys
	s.InlineSyncs += o.InlineSyncs
	s.ThreadSyncs += o.ThreadSyncs
	s.StaleRefused += o.StaleRefused
}

// params are the seed's random choices made up front.
type params struct {
	lossPpm, dupPpm       uint64
	baseDelayNs, jitterNs int64
	ratePpm               [MaxNodes + 1]int64
	offsetNs              [MaxNodes + 1]int64
	syncAlways            bool
	groupWindowNs         int64
	snapshotEvery         uint64
	sendPpm               uint64 // per client tick: chance to send a command
	segmentBytes          int64
}

type evKind uint8

const (
	evDeliver evKind = iota
	evNodeTick
	evClientTick
	evFaultStart
	evFaultEnd
	evQuiet
	evCheck
	evRefused // a probe's "port unreachable" reaches its sender (net.go)
)

type event struct {
	at   int64
	seq  uint64
	kind evKind
	host int
	gen  uint64
	from netip.AddrPort
	to   netip.AddrPort
	pkt  []byte
	// probe, when not 0: the datagram is a probe of node probe sent by
	// host src (simProber); evRefused carries them back.
	probe uint32
	src   int
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simNode is one node host: its disk outlives its process.
type simNode struct {
	id int
	n  *node.Node // nil while crashed
	// prober: the running process's probe socket (net.go), opened by
	// its transport at its first probe.
	prober  *simProber
	fs      *journal.MemFS
	cfg     nodeconfig.Config
	gen     uint64 // bumped by crash and pause: stale ticks are ignored
	starts  uint64 // process incarnations
	paused  bool
	held    []event
	primary bool
	// primaryEpoch is the epoch it leads while primary; stepDowns the
	// node's step-down count last seen (both per process).
	primaryEpoch uint64
	stepDowns    uint64
	ticks        uint64
	// Released outputs seen leaving the node during the current step.
	emitted    bool
	observed   bool // Observer.Released was called during the step
	emitEpoch  uint64
	emitMaxSeq uint64
	// Snapshot transfer: the last request sent and chunk received.
	lastSnapReqNs, lastChunkNs int64
	// hung: its disk's writeback hangs (Options.DiskStalls): its fsync
	// step does not run. Kept across a crash: the disk is the same.
	hung bool
	// Options.Moments: the epoch last seen, a snapshot installed in the
	// current step.
	momentEpoch uint64
	installed   bool
}

type nodeClock struct {
	s        *sim
	offsetNs int64
	ratePpm  int64
}

func (c *nodeClock) NowNs() int64 { return c.offsetNs + c.s.now*c.ratePpm/1_000_000 }

// tickEveryNs is the simulated time between two ticks of the node's own
// 1 ms.
func (c *nodeClock) tickEveryNs() int64 { return tickNs * 1_000_000 / c.ratePpm }

type sim struct {
	// probing: the probe being sent (sendProbe), so transmit marks its
	// deliveries.
	probing *event
	seed    uint64
	opts    Options
	rng     *rand.Rand
	now     int64
	evSeq   uint64
	q       eventQueue
	params  params
	faults  []fault
	quiet   bool
	faultNs int64
	endNs   int64
	done    bool
	live    bool

	hostAddr []netip.Addr
	hostName []string
	routes   []route
	groups   []group_
	blocked  [16][16]int
	spike    [16][16]int
	spikeNs  int64

	nodes        []*simNode // index = node id; [0] unused
	clocks       []*nodeClock
	witness      *witness.Core
	witnessStore *memStore
	witnessUp    bool
	witnessHost  int
	witnessAddr  netip.AddrPort
	clients      []*simClient
	mdHost       int

	chk            *checker
	trace          io.Writer
	digest         uint64
	stats          Stats
	hashMismatches [MaxNodes + 1]uint64
	lease          arbiter.Config
	lastLeader     uint32
	maxGapNs       int64 // see Result.MaxAnswerGapNs
	maxGapAt       int64
	groupAddr      netip.AddrPort
	mdGroupAddr    netip.AddrPort
	key            *auth.MasterKey // Options.Keyed: the cluster's master key
	numNodes       int             // Options.Nodes, defaulted
	// installs: the snapshots each node installed, for a scenario's
	// crashAfterInstallNs (scenario_test.go).
	installs []installRecord
	// moments: the moment crashes so far (Options.Moments).
	moments int
}

// installRecord is one snapshot a node installed.
type installRecord struct {
	node int
	seq  uint64
	// epochBelow: the record at seq is of an epoch older than the one
	// the node followed when it installed the snapshot (set at the crash
	// that follows, when the node is between calls: judged).
	epochBelow, judged bool
	// again: the node installed another snapshot later in the run.
	again bool
}

// Run simulates one seed and checks every invariant. The same seed and
// options always produce the same run, datagram for datagram.
func Run(seed uint64, opts Options) (res Result) {
	if opts.FaultNs <= 0 {
		opts.FaultNs = DefaultFaultNs
	}
	if opts.QuietNs <= 0 {
		opts.QuietNs = DefaultQuietNs
	}
	nodes := cmp.Or(opts.Nodes, DefaultNodes)
	if nodes < 2 || nodes > MaxNodes {
		return Result{Seed: seed, Mutation: opts.Mutation, Violations: []string{fmt.Sprintf("sim: Options.Nodes %d is outside 2..%d", opts.Nodes, MaxNodes)}}
	}
	s := &sim{seed: seed, opts: opts, rng: rand.New(rand.NewPCG(seed, seed^0x5eedb05)), trace: opts.Trace, lease: Lease(), numNodes: nodes}
	s.faultNs, s.endNs = opts.FaultNs, opts.FaultNs+opts.QuietNs
	s.chooseParams()
	s.faults = genSchedule(s.rng, s.faultNs, s.lease, nodes)
	if sc := opts.scenario; sc != nil {
		s.faults = append([]fault(nil), sc.faults...)
		s.params.lossPpm, s.params.dupPpm, s.params.sendPpm = 0, 0, 1_000_000
		if sc.snapshotEvery != 0 {
			s.params.snapshotEvery = sc.snapshotEvery
		}
	}
	res = Result{Seed: seed, Mutation: opts.Mutation, Knobs: opts.Knobs, Schedule: s.describeSchedule()}
	defer func() {
		if p := recover(); p != nil {
			stack := strings.Split(string(debug.Stack()), "\n")
			if len(stack) > 24 {
				stack = stack[:24]
			}
			s.chk.violate(0, "panic: %v\n%s", p, strings.Join(stack, "\n"))
		}
		res.Violations = s.chk.violations
		res.Digest = s.digest
		res.SimNs = s.now
		res.MaxAnswerGapNs, res.MaxAnswerGapAt = s.maxGapNs, s.maxGapAt
		s.stats.Releases = s.chk.releases
		s.stats.Released = s.chk.refApplied
		for _, c := range s.clients {
			s.stats.StaleRefused += c.core.Stats().StaleEpoch
		}
		res.Stats = s.stats
		res.installs = s.installs
	}()
	s.build()
	s.logf("seed %d mutation %s\n%s", seed, opts.Mutation, res.Schedule)
	for i := 1; i <= s.numNodes; i++ {
		s.startNode(i)
	}
	for k := range s.clients {
		s.push(event{at: int64(k+1) * 1_000_000, kind: evClientTick, host: k})
	}
	for i := range s.faults {
		s.push(event{at: s.faults[i].at, kind: evFaultStart, host: i})
	}
	s.push(event{at: s.faultNs, kind: evQuiet})
	s.push(event{at: s.faultNs + 10_000_000, kind: evCheck})
	for len(s.q) > 0 && !s.done {
		e := heap.Pop(&s.q).(event)
		s.now = e.at
		s.stats.Events++
		s.handle(e)
	}
	s.finish()
	return res
}

func (s *sim) chooseParams() {
	r := s.rng
	p := &s.params
	p.lossPpm = r.Uint64N(300_001)
	if r.IntN(4) == 0 {
		p.lossPpm = 0
	}
	p.dupPpm = r.Uint64N(50_001)
	p.baseDelayNs = 20_000 + int64(r.Uint64N(200_000))
	p.jitterNs = int64(r.Uint64N(5_000_001))
	// Drift: within ±6 % of real time, under the margin's 15 %.
	for i := 1; i <= s.numNodes; i++ {
		p.ratePpm[i] = 1_000_000 + int64(r.Uint64N(120_001)) - 60_000
		p.offsetNs[i] = int64(r.Uint64N(1_000_000_000))
	}
	p.syncAlways = r.IntN(5) == 0
	p.groupWindowNs = 100_000 + int64(r.Uint64N(3_000_000))
	p.snapshotEvery = 32 + r.Uint64N(500)
	p.sendPpm = 50_000 + r.Uint64N(400_000)
	// Later additions draw from their own stream, so that adding one does
	// not change what the seeds already recorded in testdata do.
	r2 := rand.New(rand.NewPCG(s.seed, 0x5e6b))
	p.segmentBytes = 64 << 10
	if r2.IntN(2) == 0 {
		// Small segments: snapshots let the journal drop old segments, so
		// a node that was down long enough must fetch a snapshot.
		p.segmentBytes = journal.MinSegmentBytes
	}
}

// simStream is the stream every node, the witness and the clients use.
const simStream = 1

// seedKey is Options.Keyed's master key, drawn from the seed so that a
// keyed run replays exactly.
func seedKey(seed uint64) *auth.MasterKey {
	var k auth.MasterKey
	r := rand.New(rand.NewPCG(seed, 0x6b6579))
	for i := 0; i < len(k); i += 8 {
		binary.LittleEndian.PutUint64(k[i:], r.Uint64())
	}
	return &k
}

// Host layout: nodes 1..3, the witness, the clients, the market-data
// observer.
func (s *sim) build() {
	s.chk = newChecker(s)
	if s.opts.Keyed {
		s.key = seedKey(s.seed)
	}
	s.hostAddr = append(s.hostAddr, netip.Addr{})
	s.hostName = append(s.hostName, "-")
	s.nodes = make([]*simNode, s.numNodes+1)
	s.clocks = make([]*nodeClock, s.numNodes+1)
	peers := map[uint32]netip.AddrPort{}
	for i := 1; i <= s.numNodes; i++ {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
		s.hostAddr = append(s.hostAddr, a)
		s.hostName = append(s.hostName, fmt.Sprintf("n%d", i))
		peers[uint32(i)] = netip.AddrPortFrom(a, 7000)
	}
	s.witnessHost = len(s.hostAddr)
	s.hostAddr = append(s.hostAddr, netip.AddrFrom4([4]byte{10, 0, 0, 100}))
	s.hostName = append(s.hostName, "W")
	s.witnessAddr = netip.AddrPortFrom(s.hostAddr[s.witnessHost], 7300)
	s.bind(s.witnessAddr, s.witnessHost)
	s.groupAddr = netip.MustParseAddrPort("239.1.1.1:7100")
	s.mdGroupAddr = netip.MustParseAddrPort("239.1.1.2:7200")
	for k := range numClients {
		h := len(s.hostAddr)
		s.hostAddr = append(s.hostAddr, netip.AddrFrom4([4]byte{10, 0, 1, byte(k + 1)}))
		s.hostName = append(s.hostName, fmt.Sprintf("c%d", k+1))
		c := newSimClient(s, h, uint64(k+1), netip.AddrPortFrom(s.hostAddr[h], 5000), peers)
		s.bind(c.addr, h)
		s.clients = append(s.clients, c)
	}
	s.mdHost = len(s.hostAddr)
	s.hostAddr = append(s.hostAddr, netip.AddrFrom4([4]byte{10, 0, 2, 1}))
	s.hostName = append(s.hostName, "md")
	s.join(s.mdGroupAddr, s.mdHost)

	s.witnessStore = &memStore{}
	s.startWitness()
	logger := s.nodeLogger
	for i := 1; i <= s.numNodes; i++ {
		s.clocks[i] = &nodeClock{s: s, offsetNs: s.params.offsetNs[i], ratePpm: s.params.ratePpm[i]}
		others := map[uint32]netip.AddrPort{}
		for id, a := range peers {
			if id != uint32(i) {
				others[id] = a
			}
		}
		jopts := journal.Options{SegmentBytes: s.params.segmentBytes, Policy: journal.SyncGroup, GroupWindowNs: s.params.groupWindowNs, GroupRecords: 64}
		if s.params.syncAlways {
			jopts.Policy = journal.SyncAlways
		}
		var inlineNs int64
		if s.opts.InlineSync {
			inlineNs = nodeconfig.DefaultFsyncInlineBelowNs
		}
		cfg := nodeconfig.Config{
			ID: uint32(i), Stream: simStream, Dir: "/n", DatagramBytes: s.opts.DatagramBytes,
			Listen: peers[uint32(i)], Group: s.groupAddr, MarketData: s.mdGroupAddr,
			Peers: others, Witness: s.witnessAddr, Lease: s.lease,
			InSyncTimeoutNs:        100_000_000,
			Network:                simNetwork{s: s, host: i},
			Journal:                jopts,
			FsyncInlineBelowNs:     inlineNs,
			HashEvery:              16,
			SnapshotEvery:          s.params.snapshotEvery,
			PublisherCapacity:      1024,
			MaxSessions:            64,
			NewStateMachine:        s.chk.newStateMachine(i),
			NewScratchStateMachine: newScratchStateMachine,
			Log:                    logger(i),
			Clock:                  s.clocks[i],
			Observer:               observer{s.chk},
			Key:                    s.key,
		}
		cfg.Unsafe = s.opts.Mutation.nodeUnsafe()
		fs := journal.NewMemFS()
		cfg.FS = fs
		s.nodes[i] = &simNode{id: i, fs: fs, cfg: cfg}
	}
}

// nodeUnsafe is the node switch a mutation turns on (none for the
// witness's and MutNone).
func (m Mutation) nodeUnsafe() nodeconfig.Unsafe {
	var u nodeconfig.Unsafe
	switch m {
	case MutNoFencing:
		u.NoFencing = true
	case MutNoGating:
		u.NoGating = true
	case MutLeaseFromReply:
		u.LeaseFromReply = true
	case MutNoMDRepublish:
		u.NoMDRepublish = true
	case MutNoSessionReplay:
		u.NoSessionReplay = true
	}
	return u
}

func (s *sim) push(e event) {
	s.evSeq++
	e.seq = s.evSeq
	heap.Push(&s.q, e)
}

func (s *sim) handle(e event) {
	switch e.kind {
	case evDeliver:
		s.deliver(e)
	case evRefused:
		s.refused(e)
	case evNodeTick:
		s.nodeTick(e)
	case evClientTick:
		s.clients[e.host].tick()
		if s.now < s.endNs {
			s.push(event{at: s.now + clientTick, kind: evClientTick, host: e.host})
		}
	case evFaultStart:
		s.startFault(e.host)
	case evFaultEnd:
		s.endFault(e.host)
	case evQuiet:
		s.goQuiet()
	case evCheck:
		// Once converged, allow the clients the rest of the quiet phase to
		// fill their sessions by replay; invariant 9 judges what they did.
		if s.converged() && (s.chk.caughtUp(s.sessions()) || s.now >= s.endNs) {
			s.logf("LIVE: every command answered and every replica converged %s after the faults stopped", fmtDur(s.now-s.faultNs))
			s.done, s.live = true, true
			return
		}
		if s.now >= s.endNs {
			s.livenessFailure()
			// And what the clients are missing of their sessions, as far
			// as the released history goes.
			s.chk.checkSessions(s.sessions())
			s.done = true
			return
		}
		s.push(event{at: s.now + 10_000_000, kind: evCheck})
	}
}

// --- nodes -----------------------------------------------------------------

func (s *sim) startNode(i int) {
	sn := s.nodes[i]
	n, err := node.New(sn.cfg)
	s.chk.stepDone(i)
	if err != nil {
		s.chk.violate(0, "node %d failed to start from its disk: %v", i, err)
		return
	}
	sn.n = n
	sn.gen++
	sn.starts++
	// What the new process knows it accepted is what its disk kept.
	s.chk.accepted[i] = n.Status().Epoch
	sn.primary = false
	sn.stepDowns = 0
	s.logf("node %d STARTED (applied %d)", i, s.chk.cur[i].AppliedSeq())
	s.push(event{at: s.now + s.clocks[i].tickEveryNs(), kind: evNodeTick, host: i, gen: sn.gen})
}

func (s *sim) crashNode(i int) {
	sn := s.ending(i)
	if sn == nil {
		return
	}
	sn.down() // abandoned without Close: nothing more is synced
	sn.fs.Crash(s.rng.Uint64())
	s.stats.Crashes++
	s.logf("node %d CRASHED (unsynced writes lost, last write may be torn)", i)
}

// stopNode is a planned stop of node i (SIGTERM): its process closes
// (node.Close syncs the journal, gives a primary's lease up, writes its
// last status) and its disk keeps everything; startNode runs it again.
func (s *sim) stopNode(i int) {
	sn := s.ending(i)
	if sn == nil {
		return
	}
	if err := sn.n.Close(); err != nil {
		s.chk.violate(0, "node %d close: %v", i, err)
	}
	sn.down()
	s.stats.Stops++
	s.logf("node %d STOPPED (closed: journal synced, lease given up)", i)
}

// ending collects the counters of node i's process, about to end (nil:
// it is not running).
func (s *sim) ending(i int) *simNode {
	sn := s.nodes[i]
	if sn.n == nil {
		return nil
	}
	s.collectNodeStats(sn)
	s.chk.mdPastRing += sn.n.Status().MD.RepublishMissed
	return sn
}

// down forgets the host's process: its ticks and held datagrams go with
// it; its disk stays.
func (sn *simNode) down() {
	sn.n = nil
	sn.prober = nil
	sn.gen++
	sn.paused = false
	sn.held = nil
	sn.primary = false
}

func (s *sim) collectNodeStats(sn *simNode) {
	st := sn.n.Status()
	s.stats.SnapshotsInstalled += st.Node.SnapshotsInstalled
	s.stats.DiskStalls += st.Node.DiskStalls
	s.stats.StandbysLeaving += st.Node.StandbysLeaving
	s.stats.StandbysUnreachable += st.Node.StandbysUnreachable
	s.stats.RetransmitsReceived += st.Node.RetransmitsReceived
	s.stats.BadMACs += st.Node.DropNoMAC + st.Node.DropBadMAC
	s.stats.UnknownKeys += st.Node.DropUnknownKey
	s.stats.InlineSyncs += st.Fsync.Inline
	s.hashMismatches[sn.id] += st.Node.HashMismatches
}

// checkHashReports turns the nodes' own state-hash alarms into
// violations. The checker compares every replica's state with every
// other's at equal histories (noteState); when that found nothing and the
// replicas converged, the nodes compared hashes of different histories (a
// standby that later discarded its suffix): the alarm itself is false.
func (s *sim) checkHashReports() {
	for id, n := range s.hashMismatches {
		if n == 0 {
			continue
		}
		diag := ""
		if s.live && !s.chk.divergence {
			diag = " " + DiagStaleHashCheck + ": the replicas converged and the checker's own comparison of equal histories found no divergence"
		}
		s.chk.violate(3, "node %d reported %d state-hash mismatches with its primary%s", id, n, diag)
	}
}

func (s *sim) nodeTick(e event) {
	sn := s.nodes[e.host]
	if sn.n == nil || sn.paused || e.gen != sn.gen {
		return
	}
	sn.n.Tick()
	sn.ticks++
	if !sn.hung && sn.n.SyncStep() {
		s.stats.ThreadSyncs++
	}
	s.afterStep(sn)
	s.push(event{at: s.now + s.clocks[e.host].tickEveryNs(), kind: evNodeTick, host: e.host, gen: sn.gen})
}

// noteSent watches a node's datagrams for released outputs: an OUTPUT
// frame is a release, whatever the node's own bookkeeping says.
func (s *sim) noteSent(host int, pkt []byte) {
	h, err := wire.ParseHeader(pkt)
	if err == nil && h.Type == wire.TypeSnapshotRequest {
		s.nodes[host].lastSnapReqNs = s.now
	}
	if err != nil || h.Type != wire.TypeOutput {
		return
	}
	sn := s.nodes[host]
	sn.emitted = true
	sn.emitEpoch = h.Epoch
	sn.emitMaxSeq = max(sn.emitMaxSeq, h.Seq)
}

func (s *sim) afterStep(sn *simNode) {
	s.chk.stepDone(sn.id)
	if sn.n == nil {
		return
	}
	isPrimary := sn.n.Role() == nodeconfig.RolePrimary
	if sn.emitted && sn.observed {
		sn.emitted, sn.emitMaxSeq = false, 0
	}
	sn.observed = false
	if sn.emitted {
		// Outputs left without an Observer.Released for them: build the
		// event from the node's status.
		sn.emitted = false
		ev := nodeconfig.ReleaseEvent{Node: uint32(sn.id), Epoch: sn.emitEpoch, Released: sn.emitMaxSeq, RequiredOK: true, RequiredAck: math.MaxUint64}
		if isPrimary {
			st := sn.n.Status()
			ev.Released, ev.Durable, ev.LeaseHeld = st.Released, st.Durable, st.Lease.Held
			ev.Applied = st.Applied
		} else {
			// It released, then stepped down in the same step: what it
			// released is at least the last frame's first seq.
			ev.Durable, ev.LeaseHeld, ev.Applied = ev.Released, true, ev.Released
		}
		sn.emitMaxSeq = 0
		s.chk.onRelease(ev)
	}
	if count, from, to, keeperEpoch := sn.n.LastStepDown(); count != sn.stepDowns {
		sn.stepDowns = count
		s.chk.onStepDown(sn.id, from, to, keeperEpoch)
	}
	if isPrimary != sn.primary {
		sn.primary = isPrimary
		if isPrimary {
			st := sn.n.Status()
			s.stats.Promotions++
			s.stats.HighestEpoch = max(s.stats.HighestEpoch, st.Epoch)
			sn.primaryEpoch = st.Epoch
			s.chk.onPromoted(sn.id, st.Epoch, sn.starts)
		} else {
			s.logf("node %d is STANDBY now", sn.id)
		}
	} else if isPrimary {
		// A newer term of its own, without stepping down: a promotion
		// for the one-primary-per-epoch check.
		if e := sn.n.Epoch(); e != sn.primaryEpoch {
			sn.primaryEpoch = e
			s.stats.Promotions++
			s.stats.HighestEpoch = max(s.stats.HighestEpoch, e)
			s.chk.onPromoted(sn.id, e, sn.starts)
		}
	}
	if s.opts.Moments {
		s.moment(sn, isPrimary)
	}
}

func (s *sim) deliver(e event) {
	switch {
	case e.host <= s.numNodes:
		sn := s.nodes[e.host]
		if sn.n == nil || e.probe != 0 && s.opts.RejectProbes {
			// No process listens, or a firewall rejects probes: the
			// host answers with "port unreachable".
			s.refuse(e)
			return
		}
		if sn.paused {
			if len(sn.held) < maxHeld {
				sn.held = append(sn.held, e)
			}
			return
		}
		s.deliverNode(sn, e)
	case e.host == s.witnessHost:
		s.deliverWitness(e)
	case e.host == s.mdHost:
		s.deliverMD(e)
	default:
		for _, c := range s.clients {
			if c.host == e.host {
				c.onPacket(e.pkt, e.from)
			}
		}
	}
}

func (s *sim) deliverNode(sn *simNode, e event) {
	c := s.chk
	if h, err := wire.ParseHeader(e.pkt); err == nil {
		switch h.Type {
		case wire.TypeAck:
			if _, _, err := wire.Parse(e.pkt); err == nil {
				k := [3]uint64{uint64(sn.id), uint64(h.Node), h.Epoch}
				c.acks[k] = max(c.acks[k], h.Seq)
			}
		case wire.TypeSnapshotChunk:
			sn.lastChunkNs = s.now
		case wire.TypeData:
			c.curNode, c.curFrameEpoch = sn.id, h.Epoch
			c.curFrameOld = h.Epoch < c.accepted[sn.id]
		}
	}
	sn.n.Deliver(e.pkt, e.from)
	c.curFrameOld = false
	s.afterStep(sn)
}

// --- witness ---------------------------------------------------------------

// memStore is the witness's disk: Save is durable when it returns.
type memStore struct {
	state arbiter.PersistentState
	found bool
}

func (m *memStore) Load() (arbiter.PersistentState, bool, error) { return m.state, m.found, nil }
func (m *memStore) Save(st arbiter.PersistentState) error {
	m.state, m.found = st, true
	return nil
}

func (s *sim) startWitness() {
	cfg := witness.DefaultConfig()
	cfg.Arbiter = s.lease
	cfg.Node = 100
	if s.key != nil {
		cfg.Key, cfg.Stream = s.key, simStream
		for i := 1; i <= s.numNodes; i++ {
			cfg.Nodes = append(cfg.Nodes, uint32(i))
		}
	}
	cfg.Unsafe.NoQuarantine = s.opts.Mutation == MutNoQuarantine
	if s.trace != nil {
		cfg.Logger = s.nodeLogger(0)
	}
	state, found, _ := s.witnessStore.Load()
	w, err := witness.NewCore(cfg, state, found, s.now)
	if err != nil {
		s.chk.violate(0, "witness failed to start: %v", err)
		return
	}
	s.witness, s.witnessUp = w, true
	s.logf("witness STARTED (epoch %d persisted)", s.witnessStore.state.Epoch)
}

func (s *sim) deliverWitness(e event) {
	if !s.witnessUp {
		return
	}
	req, _, err := wire.Parse(e.pkt)
	if err != nil {
		return
	}
	// The witness's loop, as witness.Server runs it: persist (the memStore
	// is durable when Save returns) before the reply is sent.
	taken := s.witness.Stats().ReleasesTaken
	rd := s.witness.Step(e.pkt, e.from, s.now)
	if s.witness.Stats().ReleasesTaken > taken {
		s.chk.onLeaseGivenUp(req.Node, req.Epoch)
		s.stats.LeasesReleased++
		s.logf("witness RELEASED epoch %d of node %d (its holder gave it up)", req.Epoch, req.Node)
	}
	reply := rd.Reply
	if rd.MustPersist {
		reply = s.witness.Persisted(s.witnessStore.Save(rd.State))
	}
	if reply == nil {
		return
	}
	if r, err := witness.ParseReply(reply); err == nil {
		s.chk.onWitnessReply(req.Node, &r)
		if r.Granted() && req.Node != s.lastLeader {
			s.logf("witness GRANTED epoch %d to node %d for %s", r.Epoch, req.Node, fmtDur(r.DurationNs))
			s.lastLeader = req.Node
		}
	}
	s.send(s.witnessHost, s.witnessAddr, e.from, reply)
}

func (s *sim) deliverMD(e event) {
	f, _, err := wire.Parse(e.pkt)
	if err != nil || f.Type != wire.TypeOutput {
		return
	}
	it := f.Messages()
	for {
		_, msg, ok := it.Next()
		if !ok {
			return
		}
		s.chk.onMarketData(msg)
	}
}

// --- phases ----------------------------------------------------------------

// goQuiet ends every fault: partitions heal, crashed nodes and the witness
// restart, paused nodes resume, the network stops losing.
func (s *sim) goQuiet() {
	s.quiet = true
	s.logf("QUIET: faults stop; every command must be answered within %s", fmtDur(s.opts.QuietNs))
	for i := range s.faults {
		if s.faults[i].active {
			s.endFault(i)
		}
	}
	for i := 1; i <= s.numNodes; i++ {
		if s.nodes[i].n == nil {
			s.startNode(i)
		}
	}
	if !s.witnessUp {
		s.startWitness()
	}
}

// sessions are the clients' sessions.
func (s *sim) sessions() []uint64 {
	out := make([]uint64, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c.session)
	}
	return out
}

// primaryNode is the one node that believes it leads (nil for none).
func (s *sim) primaryNode() *simNode {
	var p *simNode
	for _, sn := range s.nodes[1:] {
		if sn.n != nil && sn.primary {
			p = sn
		}
	}
	return p
}

// converged: every command answered, one primary, every replica at the
// primary's seq with the same history.
func (s *sim) converged() bool {
	for _, c := range s.clients {
		if c.core.InFlight() > 0 {
			return false
		}
	}
	var p *simNode
	for _, sn := range s.nodes[1:] {
		if sn.n == nil || sn.paused {
			return false
		}
		if sn.primary {
			if p != nil {
				return false
			}
			p = sn
		}
	}
	if p == nil {
		return false
	}
	pt := s.chk.cur[p.id]
	if p.n.Released() != pt.AppliedSeq() {
		return false
	}
	if sc := s.opts.scenario; sc != nil && sc.fullInSync && len(p.n.Status().InSync.Members) != s.numNodes-1 {
		return false
	}
	for _, sn := range s.nodes[1:] {
		t := s.chk.cur[sn.id]
		if t.AppliedSeq() != pt.AppliedSeq() || t.chainAt(t.AppliedSeq()) != pt.chainAt(pt.AppliedSeq()) {
			return false
		}
	}
	return true
}

// Diagnoses the checker attaches to a violation when it recognises a
// known failure mode (see testdata/regressions.txt).
const (
	DiagStandbyHoldsLease = "DIAG-standby-holds-lease"
	DiagStaleHashCheck    = "DIAG-stale-hash-check"
	DiagEpochReused       = "DIAG-epoch-reused"
	DiagAppliedGap        = "DIAG-applied-gap"
	DiagFetchStuck        = "DIAG-snapshot-fetch-stuck"
	DiagPromotedBehind    = "DIAG-promoted-behind"
	DiagOwnStepDown       = "DIAG-step-down-own-epoch"
	// DiagSessionTooOld: a client skipped outputs the primary's history no
	// longer held (a REPLAY_END TooOld): the history's stated bound, met
	// when the primary caught up by snapshot (no history before it). (A
	// crash that kept a snapshot past the journal's end met it too, until
	// the snapshot writer synced the journal first: bug H.)
	DiagSessionTooOld = "DIAG-session-history-too-old"
)

func (s *sim) livenessFailure() {
	var diag []string
	var b strings.Builder
	for _, c := range s.clients {
		fmt.Fprintf(&b, " client %d: %d in flight, primary %s;", c.session, c.core.InFlight(), c.primary)
	}
	for _, sn := range s.nodes[1:] {
		if sn.n == nil {
			fmt.Fprintf(&b, " node %d down;", sn.id)
			continue
		}
		st := sn.n.Status()
		fmt.Fprintf(&b, " node %d %s epoch %d applied %d released %d lease %v (epoch %d);", sn.id, st.Role, st.Epoch, st.Applied, st.Released, st.Lease.Held, st.Lease.Epoch)
		if st.Role != "primary" && sn.lastSnapReqNs > s.now-100_000_000 && sn.lastChunkNs < s.now-1_000_000_000 {
			diag = append(diag, fmt.Sprintf("%s: node %d has asked for a snapshot without an answer since %s", DiagFetchStuck, sn.id, fmtNs(sn.lastChunkNs)))
		}
		if st.Role != "primary" && st.Lease.Held && st.Lease.Epoch <= st.Epoch {
			diag = append(diag, fmt.Sprintf("%s: node %d holds the lease of epoch %d as a standby and never promotes", DiagStandbyHoldsLease, sn.id, st.Lease.Epoch))
		}
	}
	if p := s.primaryNode(); p != nil {
		pt := s.chk.cur[p.id]
		for _, sn := range s.nodes[1:] {
			t := s.chk.cur[sn.id]
			if sn.n == nil || t == nil || sn == p {
				continue
			}
			at := min(t.AppliedSeq(), pt.AppliedSeq())
			if at > 0 && t.chainAt(at) != pt.chainAt(at) {
				fmt.Fprintf(&b, " node %d's history differs from primary %d's at or below seq %d;", sn.id, p.id, at)
			}
		}
	}
	if len(diag) > 0 && s.chk.taint == "" {
		s.chk.taint = diag[0][:strings.Index(diag[0], ":")]
	}
	for _, d := range diag {
		b.WriteString(" ")
		b.WriteString(d)
	}
	s.chk.violate(7, "not live %s after the faults stopped:%s", fmtDur(s.now-s.faultNs), b.String())
}

// finish runs the end-of-seed checks: state hashes and every journal read
// back from its disk.
func (s *sim) finish() {
	if s.live {
		s.chk.checkReceived()
		s.chk.checkPublishedMD()
		s.chk.checkSessions(s.sessions())
	}
	for _, sn := range s.nodes[1:] {
		if sn.n == nil {
			continue
		}
		s.collectNodeStats(sn)
		if err := sn.n.Close(); err != nil {
			s.chk.violate(0, "node %d close: %v", sn.id, err)
		}
		if s.live {
			s.checkJournal(sn)
		}
	}
	s.checkHashReports()
	for _, c := range s.clients {
		st := c.core.Stats()
		s.stats.Commands += st.Sent
		s.stats.Answered += st.Answered
	}
}

// checkJournal reads a node's journal back: gap-free and, where released,
// identical to the released history (invariant 3).
func (s *sim) checkJournal(sn *simNode) {
	j, _, err := journal.Open(sn.fs, sn.cfg.Dir, sn.cfg.Journal)
	if err != nil {
		s.chk.violate(3, "node %d journal does not reopen: %v", sn.id, err)
		return
	}
	defer j.Close()
	if j.First() == 0 {
		return
	}
	next := j.First()
	err = j.ReadFrom(j.First(), func(_, seq uint64, payload []byte) bool {
		if seq != next {
			s.chk.violate(3, "node %d journal jumps from %d to %d", sn.id, next-1, seq)
			return false
		}
		next++
		if seq <= s.chk.refApplied && string(payload) != string(s.chk.canonCmd[seq-1]) {
			s.chk.violate(3, "node %d journal holds a different command at released seq %d", sn.id, seq)
			return false
		}
		return true
	})
	if err != nil {
		s.chk.violate(3, "node %d journal read: %v", sn.id, err)
	}
}

// --- the event log ---------------------------------------------------------

func (s *sim) logf(format string, args ...any) {
	if s.trace == nil {
		return
	}
	fmt.Fprintf(s.trace, "[%s] %s\n", fmtNs(s.now), fmt.Sprintf(format, args...))
}

// nodeLogger returns the slog logger of node id (0: the witness): into the
// event log when tracing, else discarded.
func (s *sim) nodeLogger(id int) *slog.Logger {
	if s.trace == nil {
		return slog.New(slog.DiscardHandler)
	}
	name := "W"
	if id > 0 {
		name = fmt.Sprintf("n%d", id)
	}
	return slog.New(slog.NewTextHandler(&logWriter{s: s, name: name}, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
}

type logWriter struct {
	s    *sim
	name string
}

func (w *logWriter) Write(p []byte) (int, error) {
	fmt.Fprintf(w.s.trace, "[%s] %s: %s", fmtNs(w.s.now), w.name, p)
	return len(p), nil
}

func fmtNs(ns int64) string { return fmt.Sprintf("%d.%06d", ns/1e9, ns%1e9/1e3) }

func fmtDur(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3fs", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3fms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%dµs", ns/1e3)
	}
}

// describe renders a datagram's header for the event log.
func describe(pkt []byte) string {
	h, err := wire.ParseHeader(pkt)
	if err != nil {
		return fmt.Sprintf("<%d bytes, bad header>", len(pkt))
	}
	if h.Count > 1 {
		return fmt.Sprintf("%s n%d e%d s%d..%d", h.Type, h.Node, h.Epoch, h.Seq, h.Seq+uint64(h.Count)-1)
	}
	return fmt.Sprintf("%s n%d e%d s%d", h.Type, h.Node, h.Epoch, h.Seq)
}
