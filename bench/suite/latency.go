package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/internal/pace"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// LatencyConfig is one `bench latency`: every size × fsync cell, each
// run once per auth mode, after the floors of its size.
type LatencyConfig struct {
	// Bin is the seqbus binary: the cluster's processes and the floor's
	// hop processes (`Bin bench-echo`) are its subcommands.
	Bin string
	// Cell is every run's configuration but its Size, Fsync and Auth.
	Cell   cluster.BenchConfig
	Sizes  []int
	Fsyncs []string
	Auths  []bool // false: no MAC; true: every frame authenticated
	// FloorCount and FloorIdles: round trips of each raw UDP floor, and
	// the hop processes' idle strategies (the floor is the best at p50).
	FloorCount int
	FloorIdles []string
	// Out receives each run's table; the files go under Cell.Out.
	Out io.Writer
}

// RunLatency runs the cells in order and returns their reports; it stops
// at the first error (ctx's included).
func RunLatency(ctx context.Context, cfg LatencyConfig) ([]LatencyRun, error) {
	var runs []LatencyRun
	c := cfg.Cell
	for _, size := range cfg.Sizes {
		floors, err := RunFloors(ctx, cfg.Bin, size, c.Rate, cfg.FloorCount, cfg.FloorIdles, c.Layout, c.GeneratorNice, c.GeneratorPark)
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		for _, fsync := range cfg.Fsyncs {
			cell := c
			cell.Size, cell.Fsync = size, fsync
			cellRuns, err := LatencyCell(ctx, cfg.Out, cfg.Bin, cell, cfg.Auths, floors, c.Out)
			if err != nil {
				return nil, err
			}
			runs = append(runs, cellRuns...)
		}
	}
	return runs, nil
}

// LatencyRun is one (size, fsync, auth) cell of `bench latency`.
type LatencyRun struct {
	Size  int    `json:"size_bytes"`
	Fsync string `json:"fsync"`
	// FsyncInlineNs is the nodes' --fsync-inline (fsync on the agent
	// while fsyncs average at most this; 0: always the fsync thread).
	FsyncInlineNs int64                         `json:"fsync_inline_ns"`
	Auth          string                        `json:"auth"`
	Engine        string                        `json:"engine"`
	Idle          string                        `json:"idle"`
	Layout        string                        `json:"layout"`
	Standbys      int                           `json:"standbys"`
	Rate          float64                       `json:"rate_per_second"`
	Count         int                           `json:"count"`
	Achieved      float64                       `json:"achieved_per_second"`
	Stages        map[string]map[string]float64 `json:"stages_us"`
	RatioTo2Hop   map[string]float64            `json:"end_to_end_over_floor_2hop"`
	RatioTo4Hop   map[string]float64            `json:"end_to_end_over_floor_4hop"`
	// Floor2HopFrom and Floor4HopFrom name the idle strategy whose floor
	// was best at p50 (floor-2hop is floor-2hop-<that>).
	Floor2HopFrom string `json:"floor_2hop_from"`
	Floor4HopFrom string `json:"floor_4hop_from"`
	// Generator is the load client's own lateness: commands sent more
	// than 10 µs after their intended time.
	Generator GeneratorInfo         `json:"generator"`
	Processes []cluster.ProcessInfo `json:"processes"`
	// FloorCPU is the raw floors' processes' CPU in µs a round trip
	// (whole life), by floor stage and role (FloorSet.cpu).
	FloorCPU   map[string]map[string]float64 `json:"floor_cpu_us_per_round_trip,omitempty"`
	Unanswered int                           `json:"unanswered"`
	Unmatched  int                           `json:"unmatched"`
	Files      []string                      `json:"files"`
}

// GeneratorInfo is the load generator's lateness over a run's sent commands.
type GeneratorInfo struct {
	Sent     int     `json:"sent"`
	Late10us int     `json:"late_10us"`
	MaxLate  float64 `json:"max_late_us"`
}

func generatorOf(m *stagetrace.Merged) GeneratorInfo {
	h := m.Hist[stagetrace.StageIntendedToSent]
	g := GeneratorInfo{Sent: int(h.TotalCount()), MaxLate: float64(h.Max()) / NsPerUs}
	for _, b := range h.Distribution() {
		if b.From > 10_000 {
			g.Late10us += int(b.Count)
		}
	}
	return g
}

// floorCPU is each floor process's CPU in µs a round trip of rounds.
func floorCPU(ps []bench.ProcessInfo, rounds int) map[string]float64 {
	m := map[string]float64{}
	for _, p := range ps {
		m[p.Role] += p.CPUSeconds * 1e6 / float64(max(rounds, 1))
	}
	return m
}

