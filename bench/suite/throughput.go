package suite

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// ThroughputConfig is one `bench throughput`: every size × fsync cell,
// each with the matching engine and with none, flat out and then at
// throughputPercents of the maximum.
type ThroughputConfig struct {
	Bin string // the seqbus binary (the cluster's processes)
	// Base is every run's configuration but its Size, Fsync, Engine,
	// Rate, Count and Warmup.
	Base   cluster.BenchConfig
	Sizes  []int
	Fsyncs []string
	// Count is the commands of each flat-out run; LatencySeconds the
	// length of each run at a fraction of the maximum.
	Count          int
	LatencySeconds float64
	// Out receives the tables; the files go under Base.Out.
	Out io.Writer
	// LevelLoad is how the load generator paces the runs at a fraction
	// of the maximum (the flat-out runs send as the window allows).
	LevelLoad LevelLoad
	// ReplicatedInFlight is the load client's window in the --engine
	// none runs (0: the client's default). The matching runs keep the
	// client's default, the engine's dedup window; none has no dedup
	// table to bound it.
	ReplicatedInFlight int
}

// LevelLoad is the load generator's pacing in the fixed-rate runs.
type LevelLoad struct {
	// CoalesceNs: send in bursts at most this far apart
	// (client.LoadConfig.CoalesceNs); Park: park between them; Nice:
	// the generator thread's nice value (0: leave it).
	CoalesceNs int64
	Park       bool
	Nice       int
}

// Check validates the settings a user gives (Count, LatencySeconds,
// LevelLoad, ReplicatedInFlight) before anything starts.
func (c *ThroughputConfig) Check() error {
	switch {
	case c.Count < 1000 || c.Count > stagetrace.RowsMax/2:
		return fmt.Errorf("--count: want 1000..%d, got %d", stagetrace.RowsMax/2, c.Count)
	case !(c.LatencySeconds > 0 && c.LatencySeconds <= 600):
		return fmt.Errorf("--latency-seconds: want 0 < s <= 600, got %v", c.LatencySeconds)
	case c.LevelLoad.Nice < -20 || c.LevelLoad.Nice > 19:
		return fmt.Errorf("--generator-nice: want -20..19, got %d", c.LevelLoad.Nice)
	case c.LevelLoad.CoalesceNs < 0 || c.LevelLoad.CoalesceNs > client.CoalesceNsMax:
		return fmt.Errorf("--generator-coalesce: want 0..%v, got %v", time.Duration(client.CoalesceNsMax), time.Duration(c.LevelLoad.CoalesceNs))
	case c.ReplicatedInFlight < 0 || c.ReplicatedInFlight > client.MaxInFlightMax:
		return fmt.Errorf("--replicated-in-flight: want 0..%d (0: the client's %d), got %d", client.MaxInFlightMax, client.DefaultMaxInFlight, c.ReplicatedInFlight)
	}
	return nil
}

