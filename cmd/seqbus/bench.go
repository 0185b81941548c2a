package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/bench/suite"
	"github.com/seqbus/seqbus/bus"
)

func runBench(args []string) error {
	usage := func() {
		fmt.Fprint(os.Stderr, `usage: seqbus bench <latency|throughput|floor|compare> [flags]

  latency     fixed-rate load through the full gated path, the witness, primary, standbys
              and load client as separate processes: an HDR histogram per stage, next to
              the raw UDP floor (2 and 4 hops, separate processes) measured in the same run
  throughput  the most commands/s released (matching engine) and replicated (--engine none),
              flat out, then the latency at 25%, 50% and 90% of it
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
	case "latency", "throughput":
		run := benchLatency
		if args[0] == "throughput" {
			run = benchThroughput
		}
		return run(ctx, args[1:])
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

func (c benchCommon) check() error {
	return firstError(checkRequired("out", *c.out), checkIdle("idle", *c.idle), checkNonNegative("busy-poll", *c.busyPoll))
}

// checkFloorIdle: one of the floor's hop idle strategies.
func checkFloorIdle(v string) error {
	if slices.Contains(bench.FloorIdles, v) {
		return nil
	}
	return fmt.Errorf("%q: want one of %s", v, strings.Join(bench.FloorIdles, ", "))
}

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

func benchFloor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench floor", flag.ContinueOnError)
	size := fs.Int("size", 32, "message bytes")
	count := fs.Int("count", 100_000, "round trips per strategy")
	rate := fs.Float64("rate", 10_000, "pings per second on the generator's schedule (0: closed loop, back to back)")
	idles := fs.String("idles", "block,yield,spin,backoff", "idle strategies of the hop processes: "+strings.Join(bench.FloorIdles, ", "))
	hops := fs.Int("hops", 2, "2 (client→echo→client) or 4 (client→A→B→A→client)")
	c := addCommon(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkRange("size", *size, bench.MessageBytesMin, bench.MessageBytesMax), checkRange("count", *count, 1, bench.PingPongCountMax-suite.FloorWarmup),
		checkRange("rate", *rate, 0, bench.RatePerSecondMax), checkEach("idles", *idles, checkFloorIdle), checkOneOf("hops", strconv.Itoa(*hops), "2", "4"),
		c.check(),
	); err != nil {
		return err
	}
	if _, _, err := c.setup(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	machine := bench.Machine()
	fmt.Printf("seqbus bench floor on %s: %d-byte raw UDP ping-pong, %d hops in separate processes, %d round trips at %.0f/s\n", suite.MachineText(machine), *size, *hops, *count, *rate)
	var names []string
	for _, name := range strings.Split(*idles, ",") {
		names = append(names, strings.TrimSpace(name))
	}
	res, err := suite.RunFloorSuite(ctx, suite.FloorConfig{Bin: self, Hops: *hops, Size: *size, Count: *count, Rate: *rate, Idles: names, Dir: *c.out, Out: os.Stdout})
	if err != nil {
		return err
	}
	t, sums := res.Table, res.Summaries
	if err := t.WriteText(os.Stdout); err != nil {
		return err
	}
	return suite.WriteSummary(os.Stdout, *c.out, map[string]any{"command": "floor", "machine": machine, "hops": *hops, "table": t, "summaries": sums})
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
	series, err := suite.ReadHGRMs(files)
	if err != nil {
		return err
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