// FloorSet is the floors of one size: every idle strategy at 2 and 4 hops
// and the best of each.
type FloorSet struct {
	hist         map[string]*hdrhistogram.Histogram
	best2, best4 string // idle names
	// cpu is each floor's processes' CPU, in µs a round trip over their
	// whole life (warm-up in), by floor stage and role (client, echo,
	// relay): the same measure as the cluster's "cpu s/1M cmd", so a
	// node's cost next to a raw hop process's is one run's comparison.
	cpu map[string]map[string]float64
}

// RunFloors measures the floors of one size (bench.RunFloor with bin's
// hop processes): every idle strategy at 2 and 4 hops, and the best at
// p50 of each as "floor-2hop" and "floor-4hop". A lossy floor is kept.
func RunFloors(ctx context.Context, bin string, size int, rate float64, count int, idles []string, l cluster.Layout, nice int, park bool) (*FloorSet, error) {
	fl := &FloorSet{hist: map[string]*hdrhistogram.Histogram{}, cpu: map[string]map[string]float64{}}
	for _, hops := range []int{2, 4} {
		best := ""
		for _, idle := range idles {
			res, err := bench.RunFloor(ctx, bench.FloorConfig{Binary: bin, Hops: hops, Idle: idle, Size: max(size, bench.MessageBytesDefault),
				Rate: rate, Count: count, Warmup: FloorWarmup, CPUs: l.FloorCPUs(hops), Nice: nice, Park: park})
			if err != nil && !errors.Is(err, bench.ErrLost) {
				return nil, fmt.Errorf("%s: %w", bench.FloorStage(hops, idle), err)
			}
			fl.hist[bench.FloorStage(hops, idle)] = res.Hist
			fl.cpu[bench.FloorStage(hops, idle)] = floorCPU(res.Processes, count+FloorWarmup)
			if best == "" || res.Hist.ValueAtQuantile(50) < fl.hist[bench.FloorStage(hops, best)].ValueAtQuantile(50) {
				best = idle
			}
		}
		fl.hist[fmt.Sprintf("floor-%dhop", hops)] = fl.hist[bench.FloorStage(hops, best)]
		if hops == 2 {
			fl.best2 = best
		} else {
			fl.best4 = best
		}
	}
	return fl, nil
}

// LatencyCell runs one size and fsync policy once per auth mode, writing
// each run's table and the MAC's cost as a ratio to w.
func LatencyCell(ctx context.Context, w io.Writer, bin string, cell cluster.BenchConfig, auths []bool, floors *FloorSet, out string) ([]LatencyRun, error) {
	var runs []LatencyRun
	var plain *LatencyRun
	for _, withAuth := range auths {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cfg := cell
		cfg.Auth = withAuth
		res, err := cluster.RunBench(ctx, bin, cfg)
		if err != nil {
			return nil, fmt.Errorf("size %s fsync %s: %w", SizeName(cfg.Size), cfg.Fsync, err)
		}
		run, err := latencyRunOf(cfg, res, floors, out)
		if err != nil {
			return nil, err
		}
		WriteLatencyRun(w, run)
		if !withAuth {
			plain = &run
		} else if plain != nil {
			a, b := run.Stages[stagetrace.StageEndToEnd], plain.Stages[stagetrace.StageEndToEnd]
			fmt.Fprintf(w, "  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", "with MAC / without", a["p50"]/b["p50"], a["p90"]/b["p90"], a["p99"]/b["p99"], a["p99.9"]/b["p99.9"], a["max"]/b["max"])
		}
		runs = append(runs, run)
	}
	return runs, nil
}

func authName(on bool) string {
	if on {
		return "mac"
	}
	return "off"
}

