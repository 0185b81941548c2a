package serve

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
)

// goodSettings are `seqbus node --id 1 --dir DIR` with the command's
// defaults (cmd/seqbus defineNodeFlags).
func goodSettings(t *testing.T) NodeSettings {
	return NodeSettings{
		ID: 1, Stream: 1, Dir: t.TempDir(), Listen: "127.0.0.1:7101", Group: "239.77.0.1:7100", Iface: "lo",
		Role: "standby", Epoch: 1, Fsync: "group", Idle: "block", SegmentBytes: journal.DefaultSegmentBytes,
		SnapshotEvery: nodeconfig.DefaultSnapshotEvery, MDRing: nodeconfig.DefaultMDRingUpdates,
		SessionHistory: nodeconfig.DefaultSessionHistory, Lease: time.Duration(arbiter.DefaultLeaseDurationNs),
		Renew: time.Duration(arbiter.DefaultRenewIntervalNs), Margin: time.Duration(arbiter.DefaultMarginNs),
		Retry: time.Duration(arbiter.DefaultRetryNs), InSyncTimeout: time.Duration(nodeconfig.DefaultInSyncTimeoutNs),
		ProbeAfter: time.Duration(nodeconfig.DefaultProbeAfterNs), RecvBuffer: nodeconfig.DefaultRecvBufferBytes,
		CPU: -1, Engine: "matching", Peers: flagcheck.Peers{2: netip.MustParseAddrPort("127.0.0.1:7102")},
	}
}

// Every bad setting is refused before anything starts, as a usage error
// naming its flag.
func TestNodeSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		flag string
		set  func(*NodeSettings)
	}{
		{"--id", func(s *NodeSettings) { s.ID = 0 }},
		{"--dir", func(s *NodeSettings) { s.Dir = "" }},
		{"--listen", func(s *NodeSettings) { s.Listen = "localhost" }},
		{"--group", func(s *NodeSettings) { s.Group = "127.0.0.1:7100" }},
		{"--market-data", func(s *NodeSettings) { s.MarketData = "10.0.0.1:7200" }},
		{"--iface", func(s *NodeSettings) { s.Iface = "no-such-if0" }},
		{"--ttl", func(s *NodeSettings) { s.TTL = 256 }},
		{"--stream", func(s *NodeSettings) { s.Stream = 0 }},
		{"--role", func(s *NodeSettings) { s.Role = "leader" }},
		{"--epoch", func(s *NodeSettings) { s.Epoch = 0 }},
		{"--fsync", func(s *NodeSettings) { s.Fsync = "sometimes" }},
		{"--idle", func(s *NodeSettings) { s.Idle = "nap" }},
		{"--snapshot-every", func(s *NodeSettings) { s.SnapshotEvery = 0 }},
		{"--witness", func(s *NodeSettings) { s.Witness = "0.0.0.0:7000" }},
		{"--margin", func(s *NodeSettings) { s.Margin = s.Lease }},
		{"--ack-delay", func(s *NodeSettings) { s.AckDelay = -time.Millisecond }},
		{"--min-insync", func(s *NodeSettings) { s.MinInSync = 2 }},
		{"--recv-buffer", func(s *NodeSettings) { s.RecvBuffer = 0 }},
		{"--cpu", func(s *NodeSettings) { s.CPU = 1 << 20 }},
		{"--peer", func(s *NodeSettings) { s.Peers = flagcheck.Peers{1: netip.MustParseAddrPort("127.0.0.1:7102")} }},
		{"--md-ring", func(s *NodeSettings) { s.MDRing = 0 }},
		{"--session-history", func(s *NodeSettings) { s.SessionHistory = -1 }},
		{"--datagram-bytes", func(s *NodeSettings) { s.DatagramBytes = 10 }},
		{"--fsync-inline", func(s *NodeSettings) { s.FsyncInline = -1 }},
		{"--segment-bytes", func(s *NodeSettings) { s.SegmentBytes = 1 }},
		{"--trace-stages", func(s *NodeSettings) { s.TraceStages = -1 }},
		{"--trace-window", func(s *NodeSettings) { s.TraceWindow = "1-10" }},
		{"--metrics-addr", func(s *NodeSettings) { s.MetricsAddr = "nowhere" }},
		{"--engine", func(s *NodeSettings) { s.Engine = "abacus" }},
		{"--arbiter", func(s *NodeSettings) { s.Arbiter = "http://127.0.0.1:2379" }},
		{"--witness and --arbiter", func(s *NodeSettings) {
			s.Witness, s.Arbiter = "127.0.0.1:7000", "etcd://127.0.0.1:2379"
		}},
		{"--key", func(s *NodeSettings) { s.KeyFile = filepath.Join(t.TempDir(), "missing.key") }},
	} {
		s := goodSettings(t)
		tc.set(&s)
		_, _, err := s.Config()
		if err == nil {
			t.Errorf("%s: accepted", tc.flag)
			continue
		}
		if !flagcheck.IsUsage(err) && !errors.As(err, new(interface{ ExitCode() int })) {
			t.Errorf("%s: %v is not a usage error", tc.flag, err)
		}
		if !strings.Contains(err.Error(), strings.TrimPrefix(tc.flag, "--")) {
			t.Errorf("%s: the error does not name it: %v", tc.flag, err)
		}
	}
}

