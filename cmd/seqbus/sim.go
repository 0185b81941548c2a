package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/seqbus/seqbus/sim"
)

// runSim is a soak outside CI: the deterministic simulator (package sim)
// over many seeds, printing seeds/second and what was covered. A failing
// seed replays bit for bit with `go test ./sim -run 'TestSim$' -seed=N -v`.
func runSim(args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	seeds := fs.Int("seeds", 1000, "how many seeds to run")
	from := fs.Uint64("from", 1, "first seed")
	workers := fs.Int("workers", runtime.NumCPU(), "seeds run in parallel (results do not depend on it)")
	mutation := fs.String("mutation", "none", "run with a safety mechanism off, to see the checker catch it: none, no-fencing, no-gating, lease-from-reply, no-quarantine")
	trace := fs.Uint64("trace", 0, "print the event log of this one seed instead")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(checkPositive("seeds", *seeds), checkPositive("workers", *workers)); err != nil {
		return err
	}
	m, err := sim.ParseMutation(*mutation)
	if err != nil {
		return usagef("--mutation: %v", err)
	}
	opts := sim.Options{Mutation: m}
	if *trace != 0 {
		opts.Trace = os.Stdout
		r := sim.Run(*trace, opts)
		for _, v := range r.Violations {
			fmt.Println("VIOLATION:", v)
		}
		if r.Failed() {
			return fmt.Errorf("seed %d failed", *trace)
		}
		return nil
	}
	fmt.Printf("seqbus sim: seeds %d..%d on %d workers, mutation %s\n", *from, *from+uint64(*seeds)-1, *workers, m)
	sum := sim.RunMany(*from, *seeds, *workers, opts, nil, func(r sim.Result) {
		if r.Failed() {
			fmt.Printf("seed %d FAILED: %v\n  replay: go test ./sim -run 'TestSim$' -seed=%d -mutation=%s -v\n", r.Seed, r.Violations[0], r.Seed, m)
		}
	})
	fmt.Println(sum.String())
	if len(sum.Failures) > 0 && m == sim.MutNone {
		return fmt.Errorf("%d of %d seeds failed", len(sum.Failures), sum.Seeds)
	}
	return nil
}
