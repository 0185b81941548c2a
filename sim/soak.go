package sim

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
)

// SoakWorkersMax bounds SoakConfig.Workers: each is a goroutine running
// one seed (tens of MB), and past the machine's CPUs more only queue.
const SoakWorkersMax = 256

// SoakConfig is a soak outside CI (`seqbus sim`): Seeds seeds from From on
// Workers goroutines.
type SoakConfig struct {
	From           uint64
	Seeds, Workers int
	Options        Options
}

// Check refuses a soak that cannot run: no seeds, workers outside
// 1..SoakWorkersMax, seeds past the last uint64, or a cluster size
// outside 2..MaxNodes.
func (c SoakConfig) Check() error {
	switch {
	case c.Options.Nodes != 0 && (c.Options.Nodes < 2 || c.Options.Nodes > MaxNodes):
		return fmt.Errorf("nodes %d: want 2..%d", c.Options.Nodes, MaxNodes)
	case c.Seeds < 1:
		return fmt.Errorf("seeds %d: want at least 1", c.Seeds)
	case c.Workers < 1 || c.Workers > SoakWorkersMax:
		return fmt.Errorf("workers %d: want 1..%d", c.Workers, SoakWorkersMax)
	case c.From > math.MaxUint64-uint64(c.Seeds-1):
		return fmt.Errorf("%d seeds from %d run past the last seed, %d", c.Seeds, c.From, uint64(math.MaxUint64))
	}
	return nil
}

// StatedBounds are the diagnoses of outcomes the README states as the
// product's bounds, not bugs (regressions.txt keeps a seed that shows
// each as known:..., and CI tolerates them): a client told TooOld for
// outputs its node's journal and snapshots no longer reach.
var StatedBounds = []string{DiagSessionTooOld}

// Soak runs c (RunMany), printing to w its range, each failed seed with
// the command that replays it (a seed that failed only by a stated bound
// as such, counted in Summary.Known), and the summary. Its error names
// the other failures of a run without a mutation (a mutation is meant to
// fail); an ended ctx stops it after the seeds under way
// (Summary.Interrupted).
func Soak(ctx context.Context, w io.Writer, c SoakConfig) (Summary, error) {
	if err := c.Check(); err != nil {
		return Summary{}, err
	}
	m := c.Options.Mutation
	keyed := ""
	if c.Options.Keyed {
		keyed = ", keyed"
	}
	if c.Options.InlineSync {
		keyed += ", inline fsync"
	}
	if c.Options.Graceful {
		keyed += ", planned stops"
	}
	if c.Options.Moments {
		keyed += ", moment crashes"
	}
	if c.Options.DiskStalls {
		keyed += ", hung disks"
	}
	fmt.Fprintf(w, "seqbus sim: seeds %d..%d on %d workers, %d nodes, mutation %s%s\n", c.From, c.From+uint64(c.Seeds-1), c.Workers, cmp.Or(c.Options.Nodes, DefaultNodes), m, keyed)
	sum := RunMany(ctx, c.From, c.Seeds, c.Workers, c.Options, StatedBounds, func(r Result) {
		switch {
		case r.Failed() && Tolerated(r, StatedBounds):
			fmt.Fprintf(w, "seed %d met a stated bound (not a bug): %v\n  replay: %s\n", r.Seed, r.Violations[0], r.ReplayCommand())
		case r.Failed():
			fmt.Fprintf(w, "seed %d FAILED: %v\n  replay: %s\n", r.Seed, r.Violations[0], r.ReplayCommand())
		}
	})
	fmt.Fprintln(w, sum.String())
	if sum.Failed > sum.Known && m == MutNone {
		return sum, fmt.Errorf("%d of %d seeds failed", sum.Failed-sum.Known, sum.Seeds)
	}
	return sum, nil
}

// ReplayCommand is the command that replays r's run bit for bit, with
// its event log.
func (r Result) ReplayCommand() string {
	c := fmt.Sprintf("go test ./sim -run 'TestSim$' -seed=%d -mutation=%s", r.Seed, r.Mutation)
	if r.Keyed {
		c += " -keyed"
	}
	if r.DatagramBytes != 0 {
		c += fmt.Sprintf(" -datagram-bytes=%d", r.DatagramBytes)
	}
	if r.Nodes != 0 {
		c += fmt.Sprintf(" -nodes=%d", r.Nodes)
	}
	if r.InlineSync {
		c += " -inline-sync"
	}
	if r.Graceful {
		c += " -graceful"
	}
	if r.Moments {
		c += " -moments"
	}
	if r.DiskStalls {
		c += " -disk-stalls"
	}
	if r.RejectProbes {
		c += " -reject-probes"
	}
	return c + " -v"
}

// Replay runs one seed with its event log on w, then its violations; the
// error says it failed.
func Replay(w io.Writer, seed uint64, opts Options) error {
	opts.Trace = w
	r := Run(seed, opts)
	for _, v := range r.Violations {
		fmt.Fprintln(w, "VIOLATION:", v)
	}
	if r.Failed() {
		return fmt.Errorf("seed %d failed", seed)
	}
	return nil
}
