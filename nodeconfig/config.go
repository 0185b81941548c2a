// Package nodeconfig is one seqbus node's configuration: every setting,
// its default and its bounds, checked before anything opens (Validate),
// and the hooks a harness gives a node (Clock, Observer, StageObserver).
// Package node runs what it describes; cmd/seqbus and the simulator
// build it.
package nodeconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/transport"
)

// Role is what a node currently does.
type Role uint8

// Roles.
const (
	RoleStandby Role = iota
	RolePrimary
)

func (r Role) String() string {
	if r == RolePrimary {
		return "primary"
	}
	return "standby"
}

// Defaults, each a configuration value.
const (
	// DefaultTickIntervalNs drives heartbeats, NAK timers and periodic
	// acks. 1 ms is well under the 10 ms heartbeat and the NAK back-off
	// floor's multiples; the ticker costs ~1000 wake-ups a second.
	DefaultTickIntervalNs = int64(time.Millisecond)
	// MinDiskStallTicks bounds DiskStallNs from below, in ticks: the watch
	// takes a gap of a quarter of it between two ticks for a pause of the
	// node's own (replica.DiskWatch), so it needs several ticks a quarter.
	MinDiskStallTicks = 20
	// DefaultHashEvery: primary and standbys compare state hashes every
	// 1024 seqs; hashing is incremental so this costs a frame, not a scan.
	DefaultHashEvery = 1024
	// DefaultSnapshotEvery: the primary snapshots every 200k commands, so a
	// standby that fell behind by more than the journal holds restores at
	// most that far back; snapshots run inline (the engine's state is small
	// here; a venue-sized book would fork or copy-on-write instead).
	DefaultSnapshotEvery = 200_000
	// DefaultAckIntervalNs: a standby with no progress still acks every
	// 5 ms, so the primary sees it alive (the in-sync set times out at
	// 200 ms).
	DefaultAckIntervalNs = 5_000_000
	// DefaultPublisherCapacity bounds outputs waiting for release: 64k.
	// When full, new commands are refused (back-pressure) until releases
	// catch up.
	DefaultPublisherCapacity = 1 << 16
	// DefaultMaxSessions bounds the client session -> address table.
	DefaultMaxSessions = 4096
	// DefaultRecvBufferBytes: 8 MB of socket receive buffer absorbs a burst
	// of ~10k small datagrams while a loop is descheduled (the kernel's
	// 208 KB default holds ~200), so bursts cost latency, not NAKs.
	DefaultRecvBufferBytes = 8 << 20
	// DefaultJournalWriteBufferBytes: appends are written 256 KB at a
	// time at most (a full flush is ~60 µs of copying), and always at the
	// end of each received batch.
	DefaultJournalWriteBufferBytes = 256 << 10
	// DefaultFsyncInlineBelowNs (`seqbus node --fsync-inline`): the agent
	// fsyncs inline while fsyncs average at most 20 µs (tmpfs, a
	// battery-backed NVMe), about what the two wake-ups of a hand-off to
	// the fsync thread and back cost on a busy 2-core box (docs/tuning.md);
	// a disk slower than that keeps the fsync thread, so the agent's loop
	// never waits for it.
	DefaultFsyncInlineBelowNs = int64(20 * time.Microsecond)
	// SnapshotChunkBurst is how many chunks the primary sends per request.
	SnapshotChunkBurst = 32
)

