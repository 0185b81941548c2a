package sim

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

var (
	flagSeed     = flag.Uint64("seed", 0, "replay this one seed and print its event log (0: run the budget)")
	flagSeeds    = flag.Int("seeds", 0, "seeds in the budget (0: the CI default)")
	flagFrom     = flag.Uint64("from", 1, "first seed of the budget")
	flagMutation = flag.String("mutation", "none", "run -seed or the budget with this mutation knob")
	flagLog      = flag.String("log", "", "write the -seed event log here (default: a file in the temp dir)")
	flagTail     = flag.Int("tail", 150, "event-log lines printed for a failing seed")
	flagKeyed    = flag.Bool("keyed", false, "run -seed keyed (Options.Keyed: a MAC on every frame)")
	flagDatagram = flag.Int("datagram-bytes", 0, "run -seed with this datagram size (Options.DatagramBytes; 0: the default)")
	flagNodes    = flag.Int("nodes", 0, "run -seed with this many nodes (Options.Nodes; 0: the default, 3)")
	flagInline   = flag.Bool("inline-sync", false, "run -seed with every fsync inline on the agent (Options.InlineSync)")
	flagReject   = flag.Bool("reject-probes", false, "run -seed with every probe of a live node rejected (Options.RejectProbes)")
	flagGraceful = flag.Bool("graceful", false, "run -seed with planned stops of the primary (Options.Graceful)")
	flagMoments  = flag.Bool("moments", false, "run -seed with moment crashes (Options.Moments)")
	flagStalls   = flag.Bool("disk-stalls", false, "run -seed with hung disks (Options.DiskStalls)")
)

// CI budgets. Plain: ~10 seeds/s/core on a loaded 2-core machine, so 1000
// seeds take under two minutes. The race detector makes a seed ~10 times
// slower and a run is single-goroutine anyway (the detector finds nothing
// there the plain run misses), so the race build runs a tenth of the seeds.
const (
	ciSeeds         = 1000
	ciSeedsRace     = 100
	mutationBudget  = 200 // seeds a knob may survive before TestMutations fails
	regressionsFile = "testdata/regressions.txt"
)

func budget() int {
	if *flagSeeds > 0 {
		return *flagSeeds
	}
	if raceEnabled {
		return ciSeedsRace
	}
	if testing.Short() {
		return ciSeeds / 10
	}
	return ciSeeds
}

func regressions(t *testing.T) []Regression {
	t.Helper()
	regs, err := ReadRegressionsFile(regressionsFile)
	if err != nil {
		t.Fatal(err)
	}
	return regs
}

