package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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

// benchMachine is summary.json's "machine": what the machine is and how
// busy it was (load average before and after, CPU time stolen by the
// hypervisor over the command).
type benchMachine struct {
	bench.MachineInfo
	GOMAXPROCS int     `json:"gomaxprocs"`
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
	StealPct   float64 `json:"steal_pct"`
	cpu0       bench.CPUTimes
}

func newBenchMachine() *benchMachine {
	return &benchMachine{MachineInfo: bench.Machine(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		LoadBefore: bench.LoadAverage(), cpu0: bench.ReadCPUTimes()}
}

// finish reads the conditions at the end of the command.
func (m *benchMachine) finish() {
	m.LoadAfter = bench.LoadAverage()
	m.StealPct = bench.StealPercent(m.cpu0, bench.ReadCPUTimes())
}

func (m *benchMachine) text() string {
	return fmt.Sprintf("%s, GOMAXPROCS %d, load %.2f", machineText(m.MachineInfo), m.GOMAXPROCS, m.LoadBefore)
}

func (m *benchMachine) printConditions() {
	fmt.Printf("\nconditions: load average %.2f before, %.2f after; CPU steal %.2f%% over the run\n", m.LoadBefore, m.LoadAfter, m.StealPct)
}

// benchFlags are the flags `bench latency` and `bench throughput` share.
type benchFlags struct {
	out, idle, cpus, fsync, sizes *string
	standbys                      *int
	keep                          *bool
}

func addBenchFlags(fs *flag.FlagSet, fsyncDefault string) benchFlags {
	return benchFlags{
		out:      fs.String("out", "bench-out", "directory for .hgrm files and summary.json"),
		idle:     fs.String("idle", "block", "idle strategy of every node and the client: block, backoff, spin, yield"),
		cpus:     fs.String("cpus", "", "pin each process: role=cpu or role=cpu-cpu, comma-separated, roles witness, primary, standby (or standby1, standby2...), client; e.g. primary=1,standby=0,client=0 (default: unpinned, what a user gets)"),
		fsync:    fs.String("fsync", fsyncDefault, "journal fsync policies, comma-separated: none, group, always"),
		sizes:    fs.String("sizes", "32,256,1024", "command sizes in bytes, comma-separated (0: real 39-byte new orders that trade)"),
		standbys: fs.Int("standbys", 1, "standby processes (1..8)"),
		keep:     fs.Bool("keep", false, "keep each run's directory (logs, journals, traces) under --out"),
	}
}

// parsedBench is benchFlags checked.
type parsedBench struct {
	layout   layout
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
		return p, benchUsagef("--out is required")
	}
	if _, err := parseIdle(*f.idle); err != nil {
		return p, benchUsagef("--idle: %v", err)
	}
	if p.layout, err = parseLayout(*f.cpus); err != nil {
		return p, benchUsagef("--cpus: %v", err)
	}
	for role, cpus := range p.layout {
		for _, c := range cpus {
			if c >= runtime.NumCPU() {
				return p, benchUsagef("--cpus: %s=%d: this machine has CPUs 0..%d", role, c, runtime.NumCPU()-1)
			}
		}
	}
	for _, name := range strings.Split(*f.fsync, ",") {
		name = strings.TrimSpace(name)
		if _, err := parseFsync(name); err != nil {
			return p, benchUsagef("--fsync: %v", err)
		}
		p.fsyncs = append(p.fsyncs, name)
	}
	if p.sizes, err = parseInts(*f.sizes); err != nil {
		return p, benchUsagef("--sizes: %v", err)
	}
	for _, s := range p.sizes {
		if err := checkLoadSize(s); err != nil {
			return p, benchUsagef("--sizes: %v", err)
		}
	}
	if *f.standbys < 1 || *f.standbys > 8 {
		return p, benchUsagef("--standbys: want 1..8, got %d", *f.standbys)
	}
	p.standbys = *f.standbys
	for role := range p.layout {
		if n, _ := strconv.Atoi(strings.TrimPrefix(role, "standby")); cluster.IsStandbyN(role) && n > p.standbys {
			return p, benchUsagef("--cpus: %s but --standbys %d", role, p.standbys)
		}
	}
	return p, nil
}

// benchUsagef is a bad flag of `bench latency` or `bench throughput`,
// found before anything started: main exits with status 2 for it.
func benchUsagef(format string, args ...any) error { return usagef(format, args...) }

// benchUsage marks a flag parsing error (not --help) as a bad flag.
func benchUsage(err error) error {
	if err == nil || isHelp(err) {
		return err
	}
	return asUsage(err)
}