// RunThroughput runs the cells in order and returns their reports; it
// stops at the first error (ctx's included).
func RunThroughput(ctx context.Context, cfg ThroughputConfig) ([]ThroughputRun, error) {
	var runs []ThroughputRun
	b := cfg.Base
	for _, size := range cfg.Sizes {
		for _, fsync := range cfg.Fsyncs {
			run := ThroughputRun{Size: size, Fsync: fsync, FsyncInlineNs: b.FsyncInlineNs, Idle: b.Idle, Layout: b.Layout.String(),
				ReplicatedInFlight: cfg.ReplicatedInFlight}
			for _, eng := range []string{"matching", "none"} {
				base := b
				base.Size, base.Fsync, base.Engine = size, fsync, eng
				if eng == "none" {
					base.MaxInFlight = cfg.ReplicatedInFlight
				}
				if err := throughputEngine(ctx, cfg.Out, cfg.Bin, &run, base, cfg.LevelLoad, cfg.Count, cfg.LatencySeconds, b.Out); err != nil {
					return nil, err
				}
			}
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// ThroughputRun is one (size, fsync) cell of `bench throughput`.
type ThroughputRun struct {
	Size  int    `json:"size_bytes"`
	Fsync string `json:"fsync"`
	// FsyncInlineNs is the nodes' --fsync-inline (LatencyRun's).
	FsyncInlineNs int64  `json:"fsync_inline_ns"`
	Idle          string `json:"idle"`
	Layout        string `json:"layout"`
	// MaxReleasedPerSec: answers the client received per second, flat out,
	// with the matching engine (released through the gate).
	MaxReleasedPerSec float64 `json:"max_released_per_second"`
	// MaxReplicatedPerSec: commands per second the in-sync standbys
	// acknowledged, flat out, with the no-op state machine (--engine
	// none), the client's window ReplicatedInFlight (0: its default).
	MaxReplicatedPerSec float64               `json:"max_replicated_per_second"`
	ReplicatedInFlight  int                   `json:"replicated_in_flight,omitempty"`
	Processes           []cluster.ProcessInfo `json:"processes"`            // the flat-out matching run
	ProcessesReplicated []cluster.ProcessInfo `json:"processes_replicated"` // the flat-out engine-none run
	Levels              []ThroughputLevel     `json:"levels"`
}

// ThroughputLevel is a fixed-rate run at a fraction of a maximum.
type ThroughputLevel struct {
	Engine   string  `json:"engine"`
	Percent  int     `json:"percent"`
	Rate     float64 `json:"rate_per_second"`
	Achieved float64 `json:"achieved_per_second"`
	// EndToEnd is from each intended send time; IntendedToSent the
	// generator's lateness, so a reader sees which of the two it is.
	EndToEnd       map[string]float64    `json:"end_to_end_us"`
	IntendedToSent map[string]float64    `json:"intended_to_sent_us"`
	Processes      []cluster.ProcessInfo `json:"processes"`
}

var throughputPercents = []int{25, 50, 90}

// throughputEngine runs one engine's flat-out run, then the runs at
// throughputPercents of its maximum, into run.
func throughputEngine(ctx context.Context, w io.Writer, bin string, run *ThroughputRun, base cluster.BenchConfig, level LevelLoad, count int, latSeconds float64, out string) error {
	eng, size, fsync := base.Engine, base.Size, base.Fsync
	flat := base
	flat.Count, flat.Warmup = count, count/10
	res, err := cluster.RunBench(ctx, bin, flat)
	if err != nil {
		return fmt.Errorf("flat out, engine %s, size %s: %w", eng, SizeName(size), err)
	}
	maxRate := res.AchievedPerSec
	if eng == "matching" {
		run.MaxReleasedPerSec, run.Processes = res.AchievedPerSec, res.Processes
	} else {
		run.MaxReplicatedPerSec, run.ProcessesReplicated = res.ReplicatedPerSec, res.Processes
		maxRate = res.ReplicatedPerSec
	}
	window := base.MaxInFlight
	if window == 0 {
		window = client.DefaultMaxInFlight
	}
	fmt.Fprintf(w, "\nsize %s B, fsync %s, engine %s: flat out %.0f answered/s, %.0f replicated/s (client window %d)\n", SizeName(size), fsyncText(fsync, base.FsyncInlineNs), eng, res.AchievedPerSec, res.ReplicatedPerSec, window)
	WriteProcesses(w, res.Processes)
	fmt.Fprintf(w, "  %-8s %10s %10s | %-32s | %-21s | %s\n", "load", "rate/s", "achieved", "end-to-end p50 / p99 / p99.9 µs", "intended->sent p99 µs",
		"CPU, % of a core")
	paced := base
	paced.GeneratorCoalesceNs, paced.GeneratorPark, paced.GeneratorNice = level.CoalesceNs, level.Park, level.Nice
	for _, pct := range throughputPercents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := throughputLevelRun(ctx, w, bin, run, paced, pct, maxRate, latSeconds, out); err != nil {
			return err
		}
	}
	return nil
}

// throughputLevelRun runs base at pct% of maxRate and prints the line.
func throughputLevelRun(ctx context.Context, w io.Writer, bin string, run *ThroughputRun, base cluster.BenchConfig, pct int, maxRate, latSeconds float64, out string) error {
	eng, size, fsync := base.Engine, base.Size, base.Fsync
	lv := base
	lv.Rate = maxRate * float64(pct) / 100
	lv.Count = max(int(lv.Rate*latSeconds), 1000)
	lv.Warmup = lv.Count / 5
	r, err := cluster.RunBench(ctx, bin, lv)
	if err != nil {
		return fmt.Errorf("%d%%, engine %s, size %s: %w", pct, eng, SizeName(size), err)
	}
	e2e, gen := Pcts(r.Merged.Hist[stagetrace.StageEndToEnd]), Pcts(r.Merged.Hist[stagetrace.StageIntendedToSent])
	run.Levels = append(run.Levels, ThroughputLevel{Engine: eng, Percent: pct, Rate: lv.Rate, Achieved: r.AchievedPerSec,
		EndToEnd: e2e, IntendedToSent: gen, Processes: r.Processes})
	dir := filepath.Join(out, fmt.Sprintf("throughput-size%s-fsync-%s-engine-%s", SizeName(size), fsync, eng))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := WriteHGRM(dir, "end-to-end-at-"+strconv.Itoa(pct)+"pct", r.Merged.Hist[stagetrace.StageEndToEnd]); err != nil {
		return err
	}
	fmt.Fprintf(w, "  %-8s %10.0f %10.0f | %8.1f / %8.1f / %8.1f      | %8.1f              | %s\n", strconv.Itoa(pct)+"%", lv.Rate, r.AchievedPerSec,
		e2e["p50"], e2e["p99"], e2e["p99.9"], gen["p99"], levelCPU(r.Processes, r.AchievedPerSec))
	return nil
}

// levelCPU is what each process of a fixed-rate run used of one core
// over its measured window (its CPU µs a command times the commands a
// second), and their sum: at which load the machine's cores are full,
// the queueing every tail of the level then shows, the load generator's
// own lateness (intended->sent) included.
func levelCPU(ps []cluster.ProcessInfo, perSec float64) string {
	out, sum, n := "", 0.0, 0
	for _, p := range ps {
		if !p.Window {
			continue
		}
		pct := p.WindowCPUUsPerCommand * perSec / 1e4
		out += fmt.Sprintf("%s %.0f, ", p.Role, pct)
		sum += pct
		n++
	}
	if n == 0 {
		return "-"
	}
	return out + fmt.Sprintf("sum %.0f", sum)
}
