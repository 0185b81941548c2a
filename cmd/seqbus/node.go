package main

import (
	"cmp"
	"context"
	"flag"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/etcdarb"
	"github.com/seqbus/seqbus/nodeconfig"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/serve"
	"github.com/seqbus/seqbus/journal"
)

// peerFlags collects repeated --peer id=host:port flags.
type peerFlags = flagcheck.Peers

func parseIdle(s string) (bus.Idle, error) { return bus.ParseIdle(s) }

func parseFsync(s string) (journal.SyncPolicy, error) { return journal.ParseSyncPolicy(s) }

// engineConfig is the matching engine every replica runs; all replicas
// must use the same one. A dedup window of 1024 lets a client keep 1024
// commands in flight and still resend any of them safely.
func engineConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.DedupWindow = 1024
	return cfg
}

func runNode(args []string) error { return runNodeWith("node", args, false) }

// nodeFlags are `seqbus node`'s flags.
type nodeFlags struct {
	id, stream                                          *uint
	dir, listen, group, md, iface, role, fsync          *string
	idle, status, arbiterURL, witnessAddr, traceWindow  *string
	keyFile, metricsAddr, traceFile, engineName         *string
	ttl, minInSync, recvBuf, cpu, traceStages           *int
	mdRing, sessionHistory, datagramBytes, segmentBytes *int
	epoch, snapEvery                                    *uint64
	verbose, noFencing, noGating, gro                   *bool
	lease, renew, margin, retry, ackDelay, diskStall    *time.Duration
	insyncTimeout, probeAfter, busyPoll, fsyncInline    *time.Duration
	peers                                               peerFlags
}