// latencyRun is one (size, fsync, auth) cell of `bench latency`.
type latencyRun struct {
	Size        int                           `json:"size_bytes"`
	Fsync       string                        `json:"fsync"`
	Auth        string                        `json:"auth"`
	Engine      string                        `json:"engine"`
	Idle        string                        `json:"idle"`
	Layout      string                        `json:"layout"`
	Standbys    int                           `json:"standbys"`
	Rate        float64                       `json:"rate_per_second"`
	Count       int                           `json:"count"`
	Achieved    float64                       `json:"achieved_per_second"`
	Stages      map[string]map[string]float64 `json:"stages_us"`
	RatioTo2Hop map[string]float64            `json:"end_to_end_over_floor_2hop"`
	RatioTo4Hop map[string]float64            `json:"end_to_end_over_floor_4hop"`
	// Floor2HopFrom and Floor4HopFrom name the idle strategy whose floor
	// was best at p50 (floor-2hop is floor-2hop-<that>).
	Floor2HopFrom string `json:"floor_2hop_from"`
	Floor4HopFrom string `json:"floor_4hop_from"`
	// Generator is the load client's own lateness: commands sent more
	// than 10 µs after their intended time.
	Generator  generatorInfo `json:"generator"`
	Processes  []processInfo `json:"processes"`
	Unanswered int           `json:"unanswered"`
	Unmatched  int           `json:"unmatched"`
	Files      []string      `json:"files"`
}

type generatorInfo struct {
	Sent     int     `json:"sent"`
	Late10us int     `json:"late_10us"`
	MaxLate  float64 `json:"max_late_us"`
}

func generatorOf(m *stagetrace.Merged) generatorInfo {
	h := m.Hist[stagetrace.StageIntendedToSent]
	g := generatorInfo{Sent: int(h.TotalCount()), MaxLate: float64(h.Max()) / nsPerUs}
	for _, b := range h.Distribution() {
		if b.From > 10_000 {
			g.Late10us += int(b.Count)
		}
	}
	return g
}

// floorSet is the floors of one size: every idle strategy at 2 and 4 hops
// and the best of each.
type floorSet struct {
	hist         map[string]*hdrhistogram.Histogram
	best2, best4 string // idle names
}