func mutationFlag(t *testing.T) Mutation {
	m, err := ParseMutation(*flagMutation)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSim runs the CI budget of seeds and every regression seed against
// the real cores; with -seed=N it replays one seed with its event log.
func TestSim(t *testing.T) {
	if *flagSeed != 0 {
		replay(t, *flagSeed, Options{Mutation: mutationFlag(t), Knobs: Knobs{Keyed: *flagKeyed, DatagramBytes: *flagDatagram, Nodes: *flagNodes, InlineSync: *flagInline, Graceful: *flagGraceful, Moments: *flagMoments, DiskStalls: *flagStalls, RejectProbes: *flagReject}})
		return
	}
	regs := regressions(t)
	known := KnownSignatures(regs)
	t.Run("regressions", func(t *testing.T) {
		for _, reg := range regs {
			r := Run(reg.Seed, reg.Options())
			switch {
			case reg.Known == "" && r.Failed():
				reportFailure(t, r)
			case reg.Known != "" && r.Failed() && !Tolerated(r, reg.Signatures()):
				reportFailure(t, r)
			case reg.Known != "" && !r.Failed():
				t.Logf("seed %d (%s) passes now: the bug marked %s may be fixed; change its expect to pass", reg.Seed, reg.Mutation, reg.Known)
			case reg.Known != "":
				t.Logf("seed %d: open bug %s still shows", reg.Seed, reg.Known)
			}
		}
	})
	t.Run("budget", func(t *testing.T) {
		n := budget()
		sum := RunMany(context.Background(), *flagFrom, n, runtime.GOMAXPROCS(0), Options{Mutation: mutationFlag(t)}, known, nil)
		t.Log(sum.String())
		if sum.Failed > len(sum.Failures) && sum.Failed > sum.Known && mutationFlag(t) == MutNone {
			t.Errorf("%d of %d failures are not explained by known bugs (only the first %d kept)", sum.Failed-sum.Known, sum.Failed, FailuresKept)
		}
		byBug := map[string]int{}
		for _, r := range sum.Failures {
			if Tolerated(r, known) {
				var sigs []string
				for _, k := range known {
					if strings.Contains(strings.Join(r.Violations, "\n"), k) {
						sigs = append(sigs, k)
						byBug[k]++
					}
				}
				t.Logf("seed %d fails with known bugs only (%s): %s", r.Seed, strings.Join(sigs, ", "), firstLine(r.Violations[0]))
				continue
			}
			reportFailure(t, r)
		}
		if len(byBug) > 0 {
			t.Logf("seeds failing by open bug: %v", byBug)
		}
		if sum.Stats.Promotions == 0 || sum.Stats.Crashes == 0 || sum.Stats.Answered == 0 {
			t.Fatalf("the budget exercised nothing: %+v", sum.Stats)
		}
		if n >= 100 && sum.Stats.StandbysUnreachable == 0 {
			// About one seed in four has a primary's probe find a crashed
			// in-sync standby (replica.Primary.Unreachable).
			t.Fatalf("no probe found a crashed standby in %d seeds: %+v", n, sum.Stats)
		}
	})
}

// reportFailure prints a failing seed: its violations, its schedule, the
// end of its event log (a replay, which must be bit-for-bit the same run)
// and how to replay it.
func reportFailure(t *testing.T, r Result) {
	t.Helper()
	var log bytes.Buffer
	again := Run(r.Seed, Options{Mutation: r.Mutation, Knobs: r.Knobs, Trace: &log})
	var b strings.Builder
	fmt.Fprintf(&b, "SEED %d FAILED (mutation %s)\n", r.Seed, r.Mutation)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "%s", r.Schedule)
	if again.Digest != r.Digest {
		fmt.Fprintf(&b, "REPLAY DIVERGED: digest %x then %x: the run is not deterministic\n", r.Digest, again.Digest)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("seqbus-sim-%d-%s.log", r.Seed, r.Mutation))
	if err := os.WriteFile(path, log.Bytes(), 0o644); err == nil {
		fmt.Fprintf(&b, "full event log: %s\n", path)
	}
	fmt.Fprintf(&b, "%s", logDigest(log.Bytes()))
	fmt.Fprintf(&b, "replay: %s\n", r.ReplayCommand())
	t.Error(b.String())
}

// replay runs one seed with its full event log written to a file and its
// tail printed.
func replay(t *testing.T, seed uint64, opts Options) {
	m := opts.Mutation
	path := *flagLog
	if path == "" {
		path = filepath.Join(os.TempDir(), fmt.Sprintf("seqbus-sim-%d-%s.log", seed, m))
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	opts.Trace = w
	r := Run(seed, opts)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, _ := os.ReadFile(path)
	t.Logf("seed %d (mutation %s): %d events, %s simulated, digest %x\n%s", seed, m, r.Stats.Events, fmtNs(r.SimNs), r.Digest, r.Schedule)
	t.Logf("event log: %s\n%s", path, logDigest(data))
	switch {
	case r.Failed() && opts.Mutation == MutNone && Tolerated(r, StatedBounds):
		// As the soak that printed this replay's command reports it: the
		// README's stated bound, not a bug (its trace is above).
		t.Logf("seed %d met a stated bound (not a bug):\n  %s", seed, strings.Join(r.Violations, "\n  "))
	case r.Failed():
		t.Errorf("seed %d failed:\n  %s", seed, strings.Join(r.Violations, "\n  "))
	}
}

// logDigest is what a failure prints of its event log: the last
// milestones (roles, releases, faults, the nodes' own logs) and the last
// datagrams before the end.
func logDigest(log []byte) string {
	var milestones, datagrams bytes.Buffer
	for _, line := range strings.SplitAfter(string(log), "\n") {
		if i := strings.Index(line, "] "); i >= 0 && strings.HasPrefix(line[i+2:], "  ") {
			datagrams.WriteString(line)
		} else {
			milestones.WriteString(line)
		}
	}
	return fmt.Sprintf("last %d milestones:\n%slast %d datagrams:\n%s",
		*flagTail, tail(milestones.Bytes(), *flagTail), *flagTail/3, tail(datagrams.Bytes(), *flagTail/3))
}

func tail(b []byte, n int) string {
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// TestMutations proves the checker can fail: each knob disables one
// safety mechanism of the real cores, and the checker must report a
// violation (other than a known open bug) within mutationBudget seeds;
// again with only the outside observations (no check reads the node's own
// report of its gate).
func TestMutations(t *testing.T) {
	known := KnownSignatures(regressions(t))
	for _, external := range []bool{false, true} {
		for _, m := range Mutations {
			name := m.String()
			if external {
				name += "/external-only"
			}
			t.Run(name, func(t *testing.T) {
				for seed := uint64(1); seed <= mutationBudget; seed++ {
					r := Run(seed, Options{Mutation: m, externalOnly: external})
					if r.Failed() && !Tolerated(r, known) {
						t.Logf("%s caught after %d seed(s): seed %d: %s", name, seed, seed, firstLine(r.Violations[0]))
						return
					}
				}
				t.Fatalf("the checker missed mutation %s in %d seeds", name, mutationBudget)
			})
		}
	}
}

// TestDeterminism: a seed is the same run every time, traced or not.
func TestDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		a := Run(seed, Options{})
		b := Run(seed, Options{Trace: io.Discard})
		if a.Digest != b.Digest || a.Stats != b.Stats || strings.Join(a.Violations, "|") != strings.Join(b.Violations, "|") {
			t.Fatalf("seed %d ran differently: %x %+v vs %x %+v", seed, a.Digest, a.Stats, b.Digest, b.Stats)
		}
	}
	if Run(1, Options{}).Digest == Run(2, Options{}).Digest {
		t.Fatal("two seeds ran the same")
	}
}

