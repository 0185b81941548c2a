package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/seqbus/seqbus/bench/suite"
	"github.com/seqbus/seqbus/client"
)

func benchThroughput(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	bf := addBenchFlags(fs, "none")
	count := fs.Int("count", 200_000, "commands in each flat-out run")
	latSeconds := fs.Float64("latency-seconds", 3, "length of each run at 25%, 50% and 90% of the maximum")
	coalesce := fs.Duration("generator-coalesce", 100*time.Microsecond, "in the runs at 25/50/90 %, the load generator sends in bursts this far apart at most (seqbus client --coalesce; latency still runs from each intended time; 0: each command at its time, spinning a core between; at most 10ms)")
	nice := fs.Int("generator-nice", 0, "in the runs at 25/50/90 %, the nice value of the load generator's thread (seqbus client --nice; 0: leave it; below 0 needs root, else it runs at 0 and says so)")
	inFlight := fs.Int("replicated-in-flight", 8192, fmt.Sprintf("the load client's --max-in-flight in the --engine none runs (0..%d; 0: the client default): none keeps no dedup table to bound it; the matching runs keep %d, the engine's dedup window (docs/tuning.md)", client.MaxInFlightMax, client.DefaultMaxInFlight))
	park := fs.Bool("generator-park", true, "in the runs at 25/50/90 %, the load generator parks on its socket between sends (seqbus client --park)")
	if err := parseFlags(fs, args); err != nil {
		return benchUsage(err)
	}
	p, err := bf.Check()
	if err != nil {
		return err
	}
	cfg := suite.ThroughputConfig{Sizes: p.Sizes, Fsyncs: p.Fsyncs, Count: *count, LatencySeconds: *latSeconds, Out: os.Stdout, Base: bf.Base(p),
		LevelLoad: suite.LevelLoad{CoalesceNs: int64(*coalesce), Park: *park, Nice: *nice}, ReplicatedInFlight: *inFlight}
	if err := cfg.Check(); err != nil {
		return asUsage(err)
	}
	if err := os.MkdirAll(bf.Out, 0o755); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	niceLevel, niceNote := suite.ProbeGeneratorNice(*nice)
	cfg.Bin, cfg.LevelLoad.Nice = bin, niceLevel
	if niceNote != "" {
		fmt.Println(niceNote)
	}
	machine := suite.NewMachine()
	fmt.Printf("seqbus bench throughput on %s\nidle %s; layout %s; %d standby(s); every role a separate process; datagrams of %d bytes\n", machine.Text(), bf.Idle, p.Layout, p.Standbys, bf.DatagramBytes)
	fmt.Printf("generator at 25/50/90 %%: bursts at most %v apart, park %v, nice %d (latency from each intended send time)\n", *coalesce, *park, niceLevel)
	runs, err := suite.RunThroughput(ctx, cfg)
	if err != nil {
		return err
	}
	machine.Finish()
	machine.WriteConditions(os.Stdout)
	return suite.WriteSummary(os.Stdout, bf.Out, map[string]any{"command": "throughput", "args": args, "machine": machine, "idle": bf.Idle,
		"layout": p.Layout.String(), "datagram_bytes": bf.DatagramBytes, "level_generator": map[string]any{"coalesce_ns": int64(*coalesce), "park": *park, "nice": niceLevel}, "runs": runs})
}
