package sim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Summary is what a batch of seeds did.
type Summary struct {
	From     uint64
	Seeds    int
	Failed   int      // seeds that failed
	Failures []Result // the first FailuresKept of them, by seed
	Known    int      // failures explained by a known bug (see Tolerated)
	// Interrupted: the context ended before every seed ran; Seeds is
	// how many did, from From on.
	Interrupted bool
	Elapsed     time.Duration
	Stats       Stats
}

// SeedsPerSecond is the batch's throughput on this machine.
func (s Summary) SeedsPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Seeds) / s.Elapsed.Seconds()
}

// String reports throughput and coverage in one paragraph.
func (s Summary) String() string {
	st := s.Stats
	cut := ""
	if s.Interrupted {
		cut = " (interrupted)"
	}
	return fmt.Sprintf("%d seeds from %d in %v%s (%.1f seeds/s): %d failed (%d by known bugs)\n"+
		"covered: %d commands (%d answered), %d datagrams (%d lost, %d duplicated, %d cut by partitions), "+
		"%d promotions (highest epoch %d), %d crashes (%d at moments), %d hung disks (%d found stalled), %d planned stops (%d standbys' announced), %d probes (%d refused: %d standbys found gone), %d leases given up, %d pauses, %d witness crashes, %d partitions, %d delay spikes, %d snapshots installed, %d releases, %d stale frames refused by the clients",
		s.Seeds, s.From, s.Elapsed.Round(time.Millisecond), cut, s.SeedsPerSecond(), s.Failed, s.Known,
		st.Commands, st.Answered, st.Datagrams, st.Lost, st.Duplicated, st.Partitioned,
		st.Promotions, st.HighestEpoch, st.Crashes, st.MomentCrashes, st.DiskHangs, st.DiskStalls, st.Stops, st.StandbysLeaving, st.Probes, st.ProbesRefused, st.StandbysUnreachable, st.LeasesReleased, st.Pauses, st.WitnessCrashes, st.Partitions, st.Spikes, st.SnapshotsInstalled, st.Releases, st.StaleRefused)
}

