package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/seqbus/seqbus/sim"
)

// runSim is a soak outside CI: the deterministic simulator (package sim)
// over many seeds, printing seeds/second and what was covered (sim.Soak).
// A failing seed replays bit for bit with `go test ./sim -run 'TestSim$'
// -seed=N -v` (the soak prints the flags its options need: -keyed,
// -nodes=N, ...). Ctrl-C ends a soak: the seeds under way finish and the
// summary of what ran is printed.
func runSim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	seeds := fs.Int("seeds", 1000, "how many seeds to run")
	from := fs.Uint64("from", 1, "first seed")
	workers := fs.Int("workers", runtime.NumCPU(), fmt.Sprintf("seeds run in parallel, 1..%d (results do not depend on it)", sim.SoakWorkersMax))
	mutation := fs.String("mutation", "none", "run with a safety mechanism off, to see the checker catch it: "+sim.MutationNames())
	nodes := fs.Int("nodes", sim.DefaultNodes, fmt.Sprintf("nodes in the simulated cluster, 2..%d (2: a primary and one standby)", sim.MaxNodes))
	keyed := fs.Bool("keyed", false, "one master key on every node, the witness and the clients: a MAC on every frame (a failing seed replays with -keyed)")
	inlineSync := fs.Bool("inline-sync", false, "every node fsyncs on its agent as it appends (seqbus node --fsync-inline on a fast disk), not at the group committer's step (a failing seed replays with -inline-sync)")
	graceful := fs.Bool("graceful", false, "half the crashes of the primary, and of a standby, are planned stops: the process closes, a primary gives its lease up and a standby tells its primary (a failing seed replays with -graceful)")
	moments := fs.Bool("moments", false, "also crash a node right after it was promoted, followed a new epoch or installed a snapshot, now and then (a failing seed replays with -moments)")
	stalls := fs.Bool("disk-stalls", false, "half the pauses hang a node's writeback instead: it runs on, nothing it writes becomes durable (a failing seed replays with -disk-stalls)")
	trace := fs.Uint64("trace", 0, "print the event log of this one seed instead")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := sim.ParseMutation(*mutation)
	if err != nil {
		return usagef("--mutation: %v", err)
	}
	cfg := sim.SoakConfig{From: *from, Seeds: *seeds, Workers: *workers, Options: sim.Options{Mutation: m, Knobs: sim.Knobs{Keyed: *keyed, Nodes: *nodes, InlineSync: *inlineSync, Graceful: *graceful, Moments: *moments, DiskStalls: *stalls}}}
	if err := cfg.Check(); err != nil {
		return usagef("%v", err)
	}
	if *trace != 0 {
		return sim.Replay(os.Stdout, *trace, cfg.Options)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := sim.Soak(ctx, os.Stdout, cfg)
	if err == nil && sum.Interrupted {
		err = fmt.Errorf("%w after %d of %d seeds", errInterrupted, sum.Seeds, *seeds)
	}
	return err
}
