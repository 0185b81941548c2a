package suite

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// Settings are the flags `bench latency` and `bench throughput` share,
// one field a flag (named after it), as the command layer defines them.
// Check checks them before anything starts; every error is a
// flagcheck.UsageError that names its flag.
type Settings struct {
	Out, Idle, CPUs, Fsync, Sizes string
	Standbys, DatagramBytes       int
	Keep                          bool
	FsyncInline                   time.Duration
}

// Checked are Settings checked and parsed.
type Checked struct {
	Layout   cluster.Layout
	Fsyncs   []string
	Sizes    []int
	Standbys int
}

// Check checks the shared flags and parses the lists in them.
func (s *Settings) Check() (Checked, error) {
	var c Checked
	err := flagcheck.First(flagcheck.Required("out", s.Out), flagcheck.Idle("idle", s.Idle), flagcheck.Range("standbys", s.Standbys, 1, 8),
		flagcheck.DatagramBytes(s.DatagramBytes), flagcheck.NonNegative("fsync-inline", s.FsyncInline))
	if err != nil {
		return c, err
	}
	c.Standbys = s.Standbys
	if c.Layout, err = s.layout(); err != nil {
		return c, err
	}
	for _, name := range strings.Split(s.Fsync, ",") {
		name = strings.TrimSpace(name)
		if err := flagcheck.Fsync("fsync", name); err != nil {
			return c, err
		}
		c.Fsyncs = append(c.Fsyncs, name)
	}
	if c.Sizes, err = flagcheck.Ints(s.Sizes); err != nil {
		return c, flagcheck.Usagef("--sizes: %v", err)
	}
	for _, size := range c.Sizes {
		if err := client.CheckLoadSize(size); err != nil {
			return c, flagcheck.Usagef("--sizes: %v", err)
		}
	}
	return c, nil
}

// layout parses --cpus: only this machine's CPUs, only standbys that
// run.
func (s *Settings) layout() (cluster.Layout, error) {
	l, err := cluster.ParseLayout(s.CPUs)
	if err != nil {
		return nil, flagcheck.Usagef("--cpus: %v", err)
	}
	for role, cpus := range l {
		for _, c := range cpus {
			if c >= runtime.NumCPU() {
				return nil, flagcheck.Usagef("--cpus: %s=%d: this machine has CPUs 0..%d", role, c, runtime.NumCPU()-1)
			}
		}
		if n, _ := strconv.Atoi(strings.TrimPrefix(role, "standby")); cluster.IsStandbyN(role) && n > s.Standbys {
			return nil, flagcheck.Usagef("--cpus: %s but --standbys %d", role, s.Standbys)
		}
	}
	return l, nil
}

// Base is every run's configuration the shared flags set.
func (s *Settings) Base(c Checked) cluster.BenchConfig {
	return cluster.BenchConfig{Idle: s.Idle, Standbys: c.Standbys, Layout: c.Layout, Keep: s.Keep, Out: s.Out,
		DatagramBytes: s.DatagramBytes, FsyncInlineNs: int64(s.FsyncInline)}
}

// LatencySettings are `bench latency`'s own flags, one field a flag.
type LatencySettings struct {
	Rate                                     float64
	Count, Warmup, FloorCount, GeneratorNice int
	GeneratorPark                            bool
	FloorIdles, Auth, Engine                 string
}

// Check checks them and parses the floor's idle strategies and the auth
// modes to run; every error is a flagcheck.UsageError that names its
// flag.
func (s *LatencySettings) Check() (idles []string, auths []bool, err error) {
	err = flagcheck.First(flagcheck.Rate("rate", s.Rate, 1e6), flagcheck.Range("count", s.Count, 1, stagetrace.RowsMax/2),
		flagcheck.Range("warmup", s.Warmup, 0, stagetrace.RowsMax/2), flagcheck.Range("floor-count", s.FloorCount, 1, bench.PingPongCountMax-FloorWarmup),
		flagcheck.OneOf("engine", s.Engine, "matching", "none"), flagcheck.Range("generator-nice", s.GeneratorNice, -20, 19))
	if err != nil {
		return nil, nil, err
	}
	for _, name := range strings.Split(s.FloorIdles, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(bench.FloorIdles, name) {
			return nil, nil, flagcheck.Usagef("--floor-idles: unknown %q (want %s)", name, strings.Join(bench.FloorIdles, ", "))
		}
		idles = append(idles, name)
	}
	switch s.Auth {
	case "off":
		auths = []bool{false}
	case "on":
		auths = []bool{true}
	case "both":
		auths = []bool{false, true}
	default:
		return nil, nil, flagcheck.Usagef("--auth: want off, on or both, got %q", s.Auth)
	}
	return idles, auths, nil
}

// FloorSettings are `bench floor`'s flags, one field a flag.
type FloorSettings struct {
	Size, Count, Hops int
	Rate              float64
	Idles, Out        string
	BusyPoll          time.Duration
}

// Config checks the settings (every error a flagcheck.UsageError naming
// its flag) and makes the floor's configuration with the seqbus binary
// bin; out receives a line per strategy.
func (s *FloorSettings) Config(bin string, out io.Writer) (FloorConfig, error) {
	err := flagcheck.First(flagcheck.Range("size", s.Size, bench.MessageBytesMin, bench.MessageBytesMax),
		flagcheck.Range("count", s.Count, 1, bench.PingPongCountMax-FloorWarmup), flagcheck.Range("rate", s.Rate, 0, bench.RatePerSecondMax),
		flagcheck.Each("idles", s.Idles, checkFloorIdle), flagcheck.OneOf("hops", strconv.Itoa(s.Hops), "2", "4"),
		flagcheck.Required("out", s.Out), flagcheck.NonNegative("busy-poll", s.BusyPoll))
	if err != nil {
		return FloorConfig{}, err
	}
	var idles []string
	for _, name := range strings.Split(s.Idles, ",") {
		idles = append(idles, strings.TrimSpace(name))
	}
	return FloorConfig{Bin: bin, Hops: s.Hops, Size: s.Size, Count: s.Count, Rate: s.Rate, Idles: idles, Dir: s.Out, Out: out,
		BusyPollUs: int(s.BusyPoll / time.Microsecond)}, nil
}

// checkFloorIdle: one of the floor's hop idle strategies.
func checkFloorIdle(v string) error {
	if slices.Contains(bench.FloorIdles, strings.TrimSpace(v)) {
		return nil
	}
	return fmt.Errorf("%q: want one of %s", v, strings.Join(bench.FloorIdles, ", "))
}