// Config configures one node process.
type Config struct {
	ID     uint32
	Stream uint16
	Dir    string // journal and snapshots

	Listen     netip.AddrPort // unicast: clients, acks, naks, snapshots
	Group      netip.AddrPort // replication multicast group
	MarketData netip.AddrPort // market-data multicast group (optional)
	Interface  string         // multicast interface; "" means lo
	TTL        int            // multicast TTL; 0 means 0 on lo, 1 elsewhere
	// DatagramBytes is the largest datagram the node sends, a MAC tag
	// included when Key is set, and the size of its receive buffers
	// (never below bus.DatagramBytesDefault): 0 is wire.DefaultDatagramLen,
	// else wire.MinDatagramLen..wire.MaxFrameLen bytes. Every member and
	// client of a stream must use the same size: a datagram larger than a
	// receiver's is dropped and counted (its socket's ReceiveTruncations).
	// With real UDP the interface's MTU must hold a size set here and its
	// IPv4 and UDP headers; the default shrinks to fit a smaller MTU
	// (transport.FitDatagram).
	DatagramBytes int

	// Peers maps every other node's id to its unicast address.
	Peers map[uint32]netip.AddrPort

	// Witness, when set, makes leadership dynamic: the node starts as a
	// standby, its lease keeper asks the witness for the lease, and it
	// leads only while the lease is held (Role and Epoch are ignored).
	Witness netip.AddrPort
	// NewArbiter, when set, makes leadership dynamic through another
	// lease backend than the UDP witness (an etcd cluster: package
	// etcdarb); it is given the node's keeper. Witness must then be unset.
	NewArbiter func(k *arbiter.Keeper) (arbiter.Backend, error)
	// Lease is the lease configuration; it must match the witness's.
	Lease arbiter.Config
	// InSyncTimeoutNs: a standby silent this long, or whose ack does not
	// advance this long while outputs wait above it, leaves the in-sync
	// set (DefaultInSyncTimeoutNs).
	InSyncTimeoutNs int64
	// DiskStallNs: how long the node's own disk may make nothing it wrote
	// durable while records wait before the disk counts as stalled
	// (replica.DiskWatch: a primary gives its lease up, and neither role
	// asks for the lease until the disk catches up). 0: InSyncTimeoutNs,
	// the bound a standby's silent disk meets on the primary's side. A
	// disk whose fsyncs stall for a while under load now and then (a
	// shared VM's) wants it longer than the in-sync timeout: each stall
	// past it is a failover. At least MinDiskStallTicks ticks.
	DiskStallNs int64
	// ProbeAfterNs: a primary probes an in-sync standby that holds a
	// release back this long, or is silent this long plus two ack
	// intervals: a HEARTBEAT from a socket that hears the standby host's
	// "port unreachable". A refusal (the standby's process is gone) has
	// its removal proposed at once instead of after InSyncTimeoutNs.
	// 0: DefaultProbeAfterNs; negative: no probes. Below InSyncTimeoutNs.
	ProbeAfterNs int64
	// MinInSync: release only while at least this many standbys are in the
	// in-sync set (Kafka's min.insync.replicas). 0, the default, lets the
	// primary run alone when every standby is gone, and says so loudly.
	MinInSync int

	// Unsafe switches exist to prove the checks can fail (tests and
	// `seqbus drill`); a production node never sets them.
	Unsafe Unsafe

	// Role and Epoch, without a witness: a static primary leads at Epoch
	// forever (no failover; for tests and benchmarks of replication).
	Role  Role
	Epoch uint64

	// Network opens the sockets; nil means real UDP with Tuning.
	Network transport.Network

	// Journal is the journal's options. A started node commits naturally
	// (storage.Committer): its fsync thread syncs whatever was written
	// while the previous fsync ran, so GroupWindowNs and GroupRecords are
	// bounds it meets early rather than waits; the simulator's SyncStep
	// still applies them through journal.SyncDue.
	Journal journal.Options
	// FsyncInlineBelowNs: under fsync group and always, the agent fsyncs
	// on its own thread, with no hand-off to the fsync thread and back,
	// while the journal's recent fsyncs take at most this long on average
	// (storage.Inline: a fast disk); slower, they stay on the fsync
	// thread. 0 (the zero value) never syncs inline; `seqbus node`
	// defaults to DefaultFsyncInlineBelowNs.
	FsyncInlineBelowNs int64
	// FS holds the journal; nil means the real filesystem (tests inject
	// journal.MemFS to fail or crash the disk).
	FS journal.FS
	// Idle is what the node's agent thread does after a pass that found
	// nothing (bus.Idle.AgentPhaseAt): block (the zero value) parks in
	// epoll_wait at once; backoff spins a few passes, then yields while
	// commands keep arriving within its window (1 ms by default), and
	// parks otherwise; spin never parks. `seqbus node` defaults to
	// block (bus.AgentIdleDefault).
	Idle   bus.Idle
	Tuning bus.Tuning
	// PinCPU pins the agent's thread to CPU.
	PinCPU bool
	CPU    int

	// Every duration here is int64 nanoseconds with an Ns suffix, the
	// unit of the cores and of their monotonic clock (Lease too).
	TickIntervalNs int64
	HashEvery      uint64
	SnapshotEvery  uint64
	AckIntervalNs  int64
	// AckDelayNs batches a standby's acks: 0 (the default) acks after
	// every received batch, which is what the gated latency needs; > 0
	// sends at most one ack per AckDelayNs (fewer datagrams, later
	// releases).
	AckDelayNs        int64
	PublisherCapacity int
	MaxSessions       int
	// SessionHistory bounds the outputs to client sessions every node
	// keeps for replay (package session): 0 is DefaultSessionHistory,
	// below 0 keeps none (replay requests are refused).
	SessionHistory int
	// MDRingUpdates is how many recent market-data updates every node
	// keeps to answer re-requests and to publish again at promotion
	// (DefaultMDRingUpdates; package mdfeed explains the bounds).
	MDRingUpdates int

	// NewStateMachine builds the replicated state machine (the bus knows it
	// only through engine.StateMachine).
	NewStateMachine func() (engine.StateMachine, error)
	// NewScratchStateMachine builds a state machine that is not the
	// node's: the recomputes of outputs for session replay apply journal
	// records to it (nil: NewStateMachine). A harness that watches the
	// node's own state machine gives a separate one here.
	NewScratchStateMachine func() (engine.StateMachine, error)

	// StatusFile, if set, is rewritten (atomically) every 100 ms and on
	// Close with the node's Status as JSON.
	StatusFile string

	Log *slog.Logger

	// Clock, when set, replaces Go's monotonic clock (a simulator's
	// clock); Observer, when set, sees every apply and release (hooks.go;
	// node/drive.go drives a node by hand).
	Clock    Clock
	Observer Observer

	// Key, when set, turns on frame authentication (transport.Transport): every
	// frame sent carries a MAC, every frame received must.
	Key *auth.MasterKey
}