// RunMany runs seeds from, from+1, ... (n of them) on workers goroutines
// (each run is single-threaded and independent, so the results do not
// depend on workers), calling each (if not nil) with every result in seed
// order. known lists diagnosis signatures of open bugs; failures that
// carry only those are counted in Known (see Tolerated).
//
// Memory does not grow with n: results are taken in seed order as they
// finish, and a worker starts a seed only while fewer than
// reorderPerWorker*workers finished results wait for a slower, earlier
// seed; only the first FailuresKept failures are kept (each counts in
// Failed, and each is passed to each). A soak of millions of seeds runs
// in the memory of a few dozen.
//
// When ctx ends, no seed starts; the ones under way finish, and the
// summary counts the seeds taken in order (Seeds, Interrupted).
func RunMany(ctx context.Context, from uint64, n, workers int, opts Options, known []string, each func(Result)) Summary {
	workers = max(workers, 1)
	start := time.Now()
	type done struct {
		i int
		r Result
	}
	next, out := make(chan int), make(chan done, workers)
	window := make(chan struct{}, reorderPerWorker*workers) // a token per seed started and not yet taken in order
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out <- done{i, Run(from+uint64(i), opts)}
			}
		}()
	}
	started := make(chan int, 1) // how many seeds the feeder handed out
	go func() {
		defer close(next)
		i := 0
		defer func() { started <- i }()
		for ; i < n; i++ {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	sum := Summary{From: from}
	waiting := make(map[int]Result, cap(window))
	limit := n // lowered to the seeds started once ctx ends
	for want := 0; want < limit; {
		var d done
		select {
		case d = <-out:
		case limit = <-started:
			if limit < n {
				sum.Interrupted = true
			}
			continue
		}
		waiting[d.i] = d.r
		for r, ok := waiting[want]; ok; r, ok = waiting[want] {
			delete(waiting, want)
			<-window
			want++
			sum.Seeds++
			sum.take(r, known)
			if each != nil {
				each(r)
			}
		}
	}
	wg.Wait()
	sum.Elapsed = time.Since(start)
	return sum
}

// reorderPerWorker bounds, per worker, the finished results RunMany holds
// while it waits for an earlier seed.
const reorderPerWorker = 8

// FailuresKept bounds Summary.Failures: a mutation soak fails every seed,
// and a failure's Result carries its schedule; past the bound failures are
// counted (Failed, Known), not kept.
const FailuresKept = 1000

// take adds one result, in seed order, to the summary.
func (s *Summary) take(r Result, known []string) {
	s.Stats.Add(r.Stats)
	if r.Failed() {
		s.Failed++
		if len(s.Failures) < FailuresKept {
			s.Failures = append(s.Failures, r)
		}
		if Tolerated(r, known) {
			s.Known++
		}
	}
}

// Tolerated reports whether every violation of r carries one of the known
// diagnosis signatures: the failure is an open, recorded bug rather than a
// new one.
func Tolerated(r Result, known []string) bool {
	if !r.Failed() {
		return true
	}
	for _, v := range r.Violations {
		ok := false
		for _, k := range known {
			if k != "" && strings.Contains(v, k) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Regression is one line of testdata/regressions.txt: a seed that once
// failed, the mutation it ran with, and what is expected of it now.
type Regression struct {
	Seed     uint64
	Mutation Mutation
	// Known is the diagnosis signature of an open bug this seed shows
	// (empty: the seed must pass).
	Known string
	Note  string
	// Knobs: the seed runs with them (the line's optional fields after
	// expect: "keyed", "nodes=N", "inline-sync", ...).
	Knobs
}

// Options is the regression's run configuration.
func (r Regression) Options() Options {
	return Options{Mutation: r.Mutation, Knobs: r.Knobs}
}

// ParseMutation is the inverse of Mutation.String.
func ParseMutation(s string) (Mutation, error) {
	for _, m := range append([]Mutation{MutNone}, Mutations...) {
		if m.String() == s {
			return m, nil
		}
	}
	return MutNone, fmt.Errorf("sim: unknown mutation %q (%s)", s, MutationNames())
}

// MutationNames lists the names ParseMutation takes, "none" first,
// comma-separated.
func MutationNames() string {
	names := []string{MutNone.String()}
	for _, m := range Mutations {
		names = append(names, m.String())
	}
	return strings.Join(names, ", ")
}

// ReadRegressions parses a regressions file: one seed per line as
// "seed mutation expect [keyed] [nodes=N] [inline-sync] [graceful]
// [moments] [disk-stalls] [reject-probes] # note", expect being "pass" or "known:SIGNATURE" (or
// "known:A|B": either), the options running the seed with the Options of
// those names; blank lines and lines starting with # are skipped.
func ReadRegressions(r io.Reader) ([]Regression, error) {
	var out []Regression
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var reg Regression
		if i := strings.Index(text, "#"); i >= 0 {
			reg.Note = strings.TrimSpace(text[i+1:])
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) < 3 {
			return nil, fmt.Errorf("sim: regressions line %d: want \"seed mutation expect [keyed] [nodes=N]\"", line)
		}
		for _, opt := range f[3:] {
			n, isNodes := strings.CutPrefix(opt, "nodes=")
			switch {
			case opt == "keyed":
				reg.Keyed = true
			case opt == "inline-sync":
				reg.InlineSync = true
			case opt == "graceful":
				reg.Graceful = true
			case opt == "moments":
				reg.Moments = true
			case opt == "disk-stalls":
				reg.DiskStalls = true
			case opt == "reject-probes":
				reg.RejectProbes = true
			case isNodes:
				v, err := strconv.Atoi(n)
				if err != nil || v < 2 || v > MaxNodes {
					return nil, fmt.Errorf("sim: regressions line %d: %s: want nodes=2..%d", line, opt, MaxNodes)
				}
				reg.Nodes = v
			default:
				return nil, fmt.Errorf("sim: regressions line %d: unknown option %q (keyed, nodes=N, inline-sync, graceful, moments, disk-stalls, reject-probes)", line, opt)
			}
		}
		f = f[:3]
		seed, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sim: regressions line %d: %v", line, err)
		}
		reg.Seed = seed
		if reg.Mutation, err = ParseMutation(f[1]); err != nil {
			return nil, fmt.Errorf("sim: regressions line %d: %v", line, err)
		}
		switch {
		case f[2] == "pass":
		case strings.HasPrefix(f[2], "known:") && len(f[2]) > len("known:"):
			reg.Known = strings.TrimPrefix(f[2], "known:")
		default:
			return nil, fmt.Errorf("sim: regressions line %d: expect must be pass or known:SIGNATURE", line)
		}
		out = append(out, reg)
	}
	return out, sc.Err()
}

// ReadRegressionsFile reads path (see ReadRegressions).
func ReadRegressionsFile(path string) ([]Regression, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadRegressions(f)
}

// KnownSignatures lists the distinct open-bug signatures of regs.
func KnownSignatures(regs []Regression) []string {
	var out []string
	for _, r := range regs {
		for _, known := range r.Signatures() {
			dup := false
			for _, k := range out {
				dup = dup || k == known
			}
			if !dup {
				out = append(out, known)
			}
		}
	}
	return out
}

// Signatures are the open bugs a regression line names: "known:A|B" is a
// seed that may fail with either (two bounds met in one run).
func (r Regression) Signatures() []string {
	if r.Known == "" {
		return nil
	}
	return strings.Split(r.Known, "|")
}