// TestEventLog: a traced run says who sent what, who leads and what is
// released, and prints its schedule.
func TestEventLog(t *testing.T) {
	var log bytes.Buffer
	r := Run(3, Options{Trace: &log})
	for _, want := range []string{"seed 3", "faults (", "LEASE_ACQUIRE", "is PRIMARY at epoch", "RELEASED", "FAULT 1 starts", "QUIET"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("event log lacks %q", want)
		}
	}
	if !strings.Contains(r.Schedule, "params: loss") {
		t.Errorf("schedule: %q", r.Schedule)
	}
}

func TestReadRegressions(t *testing.T) {
	tests := []struct {
		in   string
		want []Regression
		err  bool
	}{
		{in: "# c\n\n7 none pass # ok\n", want: []Regression{{Seed: 7, Note: "ok"}}},
		{in: "9 no-gating known:X\n", want: []Regression{{Seed: 9, Mutation: MutNoGating, Known: "X"}}},
		{in: "9 none\n", err: true},
		{in: "x none pass\n", err: true},
		{in: "9 bogus pass\n", err: true},
		{in: "9 none known:\n", err: true},
		{in: "9 none fail\n", err: true},
		{in: "5 none pass keyed # k\n", want: []Regression{{Seed: 5, Note: "k", Knobs: Knobs{Keyed: true}}}},
		{in: "5 none pass unkeyed\n", err: true},
		{in: "6 none pass nodes=2 keyed\n", want: []Regression{{Seed: 6, Knobs: Knobs{Keyed: true, Nodes: 2}}}},
		{in: "8 none pass graceful\n", want: []Regression{{Seed: 8, Knobs: Knobs{Graceful: true}}}},
		{in: "9 none pass moments nodes=2\n", want: []Regression{{Seed: 9, Knobs: Knobs{Moments: true, Nodes: 2}}}},
		{in: "10 none pass disk-stalls\n", want: []Regression{{Seed: 10, Knobs: Knobs{DiskStalls: true}}}},
		{in: "6 none pass nodes=1\n", err: true},
		{in: "6 none pass nodes=x\n", err: true},
	}
	for _, tt := range tests {
		got, err := ReadRegressions(strings.NewReader(tt.in))
		if (err != nil) != tt.err {
			t.Fatalf("%q: err %v", tt.in, err)
		}
		if !tt.err && fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Fatalf("%q: got %+v want %+v", tt.in, got, tt.want)
		}
	}
	// The committed file parses.
	if regs := regressions(t); len(regs) == 0 {
		t.Fatal("no regression seeds")
	}
}

func TestTolerated(t *testing.T) {
	r := Result{Violations: []string{"a DIAG-x b", "c DIAG-y"}}
	if !Tolerated(r, []string{"DIAG-x", "DIAG-y"}) || Tolerated(r, []string{"DIAG-x"}) || !Tolerated(Result{}, nil) {
		t.Fatal("Tolerated")
	}
}

