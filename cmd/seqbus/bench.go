package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/seqbus/seqbus/bench"
	"github.com/seqbus/seqbus/bench/suite"
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

func benchFloor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench floor", flag.ContinueOnError)
	s := &suite.FloorSettings{}
	fs.IntVar(&s.Size, "size", 32, "message bytes")
	fs.IntVar(&s.Count, "count", 100_000, "round trips per strategy")
	fs.Float64Var(&s.Rate, "rate", 10_000, "pings per second on the generator's schedule (0: closed loop, back to back)")
	fs.StringVar(&s.Idles, "idles", "block,yield,spin,backoff", "idle strategies of the hop processes: "+strings.Join(bench.FloorIdles, ", "))
	fs.IntVar(&s.Hops, "hops", 2, "2 (client→echo→client) or 4 (client→A→B→A→client)")
	fs.StringVar(&s.Out, "out", "bench-out", "directory for .hgrm files and summary.json")
	fs.DurationVar(&s.BusyPoll, "busy-poll", 0, "SO_BUSY_POLL on every socket, the client's and each hop's (needs CAP_NET_ADMIN to raise; loopback has no NAPI queue: expect no effect there)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfg, err := s.Config(self, os.Stdout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Out, 0o755); err != nil {
		return err
	}
	machine := bench.Machine()
	fmt.Printf("seqbus bench floor on %s: %d-byte raw UDP ping-pong, %d hops in separate processes, %d round trips at %.0f/s\n", suite.MachineText(machine), s.Size, s.Hops, s.Count, s.Rate)
	res, err := suite.RunFloorSuite(ctx, cfg)
	if err != nil {
		return err
	}
	t, sums := res.Table, res.Summaries
	if err := t.WriteText(os.Stdout); err != nil {
		return err
	}
	return suite.WriteSummary(os.Stdout, s.Out, map[string]any{"command": "floor", "machine": machine, "hops": s.Hops, "busy_poll_us": cfg.BusyPollUs, "table": t, "summaries": sums})
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
