package serve

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/internal/flagcheck"
)

// `seqbus witness`'s settings: each bad one refused naming its flag; a
// keyed witness serves the nodes named.
func TestWitnessSettings(t *testing.T) {
	key := filepath.Join(t.TempDir(), "seqbus.key")
	if _, err := auth.Keygen(key); err != nil {
		t.Fatal(err)
	}
	good := func() WitnessSettings {
		return WitnessSettings{Listen: "127.0.0.1:7000", Dir: t.TempDir(), Lease: time.Second, Stream: 1}
	}
	for _, tc := range []struct {
		flag string
		set  func(*WitnessSettings)
	}{
		{"--listen", func(s *WitnessSettings) { s.Listen = "here" }},
		{"--dir", func(s *WitnessSettings) { s.Dir = "" }},
		{"--lease", func(s *WitnessSettings) { s.Lease = 0 }},
		{"--lease", func(s *WitnessSettings) { s.Lease = 100 * time.Microsecond }},
		{"--stream", func(s *WitnessSettings) { s.Stream = 1 << 16 }},
		{"--nodes", func(s *WitnessSettings) { s.Nodes = "1,1" }},
		{"--nodes", func(s *WitnessSettings) { s.Nodes = "0" }},
		{"--metrics-addr", func(s *WitnessSettings) { s.MetricsAddr = "nowhere" }},
		{"--key", func(s *WitnessSettings) { s.KeyFile = filepath.Join(t.TempDir(), "missing") }},
		{"--key needs --nodes", func(s *WitnessSettings) { s.KeyFile = key }},
	} {
		s := good()
		tc.set(&s)
		_, _, _, err := s.Config()
		switch {
		case err == nil:
			t.Errorf("%s: accepted", tc.flag)
		case !strings.Contains(err.Error(), tc.flag):
			t.Errorf("%s: the error does not name it: %v", tc.flag, err)
		case !flagcheck.IsUsage(err) && tc.flag != "--metrics-addr":
			t.Errorf("%s: %v is not a usage error", tc.flag, err)
		}
	}
	// A lease shorter than the nodes' defaults allow (a node sets its own
	// --renew, --margin, --retry): the witness uses the duration alone.
	short := good()
	short.Lease = 300 * time.Millisecond
	if cfg, _, _, err := short.Config(); err != nil || cfg.Arbiter.LeaseDurationNs != int64(short.Lease) {
		t.Fatalf("--lease 300ms: %v", err)
	}
	def := good()
	if cfg, _, _, _ := def.Config(); cfg.Arbiter != witnessLease(time.Second) || cfg.Arbiter.MarginNs != 150_000_000 {
		t.Fatalf("the default lease's config %+v", cfg.Arbiter)
	}
	s := good()
	s.KeyFile, s.Nodes, s.Stream, s.Listen = key, "1,2", 7, "127.0.0.1:7300"
	cfg, addr, metrics, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Key == nil || !slices.Equal(cfg.Nodes, []uint32{1, 2}) || cfg.Stream != 7 || cfg.Arbiter.LeaseDurationNs != int64(time.Second) ||
		addr != netip.MustParseAddrPort("127.0.0.1:7300") || metrics != "" || cfg.Logger == nil {
		t.Fatalf("config %+v addr %v metrics %q", cfg, addr, metrics)
	}
}
