package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/bench/suite"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// addBenchFlags defines the flags `bench latency` and `bench throughput`
// share into the settings bench/suite checks.
func addBenchFlags(fs *flag.FlagSet, fsyncDefault string) *suite.Settings {
	s := &suite.Settings{}
	fs.StringVar(&s.Out, "out", "bench-out", "directory for .hgrm files and summary.json")
	fs.StringVar(&s.Idle, "idle", "block", "idle strategy of every node and the client: block, backoff, backoff:DURATION, spin, yield")
	fs.StringVar(&s.CPUs, "cpus", "", "pin each process: role=cpu or role=cpu-cpu, comma-separated, roles witness, primary, standby (or standby1, standby2...), client; e.g. primary=1,standby=0,client=0 (default: unpinned, what a user gets)")
	fs.StringVar(&s.Fsync, "fsync", fsyncDefault, "journal fsync policies, comma-separated: none, group, always")
	fs.StringVar(&s.Sizes, "sizes", "32,256,1024", "command sizes in bytes, comma-separated (0: real 39-byte new orders that trade)")
	fs.IntVar(&s.Standbys, "standbys", 1, "standby processes (1..8)")
	fs.BoolVar(&s.Keep, "keep", false, "keep each run's directory (logs, journals, traces) under --out")
	fs.IntVar(&s.DatagramBytes, "datagram-bytes", wire.DefaultDatagramLen, "every node's and the client's --datagram-bytes: "+datagramBytesUsage)
	fs.DurationVar(&s.FsyncInline, "fsync-inline", time.Duration(nodeconfig.DefaultFsyncInlineBelowNs), "every node's --fsync-inline: "+fsyncInlineUsage)
	return s
}

// benchUsage marks a flag parsing error (not --help) as a bad flag.
func benchUsage(err error) error {
	if err == nil || isHelp(err) {
		return err
	}
	return asUsage(err)
}

// defineLatencyFlags defines `seqbus bench latency`'s own flags.
func defineLatencyFlags(fs *flag.FlagSet) *suite.LatencySettings {
	s := &suite.LatencySettings{}
	fs.Float64Var(&s.Rate, "rate", 10_000, "commands per second (fixed rate; latency from each intended send time)")
	fs.IntVar(&s.Count, "count", 100_000, "commands measured per run")
	fs.IntVar(&s.Warmup, "warmup", 5000, "commands sent first at the same rate and not measured")
	fs.IntVar(&s.FloorCount, "floor-count", 50_000, "round trips for each raw UDP floor")
	fs.IntVar(&s.GeneratorNice, "generator-nice", 0, "nice value of the load generator's thread, in the floor and the gated run alike (0: leave it, as a client runs; below 0 needs root, else it runs at 0 and says so): below 0 the generator sends more punctually but, on a core it shares, holds off the nodes (docs/tuning.md)")
	fs.BoolVar(&s.GeneratorPark, "generator-park", false, "the load generator parks on its socket between sends (seqbus client --park), in the floor and the gated run alike: fewer syscalls, a wake-up per answer")
	fs.StringVar(&s.FloorIdles, "floor-idles", "block,yield,spin", "idle strategies of the floor's hop processes (the floor is the best at p50): "+strings.Join(bench.FloorIdles, ", "))
	fs.StringVar(&s.Auth, "auth", "off", "frame authentication: off, on, or both (each cell twice, with the MAC's cost as a ratio)")
	fs.StringVar(&s.Engine, "engine", "matching", "the nodes' state machine: matching or none")
	return s
}

func benchLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench latency", flag.ContinueOnError)
	bf := addBenchFlags(fs, "none,group")
	f := defineLatencyFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return benchUsage(err)
	}
	p, err := bf.Check()
	if err != nil {
		return err
	}
	idles, auths, err := f.Check()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(bf.Out, 0o755); err != nil {
		return err
	}
	machine := suite.NewMachine()
	nice, niceNote := suite.ProbeGeneratorNice(f.GeneratorNice)
	fmt.Printf("seqbus bench latency on %s\n%d commands at %.0f/s per run after %d of warm-up; idle %s; layout %s; %d standby(s); every role a separate process; datagrams of %d bytes; generator thread nice %d%s\n",
		machine.Text(), f.Count, f.Rate, f.Warmup, bf.Idle, p.Layout, p.Standbys, bf.DatagramBytes, nice, niceNote)
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	cell := bf.Base(p)
	cell.Engine, cell.Rate, cell.Count, cell.Warmup, cell.GeneratorNice, cell.GeneratorPark = f.Engine, f.Rate, f.Count, f.Warmup, nice, f.GeneratorPark
	runs, err := suite.RunLatency(ctx, suite.LatencyConfig{Bin: bin, Sizes: p.Sizes, Fsyncs: p.Fsyncs, Auths: auths,
		FloorCount: f.FloorCount, FloorIdles: idles, Out: os.Stdout, Cell: cell})
	if err != nil {
		return err
	}
	machine.Finish()
	machine.WriteConditions(os.Stdout)
	return suite.WriteSummary(os.Stdout, bf.Out, map[string]any{"command": "latency", "args": args, "machine": machine, "idle": bf.Idle, "generator_nice": nice,
		"layout": p.Layout.String(), "datagram_bytes": bf.DatagramBytes, "runs": runs})
}