// The settings reach the node's Config: the defaults, and each mapping
// that is not a copy.
func TestNodeSettingsConfig(t *testing.T) {
	s := goodSettings(t)
	cfg, o, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.ID != 1 || cfg.Stream != 1 || cfg.Role != nodeconfig.RoleStandby:
		t.Errorf("id %d stream %d role %v", cfg.ID, cfg.Stream, cfg.Role)
	case cfg.Listen != netip.MustParseAddrPort("127.0.0.1:7101") || cfg.Group != netip.MustParseAddrPort("239.77.0.1:7100") || cfg.MarketData.IsValid():
		t.Errorf("listen %v group %v market data %v", cfg.Listen, cfg.Group, cfg.MarketData)
	case cfg.Journal.Policy != journal.SyncGroup || cfg.Idle.Kind != bus.IdleBlock:
		t.Errorf("fsync %v idle %v", cfg.Journal.Policy, cfg.Idle)
	case cfg.StatusFile != filepath.Join(s.Dir, "status.json"):
		t.Errorf("status file %q", cfg.StatusFile)
	case cfg.Witness.IsValid() || cfg.NewArbiter != nil || cfg.Key != nil || cfg.PinCPU:
		t.Errorf("a static standby with a lease backend, a key or a pinned CPU: %+v", cfg)
	case cfg.ProbeAfterNs != nodeconfig.DefaultProbeAfterNs || cfg.SessionHistory != nodeconfig.DefaultSessionHistory:
		t.Errorf("probe after %d, session history %d", cfg.ProbeAfterNs, cfg.SessionHistory)
	case o != (NodeOptions{}):
		t.Errorf("options %+v, want none", o)
	}
	if sm, err := cfg.NewStateMachine(); err != nil {
		t.Fatal(err)
	} else if _, ok := sm.(*engine.Engine); !ok {
		t.Errorf("--engine matching made a %T", sm)
	}

	// The mappings: 0 means off where the Config's 0 means the default;
	// a pinned CPU; the role; the witness; --engine none; the key; the
	// trace options.
	key := filepath.Join(t.TempDir(), "seqbus.key")
	if _, err := auth.Keygen(key); err != nil {
		t.Fatal(err)
	}
	s.SessionHistory, s.ProbeAfter, s.CPU, s.Witness, s.Engine, s.KeyFile = 0, 0, 0, "127.0.0.1:7000", "none", key
	s.StatusFile, s.MarketData, s.TraceStages, s.TraceWindow = filepath.Join(s.Dir, "st.json"), "239.77.0.2:7200", 100, "1-10"
	cfg, o, err = s.Config()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.SessionHistory >= 0 || cfg.ProbeAfterNs >= 0:
		t.Errorf("--session-history 0 gave %d, --probe-after 0 gave %d: want none (negative)", cfg.SessionHistory, cfg.ProbeAfterNs)
	case !cfg.PinCPU || cfg.CPU != 0 || cfg.Role != nodeconfig.RoleStandby:
		t.Errorf("pin %v cpu %d role %v", cfg.PinCPU, cfg.CPU, cfg.Role)
	case cfg.Witness != netip.MustParseAddrPort("127.0.0.1:7000") || cfg.Lease.LeaseDurationNs != arbiter.DefaultLeaseDurationNs:
		t.Errorf("witness %v lease %+v", cfg.Witness, cfg.Lease)
	case cfg.Key == nil || cfg.StatusFile != s.StatusFile || !cfg.MarketData.IsValid():
		t.Errorf("key %v status %q market data %v", cfg.Key != nil, cfg.StatusFile, cfg.MarketData)
	case o.TraceStages != 100 || o.TraceWindow != "1-10":
		t.Errorf("options %+v", o)
	}
	if sm, err := cfg.NewStateMachine(); err != nil {
		t.Fatal(err)
	} else if _, ok := sm.(*engine.Nop); !ok {
		t.Errorf("--engine none made a %T", sm)
	}

	// --role primary: a static primary, with no lease backend (with one it
	// is refused: TestBadFlagsRefusedBeforeAnything).
	static := goodSettings(t)
	static.Role, static.Epoch = "primary", 7
	if cfg, _, err := static.Config(); err != nil || cfg.Role != nodeconfig.RolePrimary || cfg.Epoch != 7 {
		t.Fatalf("--role primary --epoch 7: role %v epoch %d, %v", cfg.Role, cfg.Epoch, err)
	}

	// etcd instead of the witness: a backend constructor, the same lease.
	s.Witness, s.Arbiter = "", "etcd://127.0.0.1:2379,127.0.0.1:22379"
	cfg, _, err = s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NewArbiter == nil || cfg.Witness.IsValid() || cfg.Lease.RenewIntervalNs != arbiter.DefaultRenewIntervalNs {
		t.Errorf("--arbiter etcd://: arbiter %v witness %v lease %+v", cfg.NewArbiter != nil, cfg.Witness, cfg.Lease)
	}
}
