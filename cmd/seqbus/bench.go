package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/seqbus/seqbus/auth"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/bench/gated"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

// nsPerUs: histograms record nanoseconds; .hgrm files are in µs.
const nsPerUs = 1000.0

func runBench(args []string) error {
	usage := func() {
		fmt.Fprint(os.Stderr, `usage: seqbus bench <latency|throughput|floor|compare> [flags]

  latency     fixed-rate load through the full gated path, an HDR histogram per stage,
              next to the raw UDP floor (2 and 4 hops) measured in the same run
  throughput  the most commands/s released end to end, then the latency at 50% and 90% of it
  floor       raw UDP ping-pong only, per idle strategy (netpoller, back-off, spin, busy-poll)
  compare     side-by-side percentiles of .hgrm files, with ratios, and --plot out.png|svg

Every command writes .hgrm files (HdrHistogram's percentile format) and a summary.json into --out.
`)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage()
		if len(args) == 0 {
			return usagef("a bench subcommand is required (latency, throughput, floor, compare)")
		}
		return errHelp
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "latency":
		return benchLatency(ctx, args[1:])
	case "throughput":
		return benchThroughput(ctx, args[1:])
	case "floor":
		return benchFloor(ctx, args[1:])
	case "compare":
		return benchCompare(args[1:])
	}
	return usagef("unknown bench subcommand %q (latency, throughput, floor, compare; see seqbus bench --help)", args[0])
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad number %q in %q", f, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFsyncs(s string) ([]journal.SyncPolicy, error) {
	var out []journal.SyncPolicy
	for _, f := range strings.Split(s, ",") {
		p, err := parseFsync(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func sizeName(size int) string {
	if size == 0 {
		return "order39"
	}
	return strconv.Itoa(size)
}

// writeHGRM writes h (ns) as dir/name.hgrm in µs.
func writeHGRM(dir, name string, h *hdrhistogram.Histogram) (string, error) {
	path := filepath.Join(dir, name+".hgrm")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := bench.WriteHGRM(f, h, nsPerUs); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

type benchCommon struct {
	out      *string
	idle     *string
	busyPoll *time.Duration
}

func addCommon(fs *flag.FlagSet) benchCommon {
	return benchCommon{
		out:      fs.String("out", "bench-out", "directory for .hgrm files and summary.json"),
		idle:     fs.String("idle", "block", "receive idle strategy of every loop: block, backoff, spin, yield"),
		busyPoll: fs.Duration("busy-poll", 0, "SO_BUSY_POLL on every socket (loopback has no NAPI queue: expect no effect there)"),
	}
}

// check is the common flags' validation, run before setup creates --out.
func (c benchCommon) check() error {
	return firstError(checkRequired("out", *c.out), checkIdle("idle", *c.idle), checkNonNegative("busy-poll", *c.busyPoll))
}

// checkCommandSize: 0 (a real order) or a payload that fits a datagram.
func checkCommandSize(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("bad number %q", v)
	}
	if maxSize := wire.DefaultDatagramLen - wire.HeaderLen - 8; n != 0 && (n <= engine.CommandHeaderLen || n > maxSize) {
		return fmt.Errorf("size %d: want 0 (a real 39-byte order) or %d..%d", n, engine.CommandHeaderLen+1, maxSize)
	}
	return nil
}

func checkFsyncValue(v string) error { _, err := parseFsync(v); return err }
func checkIdleValue(v string) error  { _, err := parseIdle(v); return err }

func (c benchCommon) setup() (bus.Idle, bus.Tuning, error) {
	idle, err := parseIdle(*c.idle)
	if err != nil {
		return idle, bus.Tuning{}, err
	}
	if err := os.MkdirAll(*c.out, 0o755); err != nil {
		return idle, bus.Tuning{}, err
	}
	return idle, bus.Tuning{BusyPollUs: int(*c.busyPoll / time.Microsecond)}, nil
}

// latencyRun is one (size, fsync) cell of `bench latency`.
type latencyRun struct {
	Size          int                           `json:"size_bytes"`
	Fsync         string                        `json:"fsync"`
	Auth          string                        `json:"auth"`
	Rate          float64                       `json:"rate_per_second"`
	Count         int                           `json:"count"`
	Achieved      float64                       `json:"achieved_per_second"`
	MallocsPerCmd float64                       `json:"mallocs_per_command"`
	Stages        map[string]map[string]float64 `json:"stages_us"`
	RatioTo2Hop   map[string]float64            `json:"end_to_end_over_floor_2hop"`
	RatioTo4Hop   map[string]float64            `json:"end_to_end_over_floor_4hop"`
	Files         []string                      `json:"files"`
}

var benchQuantiles = []float64{50, 90, 99, 99.9, 99.99, 100}

func quantName(q float64) string {
	if q == 100 {
		return "max"
	}
	return "p" + strconv.FormatFloat(q, 'f', -1, 64)
}

func pcts(h *hdrhistogram.Histogram) map[string]float64 {
	m := map[string]float64{}
	for _, q := range benchQuantiles {
		m[quantName(q)] = float64(h.ValueAtQuantile(q)) / nsPerUs
	}
	return m
}

func benchLatency(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench latency", flag.ContinueOnError)
	sizesFlag := fs.String("sizes", "32,256,1024", "command sizes in bytes (0: a real 39-byte new order)")
	fsyncFlag := fs.String("fsync", "none,group", "journal fsync policies")
	rate := fs.Float64("rate", 10_000, "commands per second (fixed rate; latency from each intended send time)")
	count := fs.Int("count", 100_000, "commands per run")
	floorCount := fs.Int("floor-count", 50_000, "round trips for each raw UDP floor")
	warmup := fs.Int("warmup", 5000, "commands sent first at the same rate and not recorded")
	authMode := fs.String("auth", "off", "frame authentication: off, on, or both (each cell twice, with the MAC's cost as a ratio)")
	c := addCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkEach("sizes", *sizesFlag, checkCommandSize), checkEach("fsync", *fsyncFlag, checkFsyncValue),
		checkPositive("rate", *rate), checkPositive("count", *count), checkPositive("floor-count", *floorCount),
		checkNonNegative("warmup", *warmup), checkOneOf("auth", *authMode, "off", "on", "both"), c.check(),
	); err != nil {
		return err
	}
	sizes, err := parseInts(*sizesFlag)
	if err != nil {
		return fmt.Errorf("--sizes: %v", err)
	}
	policies, err := parseFsyncs(*fsyncFlag)
	if err != nil {
		return err
	}
	idle, tuning, err := c.setup()
	if err != nil {
		return err
	}
	var keys []*auth.MasterKey
	switch *authMode {
	case "off":
		keys = []*auth.MasterKey{nil}
	case "on", "both":
		k, err := auth.GenerateMasterKey(nil)
		if err != nil {
			return err
		}
		keys = []*auth.MasterKey{&k}
		if *authMode == "both" {
			keys = []*auth.MasterKey{nil, &k}
		}
	default:
		return fmt.Errorf("--auth: want off, on or both, got %q", *authMode)
	}
	machine := bench.Machine()
	fmt.Printf("seqbus bench latency on %s: %d commands at %.0f/s per run, idle %s\n", machineText(machine), *count, *rate, *c.idle)
	var runs []latencyRun
	for _, size := range sizes {
		floors := map[int]*hdrhistogram.Histogram{}
		for _, hops := range []int{2, 4} {
			pp, err := bench.PingPong(ctx, bench.PingPongConfig{MessageBytes: max(size, 39), Count: *floorCount, Warmup: 1000,
				RatePerSecond: *rate, Hops: hops, Idle: idle, Tuning: tuning})
			if err != nil {
				return fmt.Errorf("floor %d hops: %w", hops, err)
			}
			floors[hops] = pp.Histogram
		}
		for _, pol := range policies {
			var plain *latencyRun
			for _, key := range keys {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				res, err := gated.Run(ctx, gated.Config{Size: size, Fsync: pol, Rate: *rate, Count: *count + *warmup, Warmup: *warmup, Idle: idle, Tuning: tuning, Key: key})
				if err != nil {
					return fmt.Errorf("size %d fsync %s: %w", size, pol, err)
				}
				authName := "off"
				if key != nil {
					authName = "mac"
				}
				dir := filepath.Join(*c.out, fmt.Sprintf("latency-size%s-fsync-%s-auth-%s", sizeName(size), pol, authName))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				run := latencyRun{Size: size, Fsync: pol.String(), Auth: authName, Rate: *rate, Count: *count, Achieved: res.RatePerSec,
					MallocsPerCmd: res.MallocsPerCmd, Stages: map[string]map[string]float64{},
					RatioTo2Hop: map[string]float64{}, RatioTo4Hop: map[string]float64{}}
				hists := map[string]*hdrhistogram.Histogram{"floor-2hop": floors[2], "floor-4hop": floors[4]}
				for _, s := range gated.Stages {
					hists[s] = res.Hist[s]
				}
				for name, h := range hists {
					file := strings.NewReplacer(">", "", " ", "-", "(", "", ")", "").Replace(name)
					path, err := writeHGRM(dir, file, h)
					if err != nil {
						return err
					}
					run.Files = append(run.Files, path)
					run.Stages[name] = pcts(h)
				}
				logPath, err := writeIntervalLog(dir, res)
				if err != nil {
					return err
				}
				run.Files = append(run.Files, logPath)
				e2e := res.Hist[gated.StageEndToEnd]
				for _, q := range benchQuantiles {
					run.RatioTo2Hop[quantName(q)] = float64(e2e.ValueAtQuantile(q)) / float64(max(floors[2].ValueAtQuantile(q), 1))
					run.RatioTo4Hop[quantName(q)] = float64(e2e.ValueAtQuantile(q)) / float64(max(floors[4].ValueAtQuantile(q), 1))
				}
				printLatencyRun(run, hists)
				if key == nil {
					plain = &run
				} else if plain != nil {
					e2eMAC, e2ePlain := run.Stages[gated.StageEndToEnd], plain.Stages[gated.StageEndToEnd]
					fmt.Printf("  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", "with MAC / without", e2eMAC["p50"]/e2ePlain["p50"], e2eMAC["p90"]/e2ePlain["p90"],
						e2eMAC["p99"]/e2ePlain["p99"], e2eMAC["p99.9"]/e2ePlain["p99.9"], e2eMAC["max"]/e2ePlain["max"])
				}
				runs = append(runs, run)
			}
		}
	}
	return writeSummary(*c.out, map[string]any{"command": "latency", "machine": machine, "idle": *c.idle, "runs": runs})
}

func printLatencyRun(run latencyRun, hists map[string]*hdrhistogram.Histogram) {
	fmt.Printf("\nsize %s B, fsync %s, auth %s: %.0f cmd/s achieved, %.2f mallocs/command (whole process)\n",
		sizeName(run.Size), run.Fsync, run.Auth, run.Achieved, run.MallocsPerCmd)
	fmt.Printf("  %-24s %9s %9s %9s %9s %9s\n", "µs", "p50", "p90", "p99", "p99.9", "max")
	order := append([]string{"floor-2hop", "floor-4hop"}, gated.Stages...)
	for _, name := range order {
		p := run.Stages[name]
		fmt.Printf("  %-24s %9.1f %9.1f %9.1f %9.1f %9.1f\n", name, p["p50"], p["p90"], p["p99"], p["p99.9"], p["max"])
	}
	fmt.Printf("  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", "end-to-end / 2-hop", run.RatioTo2Hop["p50"], run.RatioTo2Hop["p90"], run.RatioTo2Hop["p99"], run.RatioTo2Hop["p99.9"], run.RatioTo2Hop["max"])
	fmt.Printf("  %-24s %9.2f %9.2f %9.2f %9.2f %9.2f\n", "end-to-end / 4-hop", run.RatioTo4Hop["p50"], run.RatioTo4Hop["p90"], run.RatioTo4Hop["p99"], run.RatioTo4Hop["p99.9"], run.RatioTo4Hop["max"])
}

// writeIntervalLog writes the end-to-end latency by second as an
// HdrHistogram interval log (HistogramLogAnalyzer reads it; so does
// bench.SliceIntervalLog).
func writeIntervalLog(dir string, res *gated.Result) (string, error) {
	path := filepath.Join(dir, "end-to-end.hlog")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	l, err := bench.NewIntervalLog(f, res.StartUnixMs, "seqbus bench latency: end-to-end ns by second of intended send time")
	if err == nil {
		for i, h := range res.Intervals {
			if h.TotalCount() == 0 {
				continue // the warm-up
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

func writeSummary(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and the .hgrm files beside it (compare them with `seqbus bench compare --plot out.png A.hgrm B.hgrm`)\n", path)
	return nil
}

type throughputRun struct {
	Size          int                `json:"size_bytes"`
	Fsync         string             `json:"fsync"`
	Idle          string             `json:"idle"`
	MaxPerSec     float64            `json:"max_released_per_second"`
	MallocsPerCmd float64            `json:"mallocs_per_command"`
	At50          map[string]float64 `json:"latency_us_at_50pct"`
	At90          map[string]float64 `json:"latency_us_at_90pct"`
}

func benchThroughput(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	sizesFlag := fs.String("sizes", "32,256,1024", "command sizes in bytes (0: a real 39-byte new order)")
	fsyncFlag := fs.String("fsync", "none", "journal fsync policies")
	idles := fs.String("idles", "backoff,spin", "idle strategies to compare (spin: busy-polling receive loops)")
	count := fs.Int("count", 300_000, "commands in the flat-out run")
	windowBytes := fs.Int("window-bytes", 1<<20, "command bytes in flight at most in the flat-out run (the load client does not resend: more than the sockets hold is lost, not queued)")
	latSeconds := fs.Float64("latency-seconds", 3, "length of the runs at 50% and 90% of the maximum")
	c := addCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkEach("sizes", *sizesFlag, checkCommandSize), checkEach("fsync", *fsyncFlag, checkFsyncValue),
		checkEach("idles", *idles, checkIdleValue), checkPositive("count", *count), checkPositive("window-bytes", *windowBytes),
		checkPositive("latency-seconds", *latSeconds), c.check(),
	); err != nil {
		return err
	}
	sizes, err := parseInts(*sizesFlag)
	if err != nil {
		return fmt.Errorf("--sizes: %v", err)
	}
	policies, err := parseFsyncs(*fsyncFlag)
	if err != nil {
		return err
	}
	if _, _, err := c.setup(); err != nil {
		return err
	}
	machine := bench.Machine()
	fmt.Printf("seqbus bench throughput on %s\n", machineText(machine))
	fmt.Printf("%-8s %-6s %-8s %12s %10s | %-28s | %-28s\n", "size", "fsync", "idle", "max cmd/s", "mallocs", "at 50%: p50 / p99 / p99.9 µs", "at 90%: p50 / p99 / p99.9 µs")
	var runs []throughputRun
	for _, idleName := range strings.Split(*idles, ",") {
		idle, err := parseIdle(strings.TrimSpace(idleName))
		if err != nil {
			return err
		}
		tuning := bus.Tuning{BusyPollUs: int(*c.busyPoll / time.Microsecond)}
		for _, size := range sizes {
			for _, pol := range policies {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				window := max(*windowBytes/max(size, 39), 64)
				res, err := gated.Run(ctx, gated.Config{Size: size, Fsync: pol, Count: *count, Window: window, Idle: idle, Tuning: tuning})
				if err != nil {
					return fmt.Errorf("flat out, size %d: %w", size, err)
				}
				run := throughputRun{Size: size, Fsync: pol.String(), Idle: idleName, MaxPerSec: res.RatePerSec, MallocsPerCmd: res.MallocsPerCmd}
				for i, frac := range []float64{0.5, 0.9} {
					rate := res.RatePerSec * frac
					n := max(int(rate**latSeconds), 1000)
					lr, err := gated.Run(ctx, gated.Config{Size: size, Fsync: pol, Rate: rate, Count: n + n/5, Warmup: n / 5, Idle: idle, Tuning: tuning})
					if err != nil {
						return fmt.Errorf("at %.0f%%, size %d: %w", frac*100, size, err)
					}
					h := lr.Hist[gated.StageEndToEnd]
					dir := filepath.Join(*c.out, fmt.Sprintf("throughput-size%s-fsync-%s-idle-%s", sizeName(size), pol, idleName))
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return err
					}
					if _, err := writeHGRM(dir, fmt.Sprintf("end-to-end-at-%.0fpct", frac*100), h); err != nil {
						return err
					}
					if i == 0 {
						run.At50 = pcts(h)
					} else {
						run.At90 = pcts(h)
					}
				}
				fmt.Printf("%-8s %-6s %-8s %12.0f %10.2f | %8.0f / %8.0f / %8.0f | %8.0f / %8.0f / %8.0f\n",
					sizeName(size), pol, idleName, run.MaxPerSec, run.MallocsPerCmd,
					run.At50["p50"], run.At50["p99"], run.At50["p99.9"], run.At90["p50"], run.At90["p99"], run.At90["p99.9"])
				runs = append(runs, run)
			}
		}
	}
	return writeSummary(*c.out, map[string]any{"command": "throughput", "machine": machine, "runs": runs})
}

func benchFloor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench floor", flag.ContinueOnError)
	size := fs.Int("size", 32, "message bytes")
	count := fs.Int("count", 100_000, "round trips per strategy")
	rate := fs.Float64("rate", 10_000, "pings per second (0: back to back)")
	idles := fs.String("idles", "block,backoff,spin", "idle strategies to compare")
	hops := fs.Int("hops", 2, "2 (client→echo→client) or 4 (client→A→B→A→client)")
	c := addCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkRange("size", *size, bench.MessageBytesMin, bench.MessageBytesMax), checkPositive("count", *count),
		checkNonNegative("rate", *rate), checkEach("idles", *idles, checkIdleValue), checkOneOf("hops", strconv.Itoa(*hops), "2", "4"),
		c.check(),
	); err != nil {
		return err
	}
	if _, _, err := c.setup(); err != nil {
		return err
	}
	machine := bench.Machine()
	fmt.Printf("seqbus bench floor on %s: %d-byte raw UDP ping-pong, %d hops, %d round trips at %.0f/s\n", machineText(machine), *size, *hops, *count, *rate)
	var series []bench.Named
	var sums []bench.Summary
	for _, name := range strings.Split(*idles, ",") {
		name = strings.TrimSpace(name)
		idle, err := parseIdle(name)
		if err != nil {
			return err
		}
		tuning := bus.Tuning{BusyPollUs: int(*c.busyPoll / time.Microsecond)}
		pp, err := bench.PingPong(ctx, bench.PingPongConfig{MessageBytes: *size, Count: *count, Warmup: 1000, RatePerSecond: *rate, Hops: *hops, Idle: idle, Tuning: tuning})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := writeHGRM(*c.out, "floor-"+name, pp.Histogram); err != nil {
			return err
		}
		series = append(series, bench.Named{Name: name, Dist: bench.FromHistogram(pp.Histogram, nsPerUs)})
		sums = append(sums, bench.NewSummary(name, pp.Histogram, nsPerUs))
	}
	t, err := bench.Compare(series)
	if err != nil {
		return err
	}
	if err := t.WriteText(os.Stdout); err != nil {
		return err
	}
	return writeSummary(*c.out, map[string]any{"command": "floor", "machine": machine, "hops": *hops, "table": t, "summaries": sums})
}

func benchCompare(args []string) error {
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	plotPath := fs.String("plot", "", "draw the percentile spectrum into this .png or .svg")
	title := fs.String("title", "seqbus latency by percentile", "plot title")
	jsonOut := fs.Bool("json", false, "print the table as JSON")
	logY := fs.Bool("log-latency", true, "log scale for latency in the plot")
	// Files come after the flags; let flag stop at the first file.
	if err := parseQuiet(fs, args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return usagef("usage: seqbus bench compare [--plot out.png] A.hgrm B.hgrm ... (the first is the baseline)")
	}
	if ext := filepath.Ext(*plotPath); *plotPath != "" && ext != ".png" && ext != ".svg" {
		return usagef("--plot must name a .png or .svg file, got %q", *plotPath)
	}
	var series []bench.Named
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		d, err := bench.ReadHGRM(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".hgrm")
		if parent := filepath.Base(filepath.Dir(path)); parent != "." && parent != "/" {
			name = parent + "/" + name
		}
		series = append(series, bench.Named{Name: name, Dist: d})
	}
	t, err := bench.Compare(series)
	if err != nil {
		return err
	}
	if *jsonOut {
		b, err := json.MarshalIndent(t, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(b))
	} else if err := t.WriteText(os.Stdout); err != nil {
		return err
	}
	if *plotPath != "" {
		if err := bench.PlotPercentilesWith(*plotPath, bench.PlotOptions{Title: *title, LogLatency: *logY}, series); err != nil {
			return err
		}
		fmt.Printf("plot: %s\n", *plotPath)
	}
	return nil
}

func machineText(m bench.MachineInfo) string {
	cpu := m.CPUModel
	if cpu == "" {
		cpu = m.GOARCH
	}
	return fmt.Sprintf("%s, %d CPUs, %s, %s", cpu, m.NumCPU, m.Kernel, m.GoVersion)
}