// ErrConfig is returned for an unusable configuration.
var ErrConfig = errors.New("node: bad configuration")

// Validate reports the first unusable setting of c as it would be after
// defaults, opening nothing: no socket, file or directory. With real UDP
// sockets (Network nil or UDPNetwork) it checks that the multicast
// interface exists and is up (the error then matches ErrConfig and holds
// a *bus.InterfaceError naming the host's interfaces). New runs the same checks before it touches the
// journal, so a bad configuration never leaves a directory behind.
func (c Config) Validate() error { return c.SetDefaults() }

// SetDefaults fills c's defaults in place and reports the first unusable
// setting, as Validate does: node.New runs it on its copy.
func (c *Config) SetDefaults() error {
	if err := c.checkRequired(); err != nil {
		return err
	}
	c.ioDefaults()
	return c.protocolDefaults()
}

// checkRequired refuses a Config that cannot run, and sets the lease
// defaults of a node with an arbiter.
func (c *Config) checkRequired() error {
	if c.ID == 0 {
		return fmt.Errorf("%w: node id 0 is reserved", ErrConfig)
	}
	if c.Dir == "" {
		return fmt.Errorf("%w: no journal directory", ErrConfig)
	}
	if !c.Listen.IsValid() || !c.Group.IsValid() {
		return fmt.Errorf("%w: listen and group addresses are required", ErrConfig)
	}
	if c.NewStateMachine == nil {
		return fmt.Errorf("%w: no state machine", ErrConfig)
	}
	if c.NewScratchStateMachine == nil {
		c.NewScratchStateMachine = c.NewStateMachine // a session replay recompute's
	}
	if c.Witness.IsValid() && c.NewArbiter != nil {
		return fmt.Errorf("%w: a witness address and another arbiter are exclusive", ErrConfig)
	}
	if c.Witness.IsValid() || c.NewArbiter != nil {
		c.Role = RoleStandby
		if c.Lease == (arbiter.Config{}) {
			c.Lease = arbiter.DefaultConfig()
		}
		if err := c.Lease.Validate(); err != nil {
			return fmt.Errorf("%w: lease: %v", ErrConfig, err)
		}
	}
	if c.Role == RolePrimary && c.Epoch == 0 {
		return fmt.Errorf("%w: a static primary needs an epoch >= 1", ErrConfig)
	}
	if c.FsyncInlineBelowNs < 0 {
		return fmt.Errorf("%w: fsync inline bound %v is negative", ErrConfig, time.Duration(c.FsyncInlineBelowNs))
	}
	if c.TTL < 0 || c.TTL > 255 {
		return fmt.Errorf("%w: multicast TTL %d not in 0..255", ErrConfig, c.TTL)
	}
	return c.checkNetwork()
}

