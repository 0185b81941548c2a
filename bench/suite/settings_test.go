package suite

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/flagcheck"
)

func goodBench() Settings {
	return Settings{Out: "bench-out", Idle: "block", Fsync: "none,group", Sizes: "32,256", Standbys: 1, DatagramBytes: 1472, FsyncInline: time.Microsecond}
}

func goodLatency() LatencySettings {
	return LatencySettings{Rate: 10_000, Count: 100_000, Warmup: 5000, FloorCount: 50_000, FloorIdles: "block, yield", Auth: "both", Engine: "matching"}
}

// The shared bench flags: every bad one refused naming itself; the lists
// parsed; the base configuration carries them.
func TestSettings(t *testing.T) {
	for _, tc := range []struct {
		flag string
		set  func(*Settings)
	}{
		{"--out", func(s *Settings) { s.Out = "" }},
		{"--idle", func(s *Settings) { s.Idle = "nap" }},
		{"--standbys", func(s *Settings) { s.Standbys = 9 }},
		{"--datagram-bytes", func(s *Settings) { s.DatagramBytes = 0 }},
		{"--fsync-inline", func(s *Settings) { s.FsyncInline = -1 }},
		{"--cpus", func(s *Settings) { s.CPUs = "primary=one" }},
		{"--cpus", func(s *Settings) { s.CPUs = "primary=4096" }},
		{"--cpus", func(s *Settings) { s.CPUs = "standby2=0" }},
		{"--fsync", func(s *Settings) { s.Fsync = "none,sometimes" }},
		{"--sizes", func(s *Settings) { s.Sizes = "32,x" }},
		{"--sizes", func(s *Settings) { s.Sizes = "32,1" }},
	} {
		s := goodBench()
		tc.set(&s)
		_, err := s.Check()
		switch {
		case err == nil:
			t.Errorf("%s: accepted %+v", tc.flag, s)
		case !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), tc.flag):
			t.Errorf("%s: %v is not a usage error naming it", tc.flag, err)
		}
	}
	s := goodBench()
	s.CPUs, s.Keep = "primary=0,standby=0,client=0", true
	c, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Fsyncs, []string{"none", "group"}) || !slices.Equal(c.Sizes, []int{32, 256}) || c.Standbys != 1 || c.Layout.String() == "" {
		t.Fatalf("checked %+v", c)
	}
	b := s.Base(c)
	if b.Idle != "block" || b.Out != "bench-out" || !b.Keep || b.DatagramBytes != 1472 || b.FsyncInlineNs != 1000 || b.Standbys != 1 || len(b.Layout) != len(c.Layout) {
		t.Fatalf("base %+v", b)
	}
}

// `bench latency`'s own flags.
func TestLatencySettings(t *testing.T) {
	for _, tc := range []struct {
		flag string
		set  func(*LatencySettings)
	}{
		{"--rate", func(s *LatencySettings) { s.Rate = 0 }},
		{"--rate", func(s *LatencySettings) { s.Rate = 2e6 }},
		{"--count", func(s *LatencySettings) { s.Count = 0 }},
		{"--warmup", func(s *LatencySettings) { s.Warmup = -1 }},
		{"--floor-count", func(s *LatencySettings) { s.FloorCount = 0 }},
		{"--engine", func(s *LatencySettings) { s.Engine = "abacus" }},
		{"--generator-nice", func(s *LatencySettings) { s.GeneratorNice = -21 }},
		{"--floor-idles", func(s *LatencySettings) { s.FloorIdles = "block,nap" }},
		{"--auth", func(s *LatencySettings) { s.Auth = "maybe" }},
	} {
		s := goodLatency()
		tc.set(&s)
		_, _, err := s.Check()
		switch {
		case err == nil:
			t.Errorf("%s: accepted %+v", tc.flag, s)
		case !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), tc.flag):
			t.Errorf("%s: %v is not a usage error naming it", tc.flag, err)
		}
	}
	s := goodLatency()
	idles, auths, err := s.Check()
	if err != nil || !slices.Equal(idles, []string{"block", "yield"}) || !slices.Equal(auths, []bool{false, true}) {
		t.Fatalf("idles %v auths %v: %v", idles, auths, err)
	}
}

// `bench floor`'s flags: each bad one refused naming itself; the
// configuration carries them, --busy-poll in µs.
func TestFloorSettings(t *testing.T) {
	good := func() FloorSettings {
		return FloorSettings{Size: 32, Count: 1000, Hops: 2, Rate: 10_000, Idles: "block, spin", Out: "bench-out"}
	}
	for _, tc := range []struct {
		flag string
		set  func(*FloorSettings)
	}{
		{"--size", func(s *FloorSettings) { s.Size = 0 }},
		{"--count", func(s *FloorSettings) { s.Count = 0 }},
		{"--rate", func(s *FloorSettings) { s.Rate = -1 }},
		{"--idles", func(s *FloorSettings) { s.Idles = "block,nap" }},
		{"--hops", func(s *FloorSettings) { s.Hops = 3 }},
		{"--out", func(s *FloorSettings) { s.Out = "" }},
		{"--busy-poll", func(s *FloorSettings) { s.BusyPoll = -time.Microsecond }},
	} {
		s := good()
		tc.set(&s)
		_, err := s.Config("seqbus", nil)
		switch {
		case err == nil:
			t.Errorf("%s: accepted %+v", tc.flag, s)
		case !flagcheck.IsUsage(err) || !strings.Contains(err.Error(), tc.flag):
			t.Errorf("%s: %v is not a usage error naming it", tc.flag, err)
		}
	}
	s := good()
	s.BusyPoll = 50 * time.Microsecond
	cfg, err := s.Config("seqbus", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bin != "seqbus" || cfg.Hops != 2 || cfg.Size != 32 || cfg.Count != 1000 || cfg.Rate != 10_000 || cfg.Dir != "bench-out" ||
		!slices.Equal(cfg.Idles, []string{"block", "spin"}) || cfg.BusyPollUs != 50 {
		t.Fatalf("config %+v", cfg)
	}
}
