package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/seqbus/seqbus/etcdarb"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/metrics"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/node"
)

// peerFlags collects repeated --peer id=host:port flags.
type peerFlags map[uint32]netip.AddrPort

func (p peerFlags) String() string { return fmt.Sprint(map[uint32]netip.AddrPort(p)) }

func (p peerFlags) Set(v string) error {
	idText, addrText, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want id=host:port, got %q", v)
	}
	id, err := strconv.ParseUint(idText, 10, 32)
	if err != nil || id == 0 {
		return fmt.Errorf("bad peer id %q", idText)
	}
	addr, err := netip.ParseAddrPort(addrText)
	if err != nil {
		return fmt.Errorf("bad peer address %q: %v", addrText, err)
	}
	p[uint32(id)] = addr
	return nil
}

// checkMinInSync: at least 0 and no more standbys than there are peers.
func checkMinInSync(v, peers int) error {
	if v < 0 || v > peers {
		return usagef("--min-insync must be 0..%d (the number of --peer), got %d", peers, v)
	}
	return nil
}

// checkPeers: no --peer may be this node itself.
func checkPeers(peers peerFlags, id uint) error {
	if _, ok := peers[uint32(id)]; ok && id != 0 {
		return usagef("--peer %d=%s is this node's own --id", id, peers[uint32(id)])
	}
	return nil
}

func parseIdle(s string) (bus.Idle, error) {
	switch s {
	case "backoff":
		return bus.Idle{Kind: bus.IdleBackoff}, nil
	case "spin":
		return bus.Idle{Kind: bus.IdleBusySpin}, nil
	case "yield":
		return bus.Idle{Kind: bus.IdleYield}, nil
	case "block":
		return bus.Idle{Kind: bus.IdleBlock}, nil
	}
	return bus.Idle{}, fmt.Errorf("unknown idle strategy %q (backoff, spin, yield, block)", s)
}

func parseFsync(s string) (journal.SyncPolicy, error) {
	switch s {
	case "none":
		return journal.SyncNone, nil
	case "group":
		return journal.SyncGroup, nil
	case "always":
		return journal.SyncAlways, nil
	}
	return 0, fmt.Errorf("unknown fsync policy %q (none, group, always)", s)
}

// engineConfig is the matching engine every replica runs; all replicas
// must use the same one. A dedup window of 1024 lets a client keep 1024
// commands in flight and still resend any of them safely.
func engineConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.DedupWindow = 1024
	return cfg
}

func runNode(args []string) error { return runNodeWith("node", args, false) }

