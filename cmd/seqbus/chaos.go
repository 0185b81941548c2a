package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/chaos"
)

// runChaos parses the flags and runs internal/chaos on this binary.
func runChaos(args []string) error {
	cfg := chaos.Config{Engine: engine.NodeConfig(), Out: os.Stdout, Args: append([]string{"chaos"}, args...)}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.IntVar(&cfg.Nodes, "nodes", 3, "nodes in the cluster, 2..5")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the client's load runs; no fault starts in its last 3 s")
	fs.IntVar(&cfg.Rounds, "rounds", 0, "inject at most this many faults (0: as many as fit)")
	fs.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()%1_000_000), "draws the faults and their delays (printed, to run the same schedule again)")
	fs.Float64Var(&cfg.Rate, "rate", 2_000, "client commands per second")
	fs.StringVar(&cfg.Fsync, "fsync", "group", "the nodes' journal fsync policy: none, group, always")
	faults := fs.String("faults", "process", "faults to draw from, comma-separated: "+strings.Join(chaos.AllFaults, ", ")+
		"; or process (the first nine, kill-etcd for kill-witness with --arbiter etcd), network (root and nftables, in a network namespace of the run's own), disk (root, on ext4 filesystems of the run's own), all")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run's directory (logs, journals)")
	fs.StringVar(&cfg.Arbiter, "arbiter", "witness", "the lease's arbiter: witness, or etcd (a 3-member etcd cluster started by the run; kill-etcd in kill-witness's place)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Faults, err = chaos.ParseFaults(*faults, cfg.Arbiter); err != nil {
		return usagef("--faults: %v", err)
	}
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.Bin, err = os.Executable(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := chaos.Run(ctx, cfg); errors.Is(err, chaos.ErrInterrupted) {
		return errInterrupted
	} else {
		return err
	}
}