func defineNodeFlags(fs *flag.FlagSet, allowUnsafe bool) *nodeFlags {
	f := &nodeFlags{peers: peerFlags{}}
	f.id = fs.Uint("id", 0, "node id (1..2^32-1), unique in the cluster")
	f.dir = fs.String("dir", "", "journal and snapshot directory")
	f.listen = fs.String("listen", "127.0.0.1:7101", "unicast address (clients, acks, naks, snapshots)")
	f.group = fs.String("group", "239.77.0.1:7100", "replication multicast group")
	f.md = fs.String("market-data", "", "market-data multicast group (optional)")
	f.iface = fs.String("iface", "lo", "multicast interface (pinned; never the default route)")
	f.ttl = fs.Int("ttl", 0, "multicast TTL (0: 0 on lo, 1 elsewhere)")
	f.stream = fs.Uint("stream", 1, "stream id")
	f.role = fs.String("role", "standby", "standby, or primary (a static primary: no witness)")
	f.epoch = fs.Uint64("epoch", 1, "epoch of a static primary")
	f.fsync = fs.String("fsync", "group", "journal fsync policy: none, group, always")
	f.fsyncInline = fs.Duration("fsync-inline", time.Duration(nodeconfig.DefaultFsyncInlineBelowNs), fsyncInlineUsage)
	f.idle = fs.String("idle", bus.AgentIdleDefault.Kind.String(), "idle strategy of the node's agent thread: block (epoll_wait at once), backoff (spin, then yield while commands arrive within 1 ms, then epoll_wait; backoff:250us sets the window; for a node with a core of its own), spin, yield (see docs/tuning.md)")
	f.status = fs.String("status-file", "", "write status JSON here every 100 ms (default DIR/status.json)")
	f.segmentBytes = fs.Int("segment-bytes", journal.DefaultSegmentBytes, segmentBytesUsage)
	f.snapEvery = fs.Uint64("snapshot-every", nodeconfig.DefaultSnapshotEvery, "snapshot every N commands")
	f.mdRing = fs.Int("md-ring", nodeconfig.DefaultMDRingUpdates, "recent market-data updates kept to answer re-requests and to publish again at promotion (past it: a book snapshot)")
	f.datagramBytes = fs.Int("datagram-bytes", 0, nodeDatagramBytesUsage)
	f.sessionHistory = fs.Int("session-history", nodeconfig.DefaultSessionHistory, "outputs to client sessions kept for replay after a failover or a gap, over all sessions (0: none, replay requests answered TooOld)")
	f.verbose = fs.Bool("v", false, "log at debug level")
	f.arbiterURL = fs.String("arbiter", "", "lease arbiter other than the UDP witness: etcd://host1:2379,host2:2379,host3:2379 (an etcd cluster; see README)")
	f.witnessAddr = fs.String("witness", "", "the witness's address; with it the node starts as a standby and leads only while it holds the lease")
	f.lease = fs.Duration("lease", time.Duration(arbiter.DefaultLeaseDurationNs), "lease duration (must match the witness)")
	f.renew = fs.Duration("renew", time.Duration(arbiter.DefaultRenewIntervalNs), "renew the lease this often")
	f.margin = fs.Duration("margin", time.Duration(arbiter.DefaultMarginNs), "stop releasing this long before the lease ends")
	f.retry = fs.Duration("retry", time.Duration(arbiter.DefaultRetryNs), "retry a failed renew after this long")
	f.ackDelay = fs.Duration("ack-delay", 0, "standby: send at most one ack per this interval (0: ack every received batch)")
	f.insyncTimeout = fs.Duration("insync-timeout", time.Duration(nodeconfig.DefaultInSyncTimeoutNs), "a standby silent this long, or not acking outputs that wait, leaves the in-sync set (via the witness)")
	f.diskStall = fs.Duration("disk-stall-after", 0, "a node whose disk makes nothing it wrote durable this long does not lead (a primary gives its lease up) until the disk catches up (0: the --insync-timeout; longer on a disk whose fsyncs stall now and then)")
	f.probeAfter = fs.Duration("probe-after", time.Duration(nodeconfig.DefaultProbeAfterNs), "primary: probe an in-sync standby that holds a release back this long (or is silent this long plus two ack intervals); if its host answers \"port unreachable\" (its process is gone) it is removed now, not after --insync-timeout (0: no probes)")
	f.minInSync = fs.Int("min-insync", 0, "release only while at least this many standbys are in sync (0: run alone when none is)")
	f.recvBuf = fs.Int("recv-buffer", nodeconfig.DefaultRecvBufferBytes, "socket receive buffer in bytes (SO_RCVBUF; the kernel doubles it)")
	f.busyPoll = fs.Duration("busy-poll", 0, "SO_BUSY_POLL: let the kernel spin this long on the NIC queue in receive (needs CAP_NET_ADMIN to raise; 0: off)")
	f.gro = fs.Bool("gro", false, "UDP_GRO on the receiving sockets: read a run of datagrams that arrives coalesced (a peer's segmented send, a NIC's GRO for UDP) as one buffer; 512 KiB a socket; no gain measured on loopback (see docs/tuning.md)")
	f.keyFile = fs.String("key", "", "master key file (seqbus keygen): authenticate every frame")
	f.cpu = fs.Int("cpu", -1, "pin the agent thread to this CPU (-1: no pinning)")
	f.metricsAddr = fs.String("metrics-addr", "", flagcheck.MetricsAddrUsage)
	f.traceStages = fs.Int("trace-stages", 0, "record the stage times of the first N seqs and write them at exit to --trace-file (seqbus bench; 0: off)")
	f.traceFile = fs.String("trace-file", "", "where --trace-stages writes (default DIR/stages.trace)")
	f.traceWindow = fs.String("trace-window", "", traceWindowUsage)
	f.engineName = fs.String("engine", "matching", "state machine: matching (the reference engine), or none (answers every command, does nothing: replicated throughput)")
	f.noFencing, f.noGating = new(bool), new(bool)
	if allowUnsafe {
		f.noFencing = fs.Bool("unsafe-no-fencing", false, "UNSAFE, drills only: accept stale epochs and never step down")
		f.noGating = fs.Bool("unsafe-no-gating", false, "UNSAFE, drills only: release outputs before standbys or the disk have them")
	}
	fs.Var(f.peers, "peer", "another node, as id=host:port (repeat)")
	return f
}