// latencyRunOf builds a run's report and writes its .hgrm files.
func latencyRunOf(cfg cluster.BenchConfig, res *cluster.BenchResult, floors *FloorSet, out string) (LatencyRun, error) {
	m := res.Merged
	run := LatencyRun{Size: cfg.Size, Fsync: cfg.Fsync, FsyncInlineNs: cfg.FsyncInlineNs, Auth: authName(cfg.Auth), Engine: cfg.Engine, Idle: cfg.Idle, Layout: cfg.Layout.String(),
		Standbys: cfg.Standbys, Rate: cfg.Rate, Count: cfg.Count, Achieved: res.AchievedPerSec,
		Stages: map[string]map[string]float64{}, RatioTo2Hop: map[string]float64{}, RatioTo4Hop: map[string]float64{},
		Generator: generatorOf(m), Processes: res.Processes, Unanswered: max(m.Unanswered, int(res.Client.Unanswered)), Unmatched: m.Unmatched}
	dir := filepath.Join(out, fmt.Sprintf("latency-size%s-fsync-%s-auth-%s", SizeName(cfg.Size), cfg.Fsync, run.Auth))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run, err
	}
	hists := map[string]*hdrhistogram.Histogram{}
	for name, h := range m.Hist {
		hists[name] = h
	}
	if floors != nil {
		for name, h := range floors.hist {
			hists[name] = h
		}
		run.Floor2HopFrom, run.Floor4HopFrom = floors.best2, floors.best4
		run.FloorCPU = floors.cpu
	}
	for name, h := range hists {
		path, err := WriteHGRM(dir, strings.ReplaceAll(name, ">", ""), h)
		if err != nil {
			return run, err
		}
		run.Files = append(run.Files, path)
		run.Stages[name] = Pcts(h)
	}
	logPath, err := WriteIntervalLog(dir, m)
	if err != nil {
		return run, err
	}
	run.Files = append(run.Files, logPath)
	slices.Sort(run.Files)
	if floors != nil {
		e2e := m.Hist[stagetrace.StageEndToEnd]
		f2, f4 := floors.hist["floor-2hop"], floors.hist["floor-4hop"]
		for _, q := range Quantiles {
			run.RatioTo2Hop[QuantName(q)] = float64(e2e.ValueAtQuantile(q)) / float64(max(f2.ValueAtQuantile(q), 1))
			run.RatioTo4Hop[QuantName(q)] = float64(e2e.ValueAtQuantile(q)) / float64(max(f4.ValueAtQuantile(q), 1))
		}
	}
	return run, nil
}

// latencyRows is the text table's order: floors, then the path.
func latencyRows(run LatencyRun) []string {
	var rows []string
	for _, hops := range []string{"2", "4"} {
		for name := range run.Stages {
			if strings.HasPrefix(name, "floor-"+hops+"hop-") {
				rows = append(rows, name)
			}
		}
	}
	slices.Sort(rows)
	rows = append(rows, "floor-2hop", "floor-4hop")
	return append(rows, stagetrace.Stages...)
}

// WriteLatencyRun writes a run's table: each stage's percentiles in µs
// next to the floors, the ratios to them and the processes.
func WriteLatencyRun(w io.Writer, run LatencyRun) {
	fmt.Fprintf(w, "\nsize %s B, fsync %s, auth %s, engine %s: %.0f cmd/s achieved; %d of %d sent > 10 µs late (generator); %d unanswered\n",
		SizeName(run.Size), fsyncText(run.Fsync, run.FsyncInlineNs), run.Auth, run.Engine, run.Achieved, run.Generator.Late10us, run.Generator.Sent, run.Unanswered)
	fmt.Fprintf(w, "  %-24s %9s %9s %9s %9s %9s\n", "µs", "p50", "p90", "p99", "p99.9", "max")
	for _, name := range latencyRows(run) {
		p, ok := run.Stages[name]
		if !ok {
			continue
		}
		label := name
		switch name {
		case "floor-2hop":
			label = "floor-2hop (" + run.Floor2HopFrom + ")"
		case "floor-4hop":
			label = "floor-4hop (" + run.Floor4HopFrom + ")"
		}
		fmt.Fprintf(w, "  %-24s %9.1f %9.1f %9.1f %9.1f %9.1f\n", label, p["p50"], p["p90"], p["p99"], p["p99.9"], p["max"])
	}
	if len(run.RatioTo2Hop) > 0 {
		for _, r := range []struct {
			name string
			m    map[string]float64
		}{{"end-to-end / floor-2hop", run.RatioTo2Hop}, {"end-to-end / floor-4hop", run.RatioTo4Hop}} {
			fmt.Fprintf(w, "  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", r.name, r.m["p50"], r.m["p90"], r.m["p99"], r.m["p99.9"], r.m["max"])
		}
	}
	WriteProcesses(w, run.Processes)
	writeFloorCPU(w, run.FloorCPU)
}

// writeFloorCPU writes the 4-hop floors' processes' CPU a round trip
// beside the table above: the relay does a primary's four socket calls
// and two wake-ups a round trip, the echo a standby's two and one.
func writeFloorCPU(w io.Writer, cpu map[string]map[string]float64) {
	var stages []string
	for name := range cpu {
		if strings.HasPrefix(name, "floor-4hop-") {
			stages = append(stages, name)
		}
	}
	if len(stages) == 0 {
		return
	}
	slices.Sort(stages)
	fmt.Fprintln(w, "  the raw 4-hop floor's processes, cpu µs a round trip over their whole life (as cpu s/1M cmd above):")
	for _, name := range stages {
		c := cpu[name]
		fmt.Fprintf(w, "    %-22s client %.1f, relay %.1f (a primary's socket calls), echo %.1f (a standby's)\n", name, c["client"], c["relay"], c["echo"])
	}
}

