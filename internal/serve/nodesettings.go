package serve

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/etcdarb"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
)

// NodeSettings are `seqbus node`'s settings as its flags give them, one
// field a flag (named after it). The command layer defines the flags
// into these fields, with their defaults and help; Check and Config are
// everything between the parsed flags and a running node: every flag
// checked before anything starts, then the node's nodeconfig.Config
// built (addresses parsed, the lease backend chosen, the key loaded,
// the state machine named) and checked by nodeconfig itself. Every
// error is a flagcheck.UsageError that names its flag.
type NodeSettings struct {
	ID, Stream                                   uint
	Dir, Listen, Group, MarketData, Iface, Role  string
	Fsync, Idle, StatusFile, Arbiter, Witness    string
	KeyFile, MetricsAddr, TraceFile, TraceWindow string
	Engine                                       string
	TTL, MinInSync, RecvBuffer, CPU, TraceStages int
	MDRing, SessionHistory, DatagramBytes        int
	SegmentBytes                                 int
	Epoch, SnapshotEvery                         uint64
	Verbose, NoFencing, NoGating, GRO            bool
	Lease, Renew, Margin, Retry, AckDelay        time.Duration
	DiskStall, InSyncTimeout, ProbeAfter         time.Duration
	BusyPoll, FsyncInline                        time.Duration
	Peers                                        flagcheck.Peers
}

// Check checks every flag on its own and against the others (not yet
// what needs the machine: the interface's MTU, the key file; Config
// does).
func (s *NodeSettings) Check() error {
	return flagcheck.First(
		flagcheck.NodeID("id", s.ID), flagcheck.Required("dir", s.Dir), flagcheck.Listen("listen", s.Listen),
		flagcheck.Group("group", s.Group, false), flagcheck.Group("market-data", s.MarketData, true), flagcheck.Interface("iface", s.Iface),
		flagcheck.Range("ttl", s.TTL, 0, 255), flagcheck.Stream(s.Stream), flagcheck.OneOf("role", s.Role, "standby", "primary"),
		flagcheck.Positive("epoch", s.Epoch), flagcheck.Fsync("fsync", s.Fsync), flagcheck.Idle("idle", s.Idle),
		flagcheck.Positive("snapshot-every", s.SnapshotEvery), flagcheck.Dest("witness", s.Witness, true),
		flagcheck.Lease(s.Lease, s.Renew, s.Margin, s.Retry), flagcheck.NonNegative("ack-delay", s.AckDelay),
		flagcheck.InSync(s.InSyncTimeout, s.ProbeAfter, s.DiskStall, time.Duration(nodeconfig.MinDiskStallTicks*nodeconfig.DefaultTickIntervalNs)),
		s.Peers.CheckMinInSync(s.MinInSync), flagcheck.Positive("recv-buffer", s.RecvBuffer), flagcheck.NonNegative("busy-poll", s.BusyPoll),
		flagcheck.Range("cpu", s.CPU, -1, runtime.NumCPU()-1), s.Peers.CheckNotSelf(s.ID), flagcheck.ListenPort(s.Listen, s.Group),
		flagcheck.Range("md-ring", s.MDRing, nodeconfig.MinMDRingUpdates, nodeconfig.MaxMDRingUpdates),
		flagcheck.Range("session-history", s.SessionHistory, 0, nodeconfig.MaxSessionHistory),
		checkNodeDatagramBytes(s.DatagramBytes), flagcheck.NonNegative("fsync-inline", s.FsyncInline),
		flagcheck.Range("segment-bytes", s.SegmentBytes, nodeconfig.MinSegmentBytes, nodeconfig.MaxSegmentBytes),
		flagcheck.OutputFile("status-file", s.StatusFile), flagcheck.TraceFile(s.TraceStages, s.TraceFile),
		flagcheck.TraceStages(s.TraceStages), flagcheck.TraceWindow(s.TraceWindow, s.TraceStages),
		flagcheck.Second(flagcheck.MetricsAddr(s.MetricsAddr)), flagcheck.AsUsage(flagcheck.Second(stateMachine(s.Engine))),
		s.checkStatic(),
	)
}

// checkStatic: --role primary is a static primary, which leads --epoch
// with no arbiter; a node with one is given its epoch by the lease.
func (s *NodeSettings) checkStatic() error {
	switch {
	case s.Role == "primary" && (s.Witness != "" || s.Arbiter != ""):
		return flagcheck.Usagef("--role primary is a static primary (no lease): drop it to run under --witness or --arbiter, whose lease decides who leads")
	case s.Role != "primary" && s.Epoch != 1:
		return flagcheck.Usagef("--epoch is a static primary's (--role primary); a node under a witness is given its epoch by the lease")
	}
	return nil
}