func TestMutationNames(t *testing.T) {
	for _, m := range append([]Mutation{MutNone}, Mutations...) {
		got, err := ParseMutation(m.String())
		if err != nil || got != m {
			t.Fatalf("%v: %v %v", m, got, err)
		}
	}
	if _, err := ParseMutation("x"); err == nil {
		t.Fatal("unknown mutation parsed")
	}
}

// FuzzSim lets `go test -fuzz=FuzzSim ./sim` soak random seeds; a failure
// is kept under testdata/fuzz/FuzzSim as a regression.
func FuzzSim(f *testing.F) {
	f.Add(uint64(1))
	f.Add(uint64(42))
	regs, err := ReadRegressionsFile(regressionsFile)
	if err != nil {
		f.Fatal(err)
	}
	known := KnownSignatures(regs)
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := Run(seed, Options{})
		if r.Failed() && !Tolerated(r, known) {
			t.Fatalf("seed %d: %s\n%s", seed, strings.Join(r.Violations, "\n"), r.Schedule)
		}
	})
}

func BenchmarkSeed(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Run(uint64(i+1), Options{})
	}
}

// runBudget runs n seeds with opts and fails t on any failure that
// known open bugs do not explain, or when the seeds exercised no
// promotion, crash or answer; it returns the summary for the caller's
// own checks.
func runBudget(t *testing.T, n int, opts Options) Summary {
	t.Helper()
	known := KnownSignatures(regressions(t))
	sum := RunMany(context.Background(), 1, n, runtime.GOMAXPROCS(0), opts, known, nil)
	for _, r := range sum.Failures {
		if !Tolerated(r, known) {
			reportFailure(t, r)
		}
	}
	if sum.Failed > len(sum.Failures) && sum.Failed > sum.Known {
		t.Fatalf("%d of %d failures are not explained by known bugs (only the first %d kept)", sum.Failed-sum.Known, sum.Failed, FailuresKept)
	}
	if sum.Stats.Promotions == 0 || sum.Stats.Crashes == 0 || sum.Stats.Answered == 0 {
		t.Fatalf("the budget exercised nothing: %+v", sum.Stats)
	}
	return sum
}

// TestSimTwoNodes runs seeds on the smallest deployment, a primary and
// one standby (Options.Nodes 2), half of them keyed: its in-sync set
// empties whenever that standby does, and every failover promotes the
// only node left.
func TestSimTwoNodes(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		sum := runBudget(t, max(budget()/20, 5), Options{Knobs: Knobs{Nodes: 2, Keyed: keyed}})
		t.Logf("keyed %v: %s", keyed, sum.String())
	}
	if r := Run(1, Options{Knobs: Knobs{Nodes: MaxNodes + 1}}); !r.Failed() {
		t.Fatal("a cluster past MaxNodes ran")
	}
}

// TestSimMoreStandbys runs seeds with three and four standbys
// (Options.Nodes 4 and 5): the in-sync set then changes with some
// standbys in it and others out, so a promotion can meet a standby that
// was not in sync, and the primary's additions and removals are what
// keep the witness from promoting one behind what was released (bug G
// in testdata/regressions.txt was found this way).
func TestSimMoreStandbys(t *testing.T) {
	for _, nodes := range []int{4, 5} {
		sum := runBudget(t, max(budget()/20, 5), Options{Knobs: Knobs{Nodes: nodes}})
		t.Logf("%d nodes: %s", nodes, sum.String())
	}
}

// TestSimInlineSync runs seeds with every node fsyncing on its agent as
// it appends (Options.InlineSync, what `seqbus node --fsync-inline` does
// on a fast disk): a record becomes durable, acked and released in the
// pass that appended it, through the same crashes (unsynced writes lost,
// torn tails) and failovers, and the checker still finds nothing a
// client saw lost.
func TestSimInlineSync(t *testing.T) {
	sum := runBudget(t, max(budget()/10, 10), Options{Knobs: Knobs{InlineSync: true}})
	t.Logf("%s; %d fsyncs inline, %d by the committer's step", sum.String(), sum.Stats.InlineSyncs, sum.Stats.ThreadSyncs)
	if sum.Stats.InlineSyncs == 0 {
		t.Fatalf("no fsync ran inline: %+v", sum.Stats)
	}
}

