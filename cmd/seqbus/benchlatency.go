package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/bench/suite"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// benchFlags are the flags `bench latency` and `bench throughput` share.
type benchFlags struct {
	out, idle, cpus, fsync, sizes *string
	standbys, datagramBytes       *int
	keep                          *bool
	fsyncInline                   *time.Duration
}

func addBenchFlags(fs *flag.FlagSet, fsyncDefault string) benchFlags {
	return benchFlags{
		out:           fs.String("out", "bench-out", "directory for .hgrm files and summary.json"),
		idle:          fs.String("idle", "block", "idle strategy of every node and the client: block, backoff, backoff:DURATION, spin, yield"),
		cpus:          fs.String("cpus", "", "pin each process: role=cpu or role=cpu-cpu, comma-separated, roles witness, primary, standby (or standby1, standby2...), client; e.g. primary=1,standby=0,client=0 (default: unpinned, what a user gets)"),
		fsync:         fs.String("fsync", fsyncDefault, "journal fsync policies, comma-separated: none, group, always"),
		sizes:         fs.String("sizes", "32,256,1024", "command sizes in bytes, comma-separated (0: real 39-byte new orders that trade)"),
		standbys:      fs.Int("standbys", 1, "standby processes (1..8)"),
		keep:          fs.Bool("keep", false, "keep each run's directory (logs, journals, traces) under --out"),
		datagramBytes: fs.Int("datagram-bytes", wire.DefaultDatagramLen, "every node's and the client's --datagram-bytes: "+datagramBytesUsage),
		fsyncInline:   fs.Duration("fsync-inline", time.Duration(nodeconfig.DefaultFsyncInlineBelowNs), "every node's --fsync-inline: "+fsyncInlineUsage),
	}
}

// parsedBench is benchFlags checked.
type parsedBench struct {
	layout   cluster.Layout
	fsyncs   []string
	sizes    []int
	standbys int
}

// check validates the shared flags before anything starts; an error names
// the flag.
func (f benchFlags) check() (parsedBench, error) {
	var p parsedBench
	var err error
	if *f.out == "" {
		return p, usagef("--out is required")
	}
	if _, err := parseIdle(*f.idle); err != nil {
		return p, usagef("--idle: %v", err)
	}
	if p.layout, err = cluster.ParseLayout(*f.cpus); err != nil {
		return p, usagef("--cpus: %v", err)
	}
	for role, cpus := range p.layout {
		for _, c := range cpus {
			if c >= runtime.NumCPU() {
				return p, usagef("--cpus: %s=%d: this machine has CPUs 0..%d", role, c, runtime.NumCPU()-1)
			}
		}
	}
	for _, name := range strings.Split(*f.fsync, ",") {
		name = strings.TrimSpace(name)
		if _, err := parseFsync(name); err != nil {
			return p, usagef("--fsync: %v", err)
		}
		p.fsyncs = append(p.fsyncs, name)
	}
	if p.sizes, err = parseInts(*f.sizes); err != nil {
		return p, usagef("--sizes: %v", err)
	}
	for _, s := range p.sizes {
		if err := checkLoadSize(s); err != nil {
			return p, usagef("--sizes: %v", err)
		}
	}
	if *f.standbys < 1 || *f.standbys > 8 {
		return p, usagef("--standbys: want 1..8, got %d", *f.standbys)
	}
	p.standbys = *f.standbys
	if err := checkDatagramBytes(*f.datagramBytes); err != nil {
		return p, err
	}
	if *f.fsyncInline < 0 {
		return p, usagef("--fsync-inline: want 0 or more, got %v", *f.fsyncInline)
	}
	for role := range p.layout {
		if n, _ := strconv.Atoi(strings.TrimPrefix(role, "standby")); cluster.IsStandbyN(role) && n > p.standbys {
			return p, usagef("--cpus: %s but --standbys %d", role, p.standbys)
		}
	}
	return p, nil
}

// benchUsage marks a flag parsing error (not --help) as a bad flag.
func benchUsage(err error) error {
	if err == nil || isHelp(err) {
		return err
	}
	return asUsage(err)
}

// latencyFlags are `seqbus bench latency`'s own flags.
type latencyFlags struct {
	rate                               *float64
	count, warmup, floorCount, genNice *int
	genPark                            *bool
	floorIdles, authMode, engineName   *string
	// Parsed: the floor's idle strategies and the auth modes to run.
	idles []string
	auths []bool
}