// Config checks the settings (Check) and builds the node's Config and
// what runs around it, checked by nodeconfig.Config.Validate as the node
// will check it.
func (s *NodeSettings) Config() (nodeconfig.Config, NodeOptions, error) {
	var o NodeOptions
	if err := s.Check(); err != nil {
		return nodeconfig.Config{}, o, err
	}
	cfg := nodeconfig.Config{
		ID: uint32(s.ID), Stream: uint16(s.Stream), Dir: s.Dir, Interface: s.Iface, TTL: s.TTL, DatagramBytes: s.DatagramBytes,
		Peers: s.Peers, Epoch: s.Epoch, SnapshotEvery: s.SnapshotEvery, MDRingUpdates: s.MDRing,
		SessionHistory: cmp.Or(s.SessionHistory, -1), // 0 here is none; 0 there is the default
	}
	cfg.NewStateMachine, _ = stateMachine(s.Engine) // checked
	cfg.Listen, _ = netip.ParseAddrPort(s.Listen)   // checked, as every address below
	cfg.Group, _ = netip.ParseAddrPort(s.Group)
	if s.MarketData != "" {
		cfg.MarketData, _ = netip.ParseAddrPort(s.MarketData)
	}
	if s.Role == "primary" {
		cfg.Role = nodeconfig.RolePrimary
	}
	cfg.Journal.Policy, _ = journal.ParseSyncPolicy(s.Fsync)
	cfg.Journal.SegmentBytes, cfg.FsyncInlineBelowNs = int64(s.SegmentBytes), int64(s.FsyncInline)
	cfg.Idle, _ = bus.ParseIdle(s.Idle)
	if err := s.lease(&cfg); err != nil {
		return cfg, o, err
	}
	cfg.InSyncTimeoutNs, cfg.DiskStallNs, cfg.MinInSync, cfg.AckDelayNs = int64(s.InSyncTimeout), int64(s.DiskStall), s.MinInSync, int64(s.AckDelay)
	cfg.ProbeAfterNs = cmp.Or(int64(s.ProbeAfter), -1) // 0: no probes
	cfg.Unsafe = nodeconfig.Unsafe{NoFencing: s.NoFencing, NoGating: s.NoGating}
	var err error
	if cfg.Key, err = flagcheck.LoadKey(s.KeyFile); err != nil {
		return cfg, o, err
	}
	cfg.Tuning = bus.Tuning{RecvBufferBytes: s.RecvBuffer, BusyPollUs: int(s.BusyPoll / time.Microsecond), GRO: s.GRO}
	if s.CPU >= 0 {
		cfg.PinCPU, cfg.CPU = true, s.CPU
	}
	cfg.StatusFile = cmp.Or(s.StatusFile, filepath.Join(s.Dir, "status.json"))
	if err := checkNodeConfig(cfg); err != nil {
		return cfg, o, err
	}
	level := slog.LevelInfo
	if s.Verbose {
		level = slog.LevelDebug
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", s.ID)
	if s.NoFencing || s.NoGating {
		cfg.Log.Warn("UNSAFE SWITCHES ON: this node can lose or un-release outputs; drills only", "no_fencing", s.NoFencing, "no_gating", s.NoGating)
	}
	o.MetricsAddr, _ = flagcheck.MetricsAddr(s.MetricsAddr)
	o.TraceStages, o.TraceWindow, o.TraceFile = s.TraceStages, s.TraceWindow, s.TraceFile
	return cfg, o, nil
}

// lease sets the lease backend: the UDP witness (--witness) or an etcd
// cluster (--arbiter); neither for a static node.
func (s *NodeSettings) lease(cfg *nodeconfig.Config) error {
	lease := arbiter.Config{LeaseDurationNs: int64(s.Lease), RenewIntervalNs: int64(s.Renew), MarginNs: int64(s.Margin), RetryNs: int64(s.Retry)}
	if s.Witness != "" {
		cfg.Witness, _ = netip.ParseAddrPort(s.Witness) // checked
		cfg.Lease = lease
	}
	if s.Arbiter == "" {
		return nil
	}
	if s.Witness != "" {
		return flagcheck.Usagef("--witness and --arbiter are exclusive")
	}
	eps, err := etcdarb.ParseURL(s.Arbiter)
	if err != nil {
		return flagcheck.AsUsage(flagcheck.Prefixed("arbiter", err))
	}
	cfg.Lease = lease
	stream, id, leaseNs := uint16(s.Stream), arbiter.NodeID(s.ID), int64(s.Lease)
	cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) {
		return etcdarb.New(etcdarb.Config{Endpoints: eps, Stream: stream, Node: id, LeaseDurationNs: leaseNs}, k)
	}
	return nil
}

// checkNodeConfig runs nodeconfig.Config.Validate (the library's own
// checks, the interface's MTU among them) and words its error as a flag
// error.
func checkNodeConfig(cfg nodeconfig.Config) error {
	err := cfg.Validate()
	if err == nil {
		return nil
	}
	if errors.As(err, new(*bus.InterfaceError)) {
		return flagcheck.Interface("iface", cfg.Interface)
	}
	if me := (*bus.MTUError)(nil); errors.As(err, &me) {
		return flagcheck.Usagef("--datagram-bytes %d does not fit --iface %s: its MTU is %d, and a datagram takes %d more for the IPv4 and UDP headers (at most %d; or raise the MTU)",
			me.DatagramBytes, me.Name, me.MTU, bus.IPv4UDPHeaderBytes, me.MTU-bus.IPv4UDPHeaderBytes)
	}
	return flagcheck.Usagef("%s", strings.TrimPrefix(err.Error(), "node: "))
}

// stateMachine turns --engine into the node's state machine: matching
// (engine.NodeConfig) or none (engine.Nop).
func stateMachine(name string) (func() (engine.StateMachine, error), error) {
	switch name {
	case "matching":
		return func() (engine.StateMachine, error) { return engine.New(engine.NodeConfig()) }, nil
	case "none":
		return func() (engine.StateMachine, error) { return &engine.Nop{}, nil }, nil
	}
	return nil, fmt.Errorf("--engine: want matching or none, got %q", name)
}

// checkNodeDatagramBytes: 0 (fit the interface) or a size a datagram
// may have.
func checkNodeDatagramBytes(v int) error {
	if v == 0 {
		return nil
	}
	return flagcheck.DatagramBytes(v)
}