// runNodeWith runs a node. The unsafe switches exist only for `seqbus drill
// node` (allowUnsafe), which the drills start; `seqbus node` has none.
func runNodeWith(name string, args []string, allowUnsafe bool) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	id := fs.Uint("id", 0, "node id (1..2^32-1), unique in the cluster")
	dir := fs.String("dir", "", "journal and snapshot directory")
	listen := fs.String("listen", "127.0.0.1:7101", "unicast address (clients, acks, naks, snapshots)")
	group := fs.String("group", "239.77.0.1:7100", "replication multicast group")
	md := fs.String("market-data", "", "market-data multicast group (optional)")
	iface := fs.String("iface", "lo", "multicast interface (pinned; never the default route)")
	ttl := fs.Int("ttl", 0, "multicast TTL (0: 0 on lo, 1 elsewhere)")
	stream := fs.Uint("stream", 1, "stream id")
	role := fs.String("role", "standby", "standby, or primary (a static primary: no witness)")
	epoch := fs.Uint64("epoch", 1, "epoch of a static primary")
	fsync := fs.String("fsync", "group", "journal fsync policy: none, group, always")
	idle := fs.String("idle", "block", "receive idle strategy: block, backoff, spin, yield (see docs/tuning.md)")
	status := fs.String("status-file", "", "write status JSON here every 100 ms (default DIR/status.json)")
	snapEvery := fs.Uint64("snapshot-every", node.DefaultSnapshotEvery, "snapshot every N commands")
	verbose := fs.Bool("v", false, "log at debug level")
	arbiterURL := fs.String("arbiter", "", "lease arbiter other than the UDP witness: etcd://host1:2379,host2:2379,host3:2379 (an etcd cluster; see README)")
	witnessAddr := fs.String("witness", "", "the witness's address; with it the node starts as a standby and leads only while it holds the lease")
	lease := fs.Duration("lease", time.Duration(arbiter.DefaultLeaseDurationNs), "lease duration (must match the witness)")
	renew := fs.Duration("renew", time.Duration(arbiter.DefaultRenewIntervalNs), "renew the lease this often")
	margin := fs.Duration("margin", time.Duration(arbiter.DefaultMarginNs), "stop releasing this long before the lease ends")
	retry := fs.Duration("retry", time.Duration(arbiter.DefaultRetryNs), "retry a failed renew after this long")
	ackDelay := fs.Duration("ack-delay", 0, "standby: send at most one ack per this interval (0: ack every received batch)")
	insyncTimeout := fs.Duration("insync-timeout", time.Duration(node.DefaultInSyncTimeoutNs), "a standby silent this long, or not acking outputs that wait, leaves the in-sync set (via the witness)")
	minInSync := fs.Int("min-insync", 0, "release only while at least this many standbys are in sync (0: run alone when none is)")
	recvBuf := fs.Int("recv-buffer", node.DefaultRecvBufferBytes, "socket receive buffer in bytes (SO_RCVBUF; the kernel doubles it)")
	busyPoll := fs.Duration("busy-poll", 0, "SO_BUSY_POLL: let the kernel spin this long on the NIC queue in receive (needs CAP_NET_ADMIN to raise; 0: off)")
	keyFile := fs.String("key", "", "master key file (seqbus keygen): authenticate every frame")
	cpu := fs.Int("cpu", -1, "pin the receive loops to this CPU (-1: no pinning)")
	metricsAddrFlag := fs.String("metrics-addr", "", metricsAddrUsage)
	sessionHistory := fs.Int("session-history", node.DefaultSessionHistory, "outputs to client sessions kept for replay after a failover or a gap, over all sessions (0: none, replay requests refused)")
	traceStages := fs.Int("trace-stages", 0, "record the stage times of the first N seqs and write them at exit to --trace-file (seqbus bench; 0: off)")
	traceFile := fs.String("trace-file", "", "where --trace-stages writes (default DIR/stages.trace)")
	engineName := fs.String("engine", "matching", "state machine: matching (the reference engine), or none (answers every command, does nothing: replicated throughput)")
	noFencing, noGating := new(bool), new(bool)
	if allowUnsafe {
		noFencing = fs.Bool("unsafe-no-fencing", false, "UNSAFE, drills only: accept stale epochs and never step down")
		noGating = fs.Bool("unsafe-no-gating", false, "UNSAFE, drills only: release outputs before standbys or the disk have them")
	}
	peers := peerFlags{}
	fs.Var(peers, "peer", "another node, as id=host:port (repeat)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkNodeID("id", *id), checkRequired("dir", *dir), checkAddr("listen", *listen, false),
		checkGroup("group", *group, false), checkGroup("market-data", *md, true), checkInterface("iface", *iface),
		checkRange("ttl", *ttl, 0, 255), checkStream(*stream), checkOneOf("role", *role, "standby", "primary"),
		checkPositive("epoch", *epoch), checkFsync("fsync", *fsync), checkIdle("idle", *idle),
		checkPositive("snapshot-every", *snapEvery), checkAddr("witness", *witnessAddr, true),
		checkLease(*lease, *renew, *margin, *retry), checkNonNegative("ack-delay", *ackDelay),
		checkPositive("insync-timeout", *insyncTimeout), checkMinInSync(*minInSync, len(peers)),
		checkPositive("recv-buffer", *recvBuf), checkNonNegative("busy-poll", *busyPoll), checkCPU(*cpu),
		checkPeers(peers, *id), checkSessionHistory(*sessionHistory),
	); err != nil {
		return err
	}
	metricsAddr, err := parseMetricsAddr(*metricsAddrFlag)
	if err != nil {
		return err
	}
	cfg := node.Config{
		ID: uint32(*id), Stream: uint16(*stream), Dir: *dir, Interface: *iface, TTL: *ttl,
		Peers: peers, Epoch: *epoch, SnapshotEvery: *snapEvery, SessionHistory: sessionHistoryConfig(*sessionHistory),
		NewStateMachine: func() (engine.StateMachine, error) { return engine.New(engineConfig()) },
	}
	if cfg.NewStateMachine, err = stateMachineFlag(*engineName); err != nil {
		return asUsage(err)
	}
	if cfg.TraceStages, err = traceStagesFlag(*traceStages); err != nil {
		return asUsage(err)
	}
	if cfg.Listen, err = netip.ParseAddrPort(*listen); err != nil {
		return usagef("--listen: %v", err)
	}
	if cfg.Group, err = netip.ParseAddrPort(*group); err != nil {
		return usagef("--group: %v", err)
	}
	if *md != "" {
		if cfg.MarketData, err = netip.ParseAddrPort(*md); err != nil {
			return usagef("--market-data: %v", err)
		}
	}
	switch *role {
	case "primary":
		cfg.Role = node.RolePrimary
	case "standby":
		cfg.Role = node.RoleStandby
	default:
		return usagef("--role: want primary or standby, got %q", *role)
	}
	cfg.Journal.Policy, _ = parseFsync(*fsync) // checked above
	cfg.Idle, _ = parseIdle(*idle)
	if *witnessAddr != "" {
		if cfg.Witness, err = netip.ParseAddrPort(*witnessAddr); err != nil {
			return usagef("--witness: %v", err)
		}
		cfg.Lease = arbiter.Config{LeaseDurationNs: int64(*lease), RenewIntervalNs: int64(*renew), MarginNs: int64(*margin), RetryNs: int64(*retry)}
	}
	if *arbiterURL != "" {
		if *witnessAddr != "" {
			return usagef("--witness and --arbiter are exclusive")
		}
		eps, err := parseEtcdURL(*arbiterURL)
		if err != nil {
			return asUsage(err)
		}
		cfg.Lease = arbiter.Config{LeaseDurationNs: int64(*lease), RenewIntervalNs: int64(*renew), MarginNs: int64(*margin), RetryNs: int64(*retry)}
		stream, id := uint16(*stream), arbiter.NodeID(*id)
		cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) {
			return etcdarb.New(etcdarb.Config{Endpoints: eps, Stream: stream, Node: id, LeaseDurationNs: int64(*lease)}, k)
		}
	}
	cfg.InSyncTimeoutNs, cfg.MinInSync = int64(*insyncTimeout), *minInSync
	cfg.AckDelayNs = int64(*ackDelay)
	cfg.Unsafe = node.Unsafe{NoFencing: *noFencing, NoGating: *noGating}
	if cfg.Key, err = loadKey(*keyFile); err != nil {
		return asUsage(err)
	}
	cfg.Tuning = bus.Tuning{RecvBufferBytes: *recvBuf, BusyPollUs: int(*busyPoll / time.Microsecond)}
	if *cpu >= 0 {
		cfg.PinCPU, cfg.CPU = true, *cpu
	}
	cfg.StatusFile = *status
	if cfg.StatusFile == "" {
		cfg.StatusFile = filepath.Join(*dir, "status.json")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", *id)
	if *noFencing || *noGating {
		cfg.Log.Warn("UNSAFE SWITCHES ON: this node can lose or un-release outputs; drills only", "no_fencing", *noFencing, "no_gating", *noGating)
	}
	if err := checkNodeConfig(cfg); err != nil {
		return err
	}
	// Listen for metrics before the node opens anything, so a taken port
	// fails the start instead of leaving a node running without them.
	var reg *prometheus.Registry
	if metricsAddr != "" {
		reg = metrics.NewRegistry()
		ms, err := metrics.Serve(metricsAddr, reg, cfg.Log)
		if err != nil {
			return err
		}
		defer ms.Close()
		cfg.Log.Info("metrics", "url", "http://"+ms.Addr()+"/metrics")
	}
	n, err := node.New(cfg)
	if err != nil {
		return err
	}
	if reg != nil {
		reg.MustRegister(metrics.NodeCollector{N: n})
	}
	for _, r := range n.SocketReports() {
		if r.RecvBufferBytesGranted < r.RecvBufferBytesRequested {
			cfg.Log.Warn("receive buffer smaller than asked (raise net.core.rmem_max or run as root)", "socket", r.Local, "asked", r.RecvBufferBytesRequested, "granted", r.RecvBufferBytesGranted)
		}
		if r.BusyPollErr != nil {
			cfg.Log.Warn("SO_BUSY_POLL refused", "socket", r.Local, "err", r.BusyPollErr)
		}
	}
	if err := n.Start(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	cfg.Log.Info("stopping")
	err = n.Close()
	if cfg.TraceStages > 0 {
		path := *traceFile
		if path == "" {
			path = filepath.Join(*dir, "stages.trace")
		}
		if werr := n.WriteTrace(path, os.Getpid()); werr != nil && err == nil {
			err = fmt.Errorf("--trace-file: %w", werr)
		}
	}
	return err
}

// parseEtcdURL turns etcd://h1:2379,h2:2379 into client endpoints.
func parseEtcdURL(u string) ([]string, error) {
	rest, ok := strings.CutPrefix(u, "etcd://")
	if !ok || rest == "" {
		return nil, fmt.Errorf("--arbiter: want etcd://host:port[,host:port...], got %q", u)
	}
	var eps []string
	for _, h := range strings.Split(rest, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("--arbiter: bad endpoint %q: %v", h, err)
		}
		eps = append(eps, "http://"+h)
	}
	return eps, nil
}

// waitSignal blocks until SIGINT or SIGTERM.
func waitSignal() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