func defineLatencyFlags(fs *flag.FlagSet) *latencyFlags {
	f := &latencyFlags{}
	f.rate = fs.Float64("rate", 10_000, "commands per second (fixed rate; latency from each intended send time)")
	f.count = fs.Int("count", 100_000, "commands measured per run")
	f.warmup = fs.Int("warmup", 5000, "commands sent first at the same rate and not measured")
	f.floorCount = fs.Int("floor-count", 50_000, "round trips for each raw UDP floor")
	f.genNice = fs.Int("generator-nice", 0, "nice value of the load generator's thread, in the floor and the gated run alike (0: leave it, as a client runs; below 0 needs root, else it runs at 0 and says so): below 0 the generator sends more punctually but, on a core it shares, holds off the nodes (docs/tuning.md)")
	f.genPark = fs.Bool("generator-park", false, "the load generator parks on its socket between sends (seqbus client --park), in the floor and the gated run alike: fewer syscalls, a wake-up per answer")
	f.floorIdles = fs.String("floor-idles", "block,yield,spin", "idle strategies of the floor's hop processes (the floor is the best at p50): "+strings.Join(bench.FloorIdles, ", "))
	f.authMode = fs.String("auth", "off", "frame authentication: off, on, or both (each cell twice, with the MAC's cost as a ratio)")
	f.engineName = fs.String("engine", "matching", "the nodes' state machine: matching or none")
	return f
}

func (f *latencyFlags) check() error {
	switch {
	case !(*f.rate > 0 && *f.rate <= 1e6):
		return usagef("--rate: want 0 < rate <= 1000000, got %v", *f.rate)
	case *f.count < 1 || *f.count > stagetrace.RowsMax/2:
		return usagef("--count: want 1..%d, got %d", stagetrace.RowsMax/2, *f.count)
	case *f.warmup < 0 || *f.warmup > stagetrace.RowsMax/2:
		return usagef("--warmup: want 0..%d, got %d", stagetrace.RowsMax/2, *f.warmup)
	case *f.floorCount < 1 || *f.floorCount > bench.PingPongCountMax-suite.FloorWarmup:
		return usagef("--floor-count: want 1..%d, got %d", bench.PingPongCountMax-suite.FloorWarmup, *f.floorCount)
	case *f.engineName != "matching" && *f.engineName != "none":
		return usagef("--engine: want matching or none, got %q", *f.engineName)
	case *f.genNice < -20 || *f.genNice > 19:
		return usagef("--generator-nice: want -20..19, got %d", *f.genNice)
	}
	for _, name := range strings.Split(*f.floorIdles, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(bench.FloorIdles, name) {
			return usagef("--floor-idles: unknown %q (want %s)", name, strings.Join(bench.FloorIdles, ", "))
		}
		f.idles = append(f.idles, name)
	}
	switch *f.authMode {
	case "off":
		f.auths = []bool{false}
	case "on":
		f.auths = []bool{true}
	case "both":
		f.auths = []bool{false, true}
	default:
		return usagef("--auth: want off, on or both, got %q", *f.authMode)
	}
	return nil
}

func benchLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench latency", flag.ContinueOnError)
	bf := addBenchFlags(fs, "none,group")
	f := defineLatencyFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return benchUsage(err)
	}
	p, err := bf.check()
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(*bf.out, 0o755); err != nil {
		return err
	}
	machine := suite.NewMachine()
	nice, niceNote := suite.ProbeGeneratorNice(*f.genNice)
	fmt.Printf("seqbus bench latency on %s\n%d commands at %.0f/s per run after %d of warm-up; idle %s; layout %s; %d standby(s); every role a separate process; datagrams of %d bytes; generator thread nice %d%s\n",
		machine.Text(), *f.count, *f.rate, *f.warmup, *bf.idle, p.layout, p.standbys, *bf.datagramBytes, nice, niceNote)
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	runs, err := suite.RunLatency(ctx, suite.LatencyConfig{Bin: bin, Sizes: p.sizes, Fsyncs: p.fsyncs, Auths: f.auths,
		FloorCount: *f.floorCount, FloorIdles: f.idles, Out: os.Stdout,
		Cell: cluster.BenchConfig{Idle: *bf.idle, Engine: *f.engineName, Standbys: p.standbys, Layout: p.layout, DatagramBytes: *bf.datagramBytes,
			FsyncInlineNs: int64(*bf.fsyncInline), Rate: *f.rate, Count: *f.count, Warmup: *f.warmup, Keep: *bf.keep, Out: *bf.out, GeneratorNice: nice, GeneratorPark: *f.genPark}})
	if err != nil {
		return err
	}
	machine.Finish()
	machine.WriteConditions(os.Stdout)
	return suite.WriteSummary(os.Stdout, *bf.out, map[string]any{"command": "latency", "args": args, "machine": machine, "idle": *bf.idle, "generator_nice": nice,
		"layout": p.layout.String(), "datagram_bytes": *bf.datagramBytes, "runs": runs})
}
