package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/seqbus/seqbus/internal/stagetrace"
)

// throughputRun is one (size, fsync) cell of `bench throughput`.
type throughputRun struct {
	Size   int    `json:"size_bytes"`
	Fsync  string `json:"fsync"`
	Idle   string `json:"idle"`
	Layout string `json:"layout"`
	// MaxReleasedPerSec: answers the client received per second, flat out,
	// with the matching engine (released through the gate).
	MaxReleasedPerSec float64 `json:"max_released_per_second"`
	// MaxReplicatedPerSec: commands per second the in-sync standbys
	// acknowledged, flat out, with the no-op state machine (--engine none).
	MaxReplicatedPerSec float64           `json:"max_replicated_per_second"`
	Processes           []processInfo     `json:"processes"`            // the flat-out matching run
	ProcessesReplicated []processInfo     `json:"processes_replicated"` // the flat-out engine-none run
	Levels              []throughputLevel `json:"levels"`
}

// throughputLevel is a fixed-rate run at a fraction of a maximum.
type throughputLevel struct {
	Engine   string  `json:"engine"`
	Percent  int     `json:"percent"`
	Rate     float64 `json:"rate_per_second"`
	Achieved float64 `json:"achieved_per_second"`
	// EndToEnd is from each intended send time; IntendedToSent the
	// generator's lateness, so a reader sees which of the two it is.
	EndToEnd       map[string]float64 `json:"end_to_end_us"`
	IntendedToSent map[string]float64 `json:"intended_to_sent_us"`
	Processes      []processInfo      `json:"processes"`
}

var throughputPercents = []int{25, 50, 90}

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
	machine := newBenchMachine()
	fmt.Printf("seqbus bench throughput on %s\nidle %s; layout %s; %d standby(s); every role a separate process\n", machine.text(), *bf.idle, p.layout, p.standbys)
	var runs []throughputRun
	for _, size := range p.sizes {
		for _, fsync := range p.fsyncs {
			run := throughputRun{Size: size, Fsync: fsync, Idle: *bf.idle, Layout: p.layout.String()}
			for _, eng := range []string{"matching", "none"} {
				base := clusterConfig{Size: size, Fsync: fsync, Idle: *bf.idle, Engine: eng, Standbys: p.standbys, Layout: p.layout, Keep: *bf.keep, Out: *bf.out}
				if err := throughputEngine(ctx, &run, base, *count, *latSeconds, *bf.out); err != nil {
					return err
				}
			}
			runs = append(runs, run)
		}
	}
	machine.finish()
	machine.printConditions()
	return writeSummary(*bf.out, map[string]any{"command": "throughput", "args": args, "machine": machine, "idle": *bf.idle,
		"layout": p.layout.String(), "runs": runs})
}

// throughputEngine runs one engine's flat-out run, then the runs at
// throughputPercents of its maximum, into run.
func throughputEngine(ctx context.Context, run *throughputRun, base clusterConfig, count int, latSeconds float64, out string) error {
	eng, size, fsync := base.Engine, base.Size, base.Fsync
	flat := base
	flat.Count, flat.Warmup = count, count/10
	res, err := runCluster(ctx, flat)
	if err != nil {
		return fmt.Errorf("flat out, engine %s, size %s: %w", eng, sizeName(size), err)
	}
	maxRate := res.AchievedPerSec
	if eng == "matching" {
		run.MaxReleasedPerSec, run.Processes = res.AchievedPerSec, res.Processes
	} else {
		run.MaxReplicatedPerSec, run.ProcessesReplicated = res.ReplicatedPerSec, res.Processes
		maxRate = res.ReplicatedPerSec
	}
	fmt.Printf("\nsize %s B, fsync %s, engine %s: flat out %.0f answered/s, %.0f replicated/s\n", sizeName(size), fsync, eng, res.AchievedPerSec, res.ReplicatedPerSec)
	printProcesses(res.Processes)
	fmt.Printf("  %-8s %10s %10s | %-32s | %s\n", "load", "rate/s", "achieved", "end-to-end p50 / p99 / p99.9 µs", "intended->sent p99 µs")
	for _, pct := range throughputPercents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := throughputLevelRun(ctx, run, base, pct, maxRate, latSeconds, out); err != nil {
			return err
		}
	}
	return nil
}

// throughputLevelRun runs base at pct% of maxRate and prints the line.
func throughputLevelRun(ctx context.Context, run *throughputRun, base clusterConfig, pct int, maxRate, latSeconds float64, out string) error {
	eng, size, fsync := base.Engine, base.Size, base.Fsync
	lv := base
	lv.Rate = maxRate * float64(pct) / 100
	lv.Count = max(int(lv.Rate*latSeconds), 1000)
	lv.Warmup = lv.Count / 5
	r, err := runCluster(ctx, lv)
	if err != nil {
		return fmt.Errorf("%d%%, engine %s, size %s: %w", pct, eng, sizeName(size), err)
	}
	e2e, gen := pcts(r.Merged.Hist[stagetrace.StageEndToEnd]), pcts(r.Merged.Hist[stagetrace.StageIntendedToSent])
	run.Levels = append(run.Levels, throughputLevel{Engine: eng, Percent: pct, Rate: lv.Rate, Achieved: r.AchievedPerSec,
		EndToEnd: e2e, IntendedToSent: gen, Processes: r.Processes})
	dir := filepath.Join(out, fmt.Sprintf("throughput-size%s-fsync-%s-engine-%s", sizeName(size), fsync, eng))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := writeHGRM(dir, "end-to-end-at-"+strconv.Itoa(pct)+"pct", r.Merged.Hist[stagetrace.StageEndToEnd]); err != nil {
		return err
	}
	fmt.Printf("  %-8s %10.0f %10.0f | %8.1f / %8.1f / %8.1f      | %8.1f\n", strconv.Itoa(pct)+"%", lv.Rate, r.AchievedPerSec,
		e2e["p50"], e2e["p99"], e2e["p99.9"], gen["p99"])
	return nil
}