// WriteProcesses writes the per-process table (CPU, allocations and
// socket calls per command).
func WriteProcesses(w io.Writer, ps []cluster.ProcessInfo) {
	fmt.Fprint(w, processWindowNote)
	fmt.Fprintf(w, "  %-10s %8s %6s %6s %10s %14s %12s %14s %14s %14s\n", "process", "pid", "cpus", "procs", "cpu s", "cpu s/1M cmd",
		"cpu µs/cmd", "mallocs/cmd", "syscalls/cmd", "(life) mallocs")
	for _, p := range ps {
		procs := "-"
		if p.GOMAXPROCS > 0 {
			procs = strconv.Itoa(p.GOMAXPROCS)
		}
		cpu, mallocs, syscalls, life := "-", "-", "-", "-"
		if p.Window {
			cpu = strconv.FormatFloat(p.WindowCPUUsPerCommand, 'f', 2, 64)
			mallocs, syscalls = strconv.FormatFloat(p.WindowMallocsPerCommand, 'f', 2, 64), strconv.FormatFloat(p.WindowSyscallsPerCommand, 'f', 2, 64)
		}
		if p.GOMAXPROCS > 0 { // set from the process's trace: the witness has none
			life = strconv.FormatFloat(p.MallocsPerCommand, 'f', 2, 64)
		}
		fmt.Fprintf(w, "  %-10s %8d %6s %6s %10.2f %14.2f %12s %14s %14s %14s\n", p.Role, p.Pid, p.CPUs, procs, p.CPUSeconds, p.CPUSPerMillion,
			cpu, mallocs, syscalls, life)
	}
	writeAgentStalls(w, ps)
}

// writeAgentStalls writes each node's agent thread's time away from its
// sockets over its life (status.AgentStatus): a latency outlier as long
// as a stall was the machine's, one as long as a pass the node's own.
func writeAgentStalls(w io.Writer, ps []cluster.ProcessInfo) {
	var parts []string
	for _, p := range ps {
		if a := p.Agent; a != nil {
			parts = append(parts, fmt.Sprintf("%s longest pass %.2f ms, longest stall %.2f ms, %d stalls over 1 ms",
				p.Role, float64(a.LongestPassNs)/1e6, float64(a.LongestStallNs)/1e6, a.Stalls))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  agent threads (each node's life; a stall: the thread did not run when it should have): %s\n", strings.Join(parts, "; "))
	}
}

// processWindowNote says what the per-process columns count.
const processWindowNote = `  cpu s, cpu s/1M cmd: the process's whole life (start-up, warm-up, drain) over all sent.
  cpu µs/cmd, mallocs/cmd, syscalls/cmd: the measured window only, over the measured commands: from the
    process's first handling of the first measured command (client: its answer; primary: sequencing it;
    standby: applying it) to its handling of the last (client: its answer; primary: releasing it; standby:
    applying it); "-": the window never closed. (life) mallocs: since the process began tracing, warm-up and
    drain in, over all sent.
`

// WriteIntervalLog writes the end-to-end latency by second of intended
// send time as an HdrHistogram interval log (HistogramLogAnalyzer reads
// it; so does bench.SliceIntervalLog).
func WriteIntervalLog(dir string, m *stagetrace.Merged) (string, error) {
	path := filepath.Join(dir, "end-to-end.hlog")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	// The log's start on the wall clock: now, less how long ago (on the
	// monotonic clock) the first measured command was due.
	startMs := time.Now().UnixMilli() - (monotime.Now()-m.FirstIntendedNs)/1e6
	l, err := bench.NewIntervalLog(f, startMs, "seqbus bench latency: end-to-end ns by second of intended send time")
	if err == nil {
		for i, h := range m.Intervals {
			if h.TotalCount() == 0 {
				continue
			}
			if err = l.Write(h, int64(i)*1e9, int64(i+1)*1e9); err != nil {
				break
			}
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return path, err
}

// ProbeGeneratorNice says which nice value the generator can run at: the
// one asked for when this process may set it (root), else 0, with a note
// for the report.
func ProbeGeneratorNice(want int) (int, string) {
	if want == 0 {
		return 0, ""
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := pace.SetThreadNice(want)
	if err != nil {
		return 0, fmt.Sprintf(" (--generator-nice %d not permitted: %v)", want, err)
	}
	_, _ = pace.SetThreadNice(prev)
	return want, ""
}

// fsyncText names a run's fsync policy and, where it syncs, the inline
// bound: "group (inline <= 20µs)", "group (fsync thread)".
func fsyncText(policy string, inlineNs int64) string {
	switch {
	case policy == "none":
		return policy
	case inlineNs == 0:
		return policy + " (fsync thread)"
	}
	return fmt.Sprintf("%s (inline <= %v)", policy, time.Duration(inlineNs))
}