func runFloors(ctx context.Context, size int, rate float64, count int, idles []string, l layout, nice int, park bool) (*floorSet, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fl := &floorSet{hist: map[string]*hdrhistogram.Histogram{}}
	for _, hops := range []int{2, 4} {
		best := ""
		for _, idle := range idles {
			res, err := bench.RunFloor(ctx, bench.FloorConfig{Binary: self, Hops: hops, Idle: idle, Size: max(size, bench.MessageBytesDefault),
				Rate: rate, Count: count, Warmup: 1000, CPUs: l.FloorCPUs(hops), Nice: nice, Park: park})
			if err != nil && !errors.Is(err, bench.ErrLost) {
				return nil, fmt.Errorf("%s: %w", bench.FloorStage(hops, idle), err)
			}
			fl.hist[bench.FloorStage(hops, idle)] = res.Hist
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
	f.genNice = fs.Int("generator-nice", -10, "nice value of the load generator's thread, in the floor and the gated run alike (0: leave it; below 0 needs root, else it runs at 0 and says so): the nodes' wake-ups on a shared core otherwise preempt it at its send times")
	f.genPark = fs.Bool("generator-park", false, "the load generator parks on its socket between sends (seqbus client --park), in the floor and the gated run alike: fewer syscalls, a wake-up per answer")
	f.floorIdles = fs.String("floor-idles", "block,yield,spin", "idle strategies of the floor's hop processes (the floor is the best at p50): "+strings.Join(bench.FloorIdles, ", "))
	f.authMode = fs.String("auth", "off", "frame authentication: off, on, or both (each cell twice, with the MAC's cost as a ratio)")
	f.engineName = fs.String("engine", "matching", "the nodes' state machine: matching or none")
	return f
}

func (f *latencyFlags) check() error {
	switch {
	case !(*f.rate > 0 && *f.rate <= 1e6):
		return benchUsagef("--rate: want 0 < rate <= 1000000, got %v", *f.rate)
	case *f.count < 1 || *f.count > stagetrace.RowsMax/2:
		return benchUsagef("--count: want 1..%d, got %d", stagetrace.RowsMax/2, *f.count)
	case *f.warmup < 0 || *f.warmup > stagetrace.RowsMax/2:
		return benchUsagef("--warmup: want 0..%d, got %d", stagetrace.RowsMax/2, *f.warmup)
	case *f.floorCount < 1 || *f.floorCount > bench.PingPongCountMax:
		return benchUsagef("--floor-count: want 1..%d, got %d", bench.PingPongCountMax, *f.floorCount)
	case *f.engineName != "matching" && *f.engineName != "none":
		return benchUsagef("--engine: want matching or none, got %q", *f.engineName)
	case *f.genNice < -20 || *f.genNice > 19:
		return benchUsagef("--generator-nice: want -20..19, got %d", *f.genNice)
	}
	for _, name := range strings.Split(*f.floorIdles, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(bench.FloorIdles, name) {
			return benchUsagef("--floor-idles: unknown %q (want %s)", name, strings.Join(bench.FloorIdles, ", "))
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
		return benchUsagef("--auth: want off, on or both, got %q", *f.authMode)
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
	machine := newBenchMachine()
	nice, niceNote := probeGeneratorNice(*f.genNice)
	fmt.Printf("seqbus bench latency on %s\n%d commands at %.0f/s per run after %d of warm-up; idle %s; layout %s; %d standby(s); every role a separate process; generator thread nice %d%s\n",
		machine.text(), *f.count, *f.rate, *f.warmup, *bf.idle, p.layout, p.standbys, nice, niceNote)
	var runs []latencyRun
	for _, size := range p.sizes {
		floors, err := runFloors(ctx, size, *f.rate, *f.floorCount, f.idles, p.layout, nice, *f.genPark)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		for _, fsync := range p.fsyncs {
			cell := clusterConfig{Size: size, Fsync: fsync, Idle: *bf.idle, Engine: *f.engineName, Standbys: p.standbys, Layout: p.layout,
				Rate: *f.rate, Count: *f.count, Warmup: *f.warmup, Keep: *bf.keep, Out: *bf.out, GeneratorNice: nice, GeneratorPark: *f.genPark}
			cellRuns, err := latencyCell(ctx, cell, f.auths, floors, *bf.out)
			if err != nil {
				return err
			}
			runs = append(runs, cellRuns...)
		}
	}
	machine.finish()
	machine.printConditions()
	return writeSummary(*bf.out, map[string]any{"command": "latency", "args": args, "machine": machine, "idle": *bf.idle, "generator_nice": nice,
		"layout": p.layout.String(), "runs": runs})
}

// latencyCell runs one size and fsync policy once per auth mode, printing
// each run and the MAC's cost as a ratio.
func latencyCell(ctx context.Context, cell clusterConfig, auths []bool, floors *floorSet, out string) ([]latencyRun, error) {
	var runs []latencyRun
	var plain *latencyRun
	for _, withAuth := range auths {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cfg := cell
		cfg.Auth = withAuth
		res, err := runCluster(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("size %s fsync %s: %w", sizeName(cfg.Size), cfg.Fsync, err)
		}
		run, err := latencyRunOf(cfg, res, floors, out)
		if err != nil {
			return nil, err
		}
		printLatencyRun(run)
		if !withAuth {
			plain = &run
		} else if plain != nil {
			a, b := run.Stages[stagetrace.StageEndToEnd], plain.Stages[stagetrace.StageEndToEnd]
			fmt.Printf("  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", "with MAC / without", a["p50"]/b["p50"], a["p90"]/b["p90"], a["p99"]/b["p99"], a["p99.9"]/b["p99.9"], a["max"]/b["max"])
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
func latencyRunOf(cfg clusterConfig, res *clusterResult, floors *floorSet, out string) (latencyRun, error) {
	m := res.Merged
	run := latencyRun{Size: cfg.Size, Fsync: cfg.Fsync, Auth: authName(cfg.Auth), Engine: cfg.Engine, Idle: cfg.Idle, Layout: cfg.Layout.String(),
		Standbys: cfg.Standbys, Rate: cfg.Rate, Count: cfg.Count, Achieved: res.AchievedPerSec,
		Stages: map[string]map[string]float64{}, RatioTo2Hop: map[string]float64{}, RatioTo4Hop: map[string]float64{},
		Generator: generatorOf(m), Processes: res.Processes, Unanswered: max(m.Unanswered, int(res.Client.Unanswered)), Unmatched: m.Unmatched}
	dir := filepath.Join(out, fmt.Sprintf("latency-size%s-fsync-%s-auth-%s", sizeName(cfg.Size), cfg.Fsync, run.Auth))
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
	}
	for name, h := range hists {
		path, err := writeHGRM(dir, strings.ReplaceAll(name, ">", ""), h)
		if err != nil {
			return run, err
		}
		run.Files = append(run.Files, path)
		run.Stages[name] = pcts(h)
	}
	logPath, err := writeIntervalLog(dir, m)
	if err != nil {
		return run, err
	}
	run.Files = append(run.Files, logPath)
	slices.Sort(run.Files)
	if floors != nil {
		e2e := m.Hist[stagetrace.StageEndToEnd]
		f2, f4 := floors.hist["floor-2hop"], floors.hist["floor-4hop"]
		for _, q := range benchQuantiles {
			run.RatioTo2Hop[quantName(q)] = float64(e2e.ValueAtQuantile(q)) / float64(max(f2.ValueAtQuantile(q), 1))
			run.RatioTo4Hop[quantName(q)] = float64(e2e.ValueAtQuantile(q)) / float64(max(f4.ValueAtQuantile(q), 1))
		}
	}
	return run, nil
}

// latencyRows is the text table's order: floors, then the path.
func latencyRows(run latencyRun) []string {
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

func printLatencyRun(run latencyRun) {
	fmt.Printf("\nsize %s B, fsync %s, auth %s, engine %s: %.0f cmd/s achieved; %d of %d sent > 10 µs late (generator); %d unanswered\n",
		sizeName(run.Size), run.Fsync, run.Auth, run.Engine, run.Achieved, run.Generator.Late10us, run.Generator.Sent, run.Unanswered)
	fmt.Printf("  %-24s %9s %9s %9s %9s %9s\n", "µs", "p50", "p90", "p99", "p99.9", "max")
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
		fmt.Printf("  %-24s %9.1f %9.1f %9.1f %9.1f %9.1f\n", label, p["p50"], p["p90"], p["p99"], p["p99.9"], p["max"])
	}
	if len(run.RatioTo2Hop) > 0 {
		for _, r := range []struct {
			name string
			m    map[string]float64
		}{{"end-to-end / floor-2hop", run.RatioTo2Hop}, {"end-to-end / floor-4hop", run.RatioTo4Hop}} {
			fmt.Printf("  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", r.name, r.m["p50"], r.m["p90"], r.m["p99"], r.m["p99.9"], r.m["max"])
		}
	}
	printProcesses(run.Processes)
}

func printProcesses(ps []processInfo) {
	fmt.Print(processWindowNote)
	fmt.Printf("  %-10s %8s %6s %6s %10s %14s %14s %14s %14s\n", "process", "pid", "cpus", "procs", "cpu s", "cpu s/1M cmd",
		"mallocs/cmd", "syscalls/cmd", "(life) mallocs")
	for _, p := range ps {
		procs := "-"
		if p.GOMAXPROCS > 0 {
			procs = strconv.Itoa(p.GOMAXPROCS)
		}
		mallocs, syscalls, life := "-", "-", "-"
		if p.Window {
			mallocs, syscalls = strconv.FormatFloat(p.WindowMallocsPerCommand, 'f', 2, 64), strconv.FormatFloat(p.WindowSyscallsPerCommand, 'f', 2, 64)
		}
		if p.GOMAXPROCS > 0 { // set from the process's trace: the witness has none
			life = strconv.FormatFloat(p.MallocsPerCommand, 'f', 2, 64)
		}
		fmt.Printf("  %-10s %8d %6s %6s %10.2f %14.2f %14s %14s %14s\n", p.Role, p.Pid, p.CPUs, procs, p.CPUSeconds, p.CPUSPerMillion,
			mallocs, syscalls, life)
	}
}

// processWindowNote says what the per-process columns count.
const processWindowNote = `  mallocs/cmd, syscalls/cmd: the measured window only, over the measured commands: from the process's first
    handling of the first measured command (client: its answer; primary: sequencing it; standby: applying it)
    to its handling of the last (client: its answer; primary: releasing it; standby: applying it); "-": the
    window never closed. (life) mallocs: since the process began tracing, warm-up and drain in, over all sent.
`

// writeIntervalLog writes the end-to-end latency by second of intended
// send time as an HdrHistogram interval log (HistogramLogAnalyzer reads
// it; so does bench.SliceIntervalLog).
func writeIntervalLog(dir string, m *stagetrace.Merged) (string, error) {
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

// probeGeneratorNice says which nice value the generator can run at: the
// one asked for when this process may set it (root), else 0, with a note
// for the report.
func probeGeneratorNice(want int) (int, string) {
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
