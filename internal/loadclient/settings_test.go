package loadclient

import (
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/wire"
)

// goodSettings are `seqbus client` with the command's defaults
// (cmd/seqbus defineClientFlags).
func goodSettings() Settings {
	return Settings{Primary: "127.0.0.1:7101", Session: 1, Rate: 10_000, Count: 100_000, Instruments: 4, Seed: 1,
		Drain: 30 * time.Second, Idle: "block", Stream: 1, TraceFile: "client.trace", DatagramBytes: wire.DefaultDatagramLen,
		MaxInFlight: client.DefaultMaxInFlight, Nodes: flagcheck.Peers{}}
}

// Every bad setting is refused before anything starts, as a usage error
// naming its flag.
func TestSettingsRefused(t *testing.T) {
	nodes := flagcheck.Peers{1: netip.MustParseAddrPort("127.0.0.1:7101")}
	for _, tc := range []struct {
		flag string
		set  func(*Settings)
	}{
		{"--primary", func(s *Settings) { s.Primary = "239.1.1.1:7000" }},
		{"--session", func(s *Settings) { s.Session = 0 }},
		{"--rate", func(s *Settings) { s.Rate = math.NaN() }},
		{"--count", func(s *Settings) { s.Count = 0 }},
		{"--instruments", func(s *Settings) { s.Instruments = 0 }},
		{"--drain", func(s *Settings) { s.Drain = 0 }},
		{"--idle", func(s *Settings) { s.Idle = "nap" }},
		{"--witness", func(s *Settings) { s.Witness = "127.0.0.1:0"; s.Nodes = nodes }},
		{"--stream", func(s *Settings) { s.Stream = 0 }},
		{"--witness and --arbiter", func(s *Settings) { s.Witness, s.Arbiter, s.Nodes = "127.0.0.1:7000", "etcd://127.0.0.1:2379", nodes }},
		{"--witness and --arbiter need --node", func(s *Settings) { s.Witness = "127.0.0.1:7000" }},
		{"--arbiter", func(s *Settings) { s.Arbiter, s.Nodes = "http://127.0.0.1:2379", nodes }},
		{"--spin", func(s *Settings) { s.Spin = -1 }},
		{"--nice", func(s *Settings) { s.Nice = 20 }},
		{"--coalesce", func(s *Settings) { s.Coalesce = time.Second }},
		{"--max-in-flight", func(s *Settings) { s.MaxInFlight = client.MaxInFlightMax + 1 }},
		{"--trace-stages", func(s *Settings) { s.TraceStages = -1 }},
		{"--size", func(s *Settings) { s.Size = 1 }},
		{"--trace-window", func(s *Settings) { s.TraceWindow = "1-10" }},
		{"--datagram-bytes", func(s *Settings) { s.DatagramBytes = 1 << 20 }},
		{"--json", func(s *Settings) { s.JSON = t.TempDir() }},
		{"--record", func(s *Settings) { s.Record = t.TempDir() }},
		{"--key", func(s *Settings) { s.KeyFile = filepath.Join(t.TempDir(), "missing.key") }},
	} {
		s := goodSettings()
		tc.set(&s)
		_, err := s.Options()
		if err == nil {
			t.Errorf("%s: accepted", tc.flag)
			continue
		}
		if !flagcheck.IsUsage(err) {
			t.Errorf("%s: %v is not a usage error", tc.flag, err)
		}
		if !strings.Contains(err.Error(), strings.TrimPrefix(tc.flag, "--")) {
			t.Errorf("%s: the error does not name it: %v", tc.flag, err)
		}
	}
}

// The settings reach the client's options and the load.
func TestSettingsOptionsAndLoad(t *testing.T) {
	s := goodSettings()
	s.Primary, s.Witness, s.Nodes = "127.0.0.1:7201", "127.0.0.1:7000", flagcheck.Peers{1: netip.MustParseAddrPort("127.0.0.1:7201")}
	s.Session, s.MaxInFlight, s.Stream, s.Idle, s.Size, s.Spin, s.Coalesce, s.Park = 7, 8192, 3, "spin", 32, time.Microsecond, time.Millisecond, true
	o, err := s.Options()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.Primary != netip.MustParseAddrPort("127.0.0.1:7201") || o.Witness != netip.MustParseAddrPort("127.0.0.1:7000") || len(o.Nodes) != 1:
		t.Errorf("addresses %v %v %v", o.Primary, o.Witness, o.Nodes)
	case o.Core.Session != 7 || o.Core.MaxInFlight != 8192 || o.Stream != 3 || o.Idle.Kind != bus.IdleBusySpin || !o.Poll || o.Key != nil:
		t.Errorf("options %+v", o)
	}
	rc := s.RunConfig(nil)
	l := rc.Load
	if rc.Session != 7 || l.Rate != 10_000 || l.Count != 100_000 || l.Size != 32 || l.SpinNs != 1000 || l.CoalesceNs != 1e6 || !l.Park || l.Instruments != 4 {
		t.Errorf("run config %+v", rc)
	}
}

// Dial opens the record file and the client; close closes both, the
// record file last.
func TestSettingsDialRecord(t *testing.T) {
	s := goodSettings()
	s.Record = filepath.Join(t.TempDir(), "client.jsonl")
	cl, closeAll, err := s.Dial()
	if err != nil {
		t.Fatal(err)
	}
	if cl == nil {
		t.Fatal("no client")
	}
	if err := closeAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Record); err != nil {
		t.Fatalf("the record file: %v", err)
	}
	// A bad setting dials nothing and creates no file.
	s.Record, s.Session = filepath.Join(t.TempDir(), "never.jsonl"), 0
	if _, _, err := s.Dial(); err == nil {
		t.Fatal("dialed with --session 0")
	}
	if _, err := os.Stat(s.Record); !os.IsNotExist(err) {
		t.Fatalf("the record file of a refused dial: %v", err)
	}
}