func (f *nodeFlags) check() error {
	return firstError(
		flagcheck.NodeID("id", *f.id), checkRequired("dir", *f.dir), checkAddr("listen", *f.listen, false),
		flagcheck.Group("group", *f.group, false), flagcheck.Group("market-data", *f.md, true), flagcheck.Interface("iface", *f.iface),
		checkRange("ttl", *f.ttl, 0, 255), checkStream(*f.stream), checkOneOf("role", *f.role, "standby", "primary"),
		checkPositive("epoch", *f.epoch), checkFsync("fsync", *f.fsync), checkIdle("idle", *f.idle),
		checkPositive("snapshot-every", *f.snapEvery), checkDest("witness", *f.witnessAddr, true),
		flagcheck.Lease(*f.lease, *f.renew, *f.margin, *f.retry), checkNonNegative("ack-delay", *f.ackDelay),
		flagcheck.InSync(*f.insyncTimeout, *f.probeAfter, *f.diskStall, time.Duration(nodeconfig.MinDiskStallTicks*nodeconfig.DefaultTickIntervalNs)), f.peers.CheckMinInSync(*f.minInSync),
		checkPositive("recv-buffer", *f.recvBuf), checkNonNegative("busy-poll", *f.busyPoll), checkCPU(*f.cpu),
		f.peers.CheckNotSelf(*f.id), flagcheck.ListenPort(*f.listen, *f.group), checkMDRing(*f.mdRing), checkSessionHistory(*f.sessionHistory),
		checkNodeDatagramBytes(*f.datagramBytes), checkNonNegative("fsync-inline", *f.fsyncInline),
		checkRange("segment-bytes", *f.segmentBytes, nodeconfig.MinSegmentBytes, nodeconfig.MaxSegmentBytes),
		flagcheck.OutputFile("status-file", *f.status), flagcheck.TraceFile(*f.traceStages, *f.traceFile),
	)
}

// runNodeWith runs a node. The unsafe switches exist only for `seqbus drill
// node` (allowUnsafe), which the drills start; `seqbus node` has none.
func runNodeWith(name string, args []string, allowUnsafe bool) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	f := defineNodeFlags(fs, allowUnsafe)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	metricsAddr, err := flagcheck.MetricsAddr(*f.metricsAddr)
	if err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if err := checkNodeConfig(cfg); err != nil {
		return err
	}
	return serve.Node(cfg, serve.NodeOptions{MetricsAddr: metricsAddr, TraceStages: *f.traceStages, TraceWindow: *f.traceWindow, TraceFile: *f.traceFile}, waitSignal)
}

