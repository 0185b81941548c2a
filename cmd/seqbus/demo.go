package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/demo"
)

// nodeStatus is the part of status.json the commands read.
type nodeStatus = cluster.Status

// parseDemoFlags reads the demo's flags into internal/demo's Config.
func parseDemoFlags(args []string) (demo.Config, error) {
	var f demo.Config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Float64Var(&f.Rate, "rate", 5_000, "client commands per second")
	fs.DurationVar(&f.Duration, "duration", 8*time.Second, "how long the load runs")
	fs.DurationVar(&f.KillAfter, "kill-after", 3*time.Second, "SIGKILL the primary this long into the load (0: never)")
	fs.BoolVar(&f.Keep, "keep", false, "keep the demo's directory (logs, journals)")
	fs.BoolVar(&f.NoAuth, "no-auth", false, "run without frame authentication (by default the demo generates a key)")
	fs.StringVar(&f.Fsync, "fsync", "group", "the nodes' journal fsync policy: group (the nodes' default), always, or none (the standby's copy is the durability: a SIGKILL loses nothing either way, a power cut would)")
	fs.StringVar(&f.Record, "record", "", "write every output the client received here, one JSON line each (default: client.jsonl in the demo's directory)")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	return f, f.Check()
}

// runDemo runs internal/demo on this binary, printing to stdout.
func runDemo(args []string) error {
	cfg, err := parseDemoFlags(args)
	if err != nil {
		return err
	}
	if cfg.Bin, err = os.Executable(); err != nil {
		return err
	}
	cfg.Engine, cfg.Out = engine.NodeConfig(), os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, cfg); errors.Is(err, demo.ErrInterrupted) {
		return errInterrupted
	} else {
		return err
	}
}
