package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/serve"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
)

// peerFlags collects repeated --peer id=host:port flags.
type peerFlags = flagcheck.Peers

func runNode(args []string) error { return runNodeWith("node", args, false) }

// defineNodeFlags defines `seqbus node`'s flags into the settings
// serve.NodeSettings checks and turns into the node's Config.
func defineNodeFlags(fs *flag.FlagSet, allowUnsafe bool) *serve.NodeSettings {
	s := &serve.NodeSettings{Peers: peerFlags{}}
	fs.UintVar(&s.ID, "id", 0, "node id (1..2^32-1), unique in the cluster")
	fs.StringVar(&s.Dir, "dir", "", "journal and snapshot directory")
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:7101", "unicast address (clients, acks, naks, snapshots)")
	fs.StringVar(&s.Group, "group", "239.77.0.1:7100", "replication multicast group")
	fs.StringVar(&s.MarketData, "market-data", "", "market-data multicast group (optional)")
	fs.StringVar(&s.Iface, "iface", "lo", "multicast interface (pinned; never the default route)")
	fs.IntVar(&s.TTL, "ttl", 0, "multicast TTL (0: 0 on lo, 1 elsewhere)")
	fs.UintVar(&s.Stream, "stream", 1, "stream id")
	fs.StringVar(&s.Role, "role", "standby", "standby, or primary (a static primary: no witness)")
	fs.Uint64Var(&s.Epoch, "epoch", 1, "epoch of a static primary")
	fs.StringVar(&s.Fsync, "fsync", "group", "journal fsync policy: none, group, always")
	fs.DurationVar(&s.FsyncInline, "fsync-inline", time.Duration(nodeconfig.DefaultFsyncInlineBelowNs), fsyncInlineUsage)
	fs.StringVar(&s.Idle, "idle", bus.AgentIdleDefault.Kind.String(), "idle strategy of the node's agent thread: block (epoll_wait at once), backoff (spin, then yield while commands arrive within 1 ms, then epoll_wait; backoff:250us sets the window; for a node with a core of its own), spin, yield (see docs/tuning.md)")
	fs.StringVar(&s.StatusFile, "status-file", "", "write status JSON here every 100 ms (default DIR/status.json)")
	fs.IntVar(&s.SegmentBytes, "segment-bytes", journal.DefaultSegmentBytes, segmentBytesUsage)
	fs.Uint64Var(&s.SnapshotEvery, "snapshot-every", nodeconfig.DefaultSnapshotEvery, "snapshot every N commands")
	fs.IntVar(&s.MDRing, "md-ring", nodeconfig.DefaultMDRingUpdates, "recent market-data updates kept to answer re-requests and to publish again at promotion (past it: a book snapshot)")
	fs.IntVar(&s.DatagramBytes, "datagram-bytes", 0, nodeDatagramBytesUsage)
	fs.IntVar(&s.SessionHistory, "session-history", nodeconfig.DefaultSessionHistory, "outputs to client sessions kept for replay after a failover or a gap, over all sessions (0: none, replay requests answered TooOld)")
	fs.BoolVar(&s.Verbose, "v", false, "log at debug level")
	fs.StringVar(&s.Arbiter, "arbiter", "", "lease arbiter other than the UDP witness: etcd://host1:2379,host2:2379,host3:2379 (an etcd cluster; see README)")
	fs.StringVar(&s.Witness, "witness", "", "the witness's address; with it the node starts as a standby and leads only while it holds the lease")
	fs.DurationVar(&s.Lease, "lease", time.Duration(arbiter.DefaultLeaseDurationNs), "lease duration (must match the witness)")
	fs.DurationVar(&s.Renew, "renew", time.Duration(arbiter.DefaultRenewIntervalNs), "renew the lease this often")
	fs.DurationVar(&s.Margin, "margin", time.Duration(arbiter.DefaultMarginNs), "stop releasing this long before the lease ends")
	fs.DurationVar(&s.Retry, "retry", time.Duration(arbiter.DefaultRetryNs), "retry a failed renew after this long")
	fs.DurationVar(&s.AckDelay, "ack-delay", 0, "standby: send at most one ack per this interval (0: ack every received batch)")
	fs.DurationVar(&s.InSyncTimeout, "insync-timeout", time.Duration(nodeconfig.DefaultInSyncTimeoutNs), "a standby silent this long, or not acking outputs that wait, leaves the in-sync set (via the witness)")
	fs.DurationVar(&s.DiskStall, "disk-stall-after", 0, "a node whose disk makes nothing it wrote durable this long does not lead (a primary gives its lease up) until the disk catches up (0: the --insync-timeout; longer on a disk whose fsyncs stall now and then)")
	fs.DurationVar(&s.ProbeAfter, "probe-after", time.Duration(nodeconfig.DefaultProbeAfterNs), "primary: probe an in-sync standby that holds a release back this long (or is silent this long plus two ack intervals); if its host answers \"port unreachable\" (its process is gone) it is removed now, not after --insync-timeout (0: no probes)")
	fs.IntVar(&s.MinInSync, "min-insync", 0, "release only while at least this many standbys are in sync (0: run alone when none is)")
	fs.IntVar(&s.RecvBuffer, "recv-buffer", nodeconfig.DefaultRecvBufferBytes, "socket receive buffer in bytes (SO_RCVBUF; the kernel doubles it)")
	fs.DurationVar(&s.BusyPoll, "busy-poll", 0, "SO_BUSY_POLL: let the kernel spin this long on the NIC queue in receive (needs CAP_NET_ADMIN to raise; 0: off)")
	fs.BoolVar(&s.GRO, "gro", false, "UDP_GRO on the receiving sockets: read a run of datagrams that arrives coalesced (a peer's segmented send, a NIC's GRO for UDP) as one buffer; 512 KiB a socket; no gain measured on loopback (see docs/tuning.md)")
	fs.StringVar(&s.KeyFile, "key", "", "master key file (seqbus keygen): authenticate every frame")
	fs.IntVar(&s.CPU, "cpu", -1, "pin the agent thread to this CPU (-1: no pinning)")
	fs.StringVar(&s.MetricsAddr, "metrics-addr", "", flagcheck.MetricsAddrUsage)
	fs.IntVar(&s.TraceStages, "trace-stages", 0, "record the stage times of the first N seqs and write them at exit to --trace-file (seqbus bench; 0: off)")
	fs.StringVar(&s.TraceFile, "trace-file", "", "where --trace-stages writes (default DIR/stages.trace)")
	fs.StringVar(&s.TraceWindow, "trace-window", "", traceWindowUsage)
	fs.StringVar(&s.Engine, "engine", "matching", "state machine: matching (the reference engine), or none (answers every command, does nothing: replicated throughput)")
	if allowUnsafe {
		fs.BoolVar(&s.NoFencing, "unsafe-no-fencing", false, "UNSAFE, drills only: accept stale epochs and never step down")
		fs.BoolVar(&s.NoGating, "unsafe-no-gating", false, "UNSAFE, drills only: release outputs before standbys or the disk have them")
	}
	fs.Var(s.Peers, "peer", "another node, as id=host:port (repeat)")
	return s
}

// runNodeWith runs a node. The unsafe switches exist only for `seqbus drill
// node` (allowUnsafe), which the drills start; `seqbus node` has none.
func runNodeWith(name string, args []string, allowUnsafe bool) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	s := defineNodeFlags(fs, allowUnsafe)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, opts, err := s.Config()
	if err != nil {
		return err
	}
	return serve.Node(cfg, opts, waitSignal)
}

// waitSignal blocks until SIGINT or SIGTERM.
func waitSignal() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}