// TestSimGraceful runs seeds in which half the crashes of the primary,
// and of a standby, are planned stops (Options.Graceful): the primary's
// process closes, gives its lease up and the witness grants the next
// epoch at once; a standby's tells its primary, which has it removed
// from the in-sync set at once; through the same partitions, pauses and
// witness crashes, with every invariant checked. It fails if no stop
// gave a lease up or no standby's was announced to its primary.
func TestSimGraceful(t *testing.T) {
	runOption(t, Options{Knobs: Knobs{Graceful: true}}, "no planned stop gave a lease up, or none of a standby was announced", func(st Stats) bool {
		return st.Stops > 0 && st.LeasesReleased > 0 && st.StandbysLeaving > 0
	})
}

// TestSimRejectedProbes runs seeds in which every probe of a live node
// is refused, as a firewall's reject rule would (Options.RejectProbes):
// a standby overdue for any reason is marked gone and proposed for
// removal at once, a false alarm the protocol must survive (it costs the
// in-sync set a member until it acks again, never an output). It fails
// if no live standby was marked.
func TestSimRejectedProbes(t *testing.T) {
	runOption(t, Options{Knobs: Knobs{RejectProbes: true}}, "no probe marked a standby gone", func(st Stats) bool {
		return st.StandbysUnreachable > 0 && st.ProbesRefused > 0
	})
}

// runOption runs a tenth of the budget with opts (runBudget: every
// invariant, known bugs tolerated) and fails with missing unless covered
// says the option's fault happened.
func runOption(t *testing.T, opts Options, missing string, covered func(Stats) bool) {
	t.Helper()
	sum := runBudget(t, max(budget()/10, 10), opts)
	t.Logf("%s", sum.String())
	if !covered(sum.Stats) {
		t.Fatalf("%s: %+v", missing, sum.Stats)
	}
}

// TestSimMoments runs seeds with moment crashes (Options.Moments): a
// node crashes right after it was promoted, followed a new epoch or
// installed a fetched snapshot, where the state on its disk is the
// newest, through the seed's own faults. It fails if no moment crash
// happened.
func TestSimMoments(t *testing.T) {
	runOption(t, Options{Knobs: Knobs{Moments: true}}, "no moment crash", func(st Stats) bool { return st.MomentCrashes > 0 })
}

// TestSimDiskStalls runs seeds in which half the pauses hang a node's
// writeback instead (Options.DiskStalls): the node runs on and nothing it
// writes becomes durable. A primary's disk watch must give its lease up
// and the cluster lead on, with every invariant checked. It fails if no
// disk watch found a hang.
func TestSimDiskStalls(t *testing.T) {
	runOption(t, Options{Knobs: Knobs{DiskStalls: true}}, "no hung disk was found stalled", func(st Stats) bool { return st.DiskHangs > 0 && st.DiskStalls > 0 })
}

// TestSimKeyed runs seeds with one master key on every node, the
// witness and the clients (Options.Keyed): every frame is sealed and
// verified through the same failovers, crashes and refetches, so a keyed
// path that refuses a genuine frame shows up as a stall or a violation.
func TestSimKeyed(t *testing.T) {
	sum := runBudget(t, max(budget()/10, 10), Options{Knobs: Knobs{Keyed: true}})
	t.Logf("%s; %d retransmits received, %d unknown-key drops", sum.String(), sum.Stats.RetransmitsReceived, sum.Stats.UnknownKeys)
	if sum.Stats.RetransmitsReceived == 0 {
		t.Fatalf("no RETRANSMIT was taken: %+v", sum.Stats)
	}
	if sum.Stats.BadMACs != 0 {
		t.Fatalf("%d genuine frames failed their MAC (nothing forges in the simulation)", sum.Stats.BadMACs)
	}
}

// TestSimJumbo runs a tenth of the budget with every node and client at
// jumbo and at the largest datagram size: fuller DATA, RETRANSMIT, OUTPUT,
// snapshot and market-data frames through the same faults and the same
// invariants.
func TestSimJumbo(t *testing.T) {
	for _, size := range []int{8972, wire.MaxFrameLen} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			sum := runBudget(t, max(budget()/10, 10), Options{Knobs: Knobs{DatagramBytes: size}})
			t.Logf("%s; largest datagram %d bytes", sum.String(), sum.Stats.LargestDatagram)
			if got := sum.Stats.LargestDatagram; got <= wire.DefaultDatagramLen || got > uint64(size) {
				t.Fatalf("largest datagram %d bytes: want one over the default %d, none over %d", got, wire.DefaultDatagramLen, size)
			}
		})
	}
}