// ioDefaults fills the socket, journal and network defaults.
func (c *Config) ioDefaults() {
	if c.Tuning.RecvBufferBytes == 0 {
		c.Tuning.RecvBufferBytes = DefaultRecvBufferBytes
	}
	if c.FS == nil {
		c.FS = journal.OSFS{}
	}
	if c.Journal.WriteBufferBytes == 0 {
		// One write per received batch instead of one per record: the
		// node flushes after every batch and before every sync or ack.
		c.Journal.WriteBufferBytes = DefaultJournalWriteBufferBytes
	} else if c.Journal.WriteBufferBytes < 0 {
		c.Journal.WriteBufferBytes = 0 // write-through
	}
	if c.Network == nil {
		c.Network = transport.UDPNetwork{Tuning: c.Tuning}
	}
}

// protocolDefaults fills the protocol's defaults and checks its bounds.
func (c *Config) protocolDefaults() error {
	if c.InSyncTimeoutNs <= 0 {
		c.InSyncTimeoutNs = DefaultInSyncTimeoutNs
	}
	if c.ProbeAfterNs == 0 {
		c.ProbeAfterNs = min(DefaultProbeAfterNs, c.InSyncTimeoutNs/2)
	}
	if c.ProbeAfterNs >= c.InSyncTimeoutNs {
		return fmt.Errorf("%w: probe-after %s not below the in-sync timeout %s", ErrConfig, time.Duration(c.ProbeAfterNs), time.Duration(c.InSyncTimeoutNs))
	}
	if c.TickIntervalNs <= 0 {
		c.TickIntervalNs = DefaultTickIntervalNs
	}
	switch {
	case c.DiskStallNs == 0:
		c.DiskStallNs = c.InSyncTimeoutNs
	case c.DiskStallNs < MinDiskStallTicks*c.TickIntervalNs:
		return fmt.Errorf("%w: disk-stall-after %s is under %d ticks (%s): the disk watch restarts its wait across a gap of a quarter of it, so it could never see a stall",
			ErrConfig, time.Duration(c.DiskStallNs), MinDiskStallTicks, time.Duration(MinDiskStallTicks*c.TickIntervalNs))
	}
	if c.HashEvery == 0 {
		c.HashEvery = DefaultHashEvery
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.AckIntervalNs <= 0 {
		c.AckIntervalNs = DefaultAckIntervalNs
	}
	if c.PublisherCapacity <= 0 {
		c.PublisherCapacity = DefaultPublisherCapacity
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.SessionHistory == 0 {
		c.SessionHistory = DefaultSessionHistory
	}
	if c.SessionHistory > MaxSessionHistory {
		return fmt.Errorf("%w: session history %d outputs over the limit %d", ErrConfig, c.SessionHistory, MaxSessionHistory)
	}
	if err := c.mdDefaults(); err != nil {
		return err
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return nil
}

// Unsafe disables a safety mechanism. Each makes a specific anomaly
// possible; the drills and tests show that anomaly being detected.
type Unsafe struct {
	// NoFencing: a standby accepts frames of older epochs, and a primary
	// keeps releasing without its lease and never steps down.
	NoFencing bool
	// NoGating: a primary releases outputs as soon as it has applied the
	// command, before any standby has it and before it is durable.
	NoGating bool
	// LeaseFromReply: the lease is timed from when the grant arrived, not
	// from when the request was sent, so a delayed grant makes the node
	// believe in a lease the witness already counts as expired. Test-only
	// (the simulator's mutation tests); no flag sets it.
	LeaseFromReply bool
	// NoSessionReplay: every node ignores session replay requests, so an
	// output a client missed (lost, or never released by a dead primary)
	// is never delivered, nor anything after it. Test-only (the
	// simulator's mutation tests); no flag sets it.
	NoSessionReplay bool
	// NoMDRepublish: a promoted standby does not publish the market data
	// above the old primary's last release (a hole in the feed at every
	// failover). Test-only (the simulator's mutation tests); no flag sets
	// it.
	NoMDRepublish bool
}

// Defaults and bounds of other packages, named here for the settings.
const (
	// DefaultInSyncTimeoutNs: 200 ms without an ack, or with outputs
	// waiting above an ack that does not advance, removes a standby.
	// Standbys ack every seq they get and at least every 5 ms when
	// healthy, so 200 ms is 40 missed acks: long against scheduling
	// stalls on these machines, short enough that the market pauses for
	// a fifth of a second, not until an operator acts.
	DefaultInSyncTimeoutNs = 200_000_000
	// DefaultProbeAfterNs: 2 ms holding a release back (a hundred times a
	// loopback round trip, beyond most scheduling stalls here) before a
	// standby is probed; a probe costs one datagram.
	DefaultProbeAfterNs = 2_000_000
	// DefaultSessionHistory is the default SessionHistory: 64k outputs.
	DefaultSessionHistory = session.DefaultHistory
	// MaxSessionHistory bounds SessionHistory (16M outputs, ~2.4 GB).
	MaxSessionHistory = session.MaxHistory
	// MDRingUpdates's default and bounds (package mdfeed explains them).
	DefaultMDRingUpdates = mdfeed.DefaultRingUpdates
	MinMDRingUpdates     = mdfeed.MinRingUpdates
	MaxMDRingUpdates     = mdfeed.MaxRingUpdates
	// Journal.SegmentBytes's bounds (`seqbus node --segment-bytes`;
	// 0 takes journal.DefaultSegmentBytes, 64 MiB). Each segment file is
	// preallocated whole when the journal rolls to it, so a full disk
	// fails the roll, not a write inside a segment: smaller segments need
	// less free space and roll more often.
	MinSegmentBytes = 64 << 10
	MaxSegmentBytes = 1 << 30
)

// mdDefaults validates and defaults MDRingUpdates.
func (c *Config) mdDefaults() error {
	if c.MDRingUpdates == 0 {
		c.MDRingUpdates = DefaultMDRingUpdates
	}
	if c.MDRingUpdates < MinMDRingUpdates || c.MDRingUpdates > MaxMDRingUpdates {
		return fmt.Errorf("%w: market-data ring of %d updates not in %d..%d", ErrConfig, c.MDRingUpdates, MinMDRingUpdates, MaxMDRingUpdates)
	}
	return nil
}

// checkNetwork defaults and bounds DatagramBytes against the network and
// the multicast interface (transport.FitDatagram): the interface must
// exist and be up, and its MTU hold a datagram; the default shrinks to a
// smaller MTU, a size the operator set is refused.
func (c *Config) checkNetwork() error {
	b, err := transport.FitDatagram(c.Network, c.Interface, c.DatagramBytes)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.DatagramBytes = b
	return nil
}

// TransportConfig is the transport's part of c.
func (c *Config) TransportConfig() transport.Config {
	return transport.Config{Network: c.Network, Listen: c.Listen, Group: c.Group, MarketData: c.MarketData, Interface: c.Interface, TTL: c.TTL,
		Stream: c.Stream, Node: c.ID, DatagramBytes: c.DatagramBytes, Key: c.Key, Log: c.Log}
}
