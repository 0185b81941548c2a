package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/drill"
)

// runDrill parses the drill's flags and runs the scenarios of
// internal/drill, printing their timelines and verdicts.
func runDrill(args []string) error {
	if len(args) > 0 && args[0] == "node" {
		// A node with the drill's unsafe switches, started by the drill.
		return runNodeWith("drill node", args[1:], true)
	}
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seqbus drill [--scenario NAME|all] [flags]\n\nscenarios:\n")
		for _, s := range drill.Scenarios {
			fmt.Fprintf(fs.Output(), "  %-11s %s\n", s.Name, s.Title)
		}
		fmt.Fprintf(fs.Output(), "\nThe unsafe switches (--unsafe-no-fencing, --unsafe-no-gating) exist only here, on the nodes\n"+
			"a drill starts (`seqbus drill node ...`); `seqbus node` has none.\n\nflags:\n")
		fs.PrintDefaults()
	}
	which := fs.String("scenario", "all", "pause, no-fencing, no-gating, or all")
	rate := fs.Float64("rate", 3_000, "client commands per second")
	keep := fs.Bool("keep", false, "keep each drill's directory (logs, journals)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRate("rate", *rate); err != nil {
		return err
	}
	run := drill.Select(*which)
	if len(run) == 0 {
		return usagef("--scenario: unknown %q (pause, no-fencing, no-gating, all)", *which)
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return drill.RunAll(ctx, run, drill.Config{Bin: bin, Rate: *rate, Keep: *keep, Engine: engine.NodeConfig(), Out: os.Stdout})
}
