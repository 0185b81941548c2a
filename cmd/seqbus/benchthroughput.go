package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/seqbus/seqbus/bench/suite"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

func benchThroughput(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	bf := addBenchFlags(fs, "none")
	count := fs.Int("count", 200_000, "commands in each flat-out run")
	latSeconds := fs.Float64("latency-seconds", 3, "length of each run at 25%, 50% and 90% of the maximum")
	if err := parseFlags(fs, args); err != nil {
		return benchUsage(err)
	}
	p, err := bf.check()
	if err != nil {
		return err
	}
	switch {
	case *count < 1000 || *count > stagetrace.RowsMax/2:
		return benchUsagef("--count: want 1000..%d, got %d", stagetrace.RowsMax/2, *count)
	case !(*latSeconds > 0 && *latSeconds <= 600):
		return benchUsagef("--latency-seconds: want 0 < s <= 600, got %v", *latSeconds)
	}
	if err := os.MkdirAll(*bf.out, 0o755); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	machine := suite.NewMachine()
	fmt.Printf("seqbus bench throughput on %s\nidle %s; layout %s; %d standby(s); every role a separate process\n", machine.Text(), *bf.idle, p.layout, p.standbys)
	runs, err := suite.RunThroughput(ctx, suite.ThroughputConfig{Bin: bin, Sizes: p.sizes, Fsyncs: p.fsyncs, Count: *count, LatencySeconds: *latSeconds,
		Out: os.Stdout, Base: cluster.BenchConfig{Idle: *bf.idle, Standbys: p.standbys, Layout: p.layout, Keep: *bf.keep, Out: *bf.out}})
	if err != nil {
		return err
	}
	machine.Finish()
	machine.WriteConditions(os.Stdout)
	return suite.WriteSummary(os.Stdout, *bf.out, map[string]any{"command": "throughput", "args": args, "machine": machine, "idle": *bf.idle,
		"layout": p.layout.String(), "runs": runs})
}