// config turns the flags into the node's Config.
func (f *nodeFlags) config() (nodeconfig.Config, error) {
	cfg := nodeconfig.Config{
		ID: uint32(*f.id), Stream: uint16(*f.stream), Dir: *f.dir, Interface: *f.iface, TTL: *f.ttl, DatagramBytes: *f.datagramBytes,
		Peers: f.peers, Epoch: *f.epoch, SnapshotEvery: *f.snapEvery, MDRingUpdates: *f.mdRing,
		SessionHistory: sessionHistoryConfig(*f.sessionHistory),
	}
	var err error
	if cfg.NewStateMachine, err = stateMachineFlag(*f.engineName); err != nil {
		return cfg, asUsage(err)
	}
	if _, err = traceStagesFlag(*f.traceStages); err != nil {
		return cfg, asUsage(err)
	}
	if err := traceWindowFlag(*f.traceWindow, *f.traceStages); err != nil {
		return cfg, asUsage(err)
	}
	if err := f.addresses(&cfg); err != nil {
		return cfg, err
	}
	cfg.Journal.Policy, _ = parseFsync(*f.fsync) // checked above
	cfg.Journal.SegmentBytes, cfg.FsyncInlineBelowNs = int64(*f.segmentBytes), int64(*f.fsyncInline)
	cfg.Idle, _ = parseIdle(*f.idle)
	if err := f.leaseConfig(&cfg); err != nil {
		return cfg, err
	}
	cfg.InSyncTimeoutNs, cfg.DiskStallNs, cfg.MinInSync, cfg.AckDelayNs = int64(*f.insyncTimeout), int64(*f.diskStall), *f.minInSync, int64(*f.ackDelay)
	cfg.ProbeAfterNs = cmp.Or(int64(*f.probeAfter), -1) // 0: no probes
	cfg.Unsafe = nodeconfig.Unsafe{NoFencing: *f.noFencing, NoGating: *f.noGating}
	if cfg.Key, err = loadKey(*f.keyFile); err != nil {
		return cfg, asUsage(err)
	}
	cfg.Tuning = bus.Tuning{RecvBufferBytes: *f.recvBuf, BusyPollUs: int(*f.busyPoll / time.Microsecond), GRO: *f.gro}
	if *f.cpu >= 0 {
		cfg.PinCPU, cfg.CPU = true, *f.cpu
	}
	cfg.StatusFile = cmp.Or(*f.status, filepath.Join(*f.dir, "status.json"))
	level := slog.LevelInfo
	if *f.verbose {
		level = slog.LevelDebug
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", *f.id)
	if *f.noFencing || *f.noGating {
		cfg.Log.Warn("UNSAFE SWITCHES ON: this node can lose or un-release outputs; drills only", "no_fencing", *f.noFencing, "no_gating", *f.noGating)
	}
	return cfg, nil
}

// addresses parses --listen, --group, --market-data and --role.
func (f *nodeFlags) addresses(cfg *nodeconfig.Config) error {
	var err error
	if cfg.Listen, err = netip.ParseAddrPort(*f.listen); err != nil {
		return usagef("--listen: %v", err)
	}
	if cfg.Group, err = netip.ParseAddrPort(*f.group); err != nil {
		return usagef("--group: %v", err)
	}
	if *f.md != "" {
		if cfg.MarketData, err = netip.ParseAddrPort(*f.md); err != nil {
			return usagef("--market-data: %v", err)
		}
	}
	if *f.role == "primary" { // standby or primary: checked above
		cfg.Role = nodeconfig.RolePrimary
	}
	return nil
}

// leaseConfig sets the lease backend: the UDP witness or etcd.
func (f *nodeFlags) leaseConfig(cfg *nodeconfig.Config) error {
	lease := arbiter.Config{LeaseDurationNs: int64(*f.lease), RenewIntervalNs: int64(*f.renew), MarginNs: int64(*f.margin), RetryNs: int64(*f.retry)}
	if *f.witnessAddr != "" {
		var err error
		if cfg.Witness, err = netip.ParseAddrPort(*f.witnessAddr); err != nil {
			return usagef("--witness: %v", err)
		}
		cfg.Lease = lease
	}
	if *f.arbiterURL != "" {
		if *f.witnessAddr != "" {
			return usagef("--witness and --arbiter are exclusive")
		}
		eps, err := parseEtcdURL(*f.arbiterURL)
		if err != nil {
			return asUsage(err)
		}
		cfg.Lease = lease
		stream, id, leaseNs := uint16(*f.stream), arbiter.NodeID(*f.id), int64(*f.lease)
		cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) {
			return etcdarb.New(etcdarb.Config{Endpoints: eps, Stream: stream, Node: id, LeaseDurationNs: leaseNs}, k)
		}
	}
	return nil
}

// parseEtcdURL turns etcd://h1:2379,h2:2379 into client endpoints.
func parseEtcdURL(u string) ([]string, error) {
	eps, err := etcdarb.ParseURL(u)
	return eps, flagcheck.Prefixed("arbiter", err)
}

// waitSignal blocks until SIGINT or SIGTERM.
func waitSignal() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
