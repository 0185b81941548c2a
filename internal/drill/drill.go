// Package drill runs the failure drills of `seqbus drill`: three
// lessons on loopback, each a scenario with a timeline and a verdict,
// over internal/cluster. The first is the product working; the other two
// switch a safety mechanism off (the only place the unsafe switches
// exist) and show the anomaly it prevents, detected from what the client
// saw (internal/verdict). The timeline and the verdict are written to
// Config.Out as the drill goes.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/verdict"
)

// Scenario is one lesson.
type Scenario struct {
	Name, Title, Lesson string
	// Unsafe is the switch the nodes run with ("" for none).
	Unsafe string
	run    func(r *drillRun) (anomaly string, err error)
}

// Scenarios are the drills, in the order `seqbus drill` runs them.
var Scenarios = []Scenario{
	{
		Name:  "pause",
		Title: "primary paused past its lease (SIGSTOP), then resumed",
		Lesson: "The lease and the fence: the paused primary's lease runs out, the standby is granted the next epoch and promotes; " +
			"resumed, the old primary finds its lease gone, releases nothing and steps down.",
		run: drillPause,
	},
	{
		Name:   "no-fencing",
		Title:  "the same pause with fencing switched off",
		Unsafe: "--unsafe-no-fencing",
		Lesson: "Without fencing the resumed primary does not check its lease: it releases answers from its old epoch after the new " +
			"primary has started answering. Two primaries have been heard: the stale one's answers may contradict the new history.",
		run: drillPause,
	},
	{
		Name:   "no-gating",
		Title:  "gating switched off, primary crashed (SIGKILL) while the standby lags",
		Unsafe: "--unsafe-no-gating",
		Lesson: "Without gating the primary answers as soon as it applies, before the standby has the command. " +
			"It dies; the standby promotes without those commands; orders the client saw acknowledged are gone.",
		run: drillNoGating,
	},
}

// Select returns the scenarios named which ("all" for every one); none
// for an unknown name.
func Select(which string) []Scenario {
	var out []Scenario
	for _, s := range Scenarios {
		if which == "all" || which == s.Name {
			out = append(out, s)
		}
	}
	return out
}

// Config is what every drill runs with.
type Config struct {
	// Bin is the seqbus binary: the witness is `Bin witness`, a node
	// `Bin drill node` (the only nodes with the unsafe switches).
	Bin string
	// Rate is the client's commands per second.
	Rate float64
	// Keep keeps each drill's directory (logs, journals).
	Keep bool
	// Engine is the nodes' engine configuration, for the verifier.
	Engine engine.Config
	// Out receives the timeline and the verdict.
	Out io.Writer
}

// ErrInterrupted is RunAll's error when ctx ended it.
var ErrInterrupted = errors.New("interrupted")

// RunAll runs each scenario in turn, printing to cfg.Out, a failed
// drill's error after its timeline. Its error names every drill that did
// not reach its expected verdict; ErrInterrupted (wrapping ctx's error)
// when ctx ended it, once every process stopped.
func RunAll(ctx context.Context, run []Scenario, cfg Config) error {
	var failed []string
	for i, s := range run {
		if i > 0 {
			fmt.Fprintln(cfg.Out)
		}
		ok, err := Run(ctx, s, cfg)
		if ctx.Err() != nil {
			fmt.Fprintln(cfg.Out, "\ninterrupted: every process stopped")
			return fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
		}
		if err != nil {
			fmt.Fprintf(cfg.Out, "  verdict: DRILL FAILED: %v\n", err)
		}
		if err != nil || !ok {
			failed = append(failed, s.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("drills that did not reach their expected verdict: %v", failed)
	}
	return nil
}

// Run runs one drill and reports whether it reached the verdict
// expected of it: no anomaly for a safe drill, its anomaly detected for an
// unsafe one. The error is the drill's own failure (a process that did
// not start, no primary in time); the verdict line is written to cfg.Out.
//
// An unsafe drill's anomaly depends on timing (what was in flight at the
// fault), so one that is not reproduced runs again, up to unsafeAttempts
// times in all, each attempt printed; a safe drill runs once and must
// pass that once.
func Run(ctx context.Context, s Scenario, cfg Config) (bool, error) {
	fmt.Fprintf(cfg.Out, "=== drill %s: %s\n", s.Name, s.Title)
	fmt.Fprintf(cfg.Out, "    %s\n", s.Lesson)
	if s.Unsafe != "" {
		fmt.Fprintf(cfg.Out, "    UNSAFE: both nodes run with %s (drills only)\n", s.Unsafe)
	}
	attempts := 1
	if s.Unsafe != "" {
		attempts = unsafeAttempts
	}
	for a := 1; ; a++ {
		ok, err := runOnce(ctx, s, cfg)
		if ok || err != nil || a == attempts || ctx.Err() != nil {
			return ok, err
		}
		fmt.Fprintf(cfg.Out, "  (attempt %d of %d did not reproduce it; again)\n", a, attempts)
	}
}

// unsafeAttempts bounds the runs of an unsafe drill that does not
// reproduce its anomaly.
const unsafeAttempts = 3

func runOnce(ctx context.Context, s Scenario, cfg Config) (bool, error) {
	r, err := newDrillRun(ctx, s, cfg)
	if err != nil {
		return false, err
	}
	defer r.close()
	anomaly, err := s.run(r)
	if err != nil {
		return false, err
	}
	ok, line := Judge(s.Unsafe, anomaly)
	fmt.Fprintln(cfg.Out, line)
	return ok, nil
}

// Judge is a drill's verdict: a safe drill (unsafe "") passes with no
// anomaly; an unsafe one passes when its anomaly was detected. line is
// the verdict as the drill prints it.
func Judge(unsafe, anomaly string) (ok bool, line string) {
	switch {
	case unsafe == "" && anomaly == "":
		return true, "  verdict: PASS, nothing stale reached the client and nothing acknowledged was lost"
	case unsafe == "":
		return false, "  verdict: FAIL, " + anomaly
	case anomaly != "":
		return true, fmt.Sprintf("  verdict: ANOMALY DETECTED (expected with %s): %s", unsafe, anomaly)
	default:
		return false, fmt.Sprintf("  verdict: NOT REPRODUCED: with %s the drill expected an anomaly and saw none", unsafe)
	}
}

// drillRun is one drill's cluster (internal/cluster): a witness, two
// nodes, a load client whose record keeps every output with the epoch and
// node that sent it.
type drillRun struct {
	*cluster.Local
	ctx      context.Context
	start    time.Time
	load     *cluster.Load
	rec      *client.Recorder
	rate     float64
	session  uint64
	keep     bool
	verdict  *verdict.Result
	clean    func()
	scenario Scenario
	out      io.Writer
	engine   engine.Config
}

const (
	drillLease   = time.Second
	drillSession = 42
)

func newDrillRun(ctx context.Context, s Scenario, cfg Config) (*drillRun, error) {
	dir, err := os.MkdirTemp("", "seqbus-drill-"+s.Name+"-")
	if err != nil {
		return nil, err
	}
	local, err := cluster.NewLocal(cfg.Bin, dir, 2, 79)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &drillRun{Local: local, ctx: ctx, scenario: s, rate: cfg.Rate, session: drillSession, keep: cfg.Keep, out: cfg.Out, engine: cfg.Engine}
	r.clean = func() {
		r.StopAll()
		if r.keep {
			fmt.Fprintf(r.out, "  files kept in %s\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}
	if err := r.startCluster(s); err != nil {
		r.clean()
		return nil, err
	}
	return r, nil
}

func (r *drillRun) close() {
	if r.load != nil {
		r.load.Client.Close()
	}
	r.clean()
}

func (r *drillRun) startCluster(s Scenario) error {
	if err := r.StartWitness(nil, "--lease", drillLease.String()); err != nil {
		return err
	}
	for _, id := range r.IDs() {
		args := append([]string{"drill", "node"}, r.NodeArgs(id)...)
		args = append(args, "--lease", drillLease.String(), "--fsync", "group",
			// Long enough that the drills' short pauses of a standby do not
			// remove it from the in-sync set.
			"--insync-timeout", "1s",
			// A small receive buffer: a stopped standby loses what does not
			// fit, as a real one behind a congested switch would.
			"--recv-buffer", "32768")
		if s.Unsafe != "" {
			args = append(args, s.Unsafe)
		}
		if err := r.Start(cluster.NodeName(id), args...); err != nil {
			return err
		}
	}
	r.start = time.Now()
	return nil
}

// at prints one timeline line, relative to the drill's start.
func (r *drillRun) at(format string, args ...any) {
	fmt.Fprintf(r.out, "  %6.2fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// waitPrimary waits (bounded) for a live node other than not that is
// primary at epoch >= minEpoch.
func (r *drillRun) waitPrimary(not uint32, minEpoch uint64, timeout time.Duration) (uint32, cluster.Status, error) {
	id, st, err := r.WaitPrimary(r.ctx, not, minEpoch, timeout)
	if errors.Is(err, cluster.ErrNoPrimary) {
		err = fmt.Errorf("no node became primary (epoch >= %d) within %v; logs in %s (use --keep)", minEpoch, timeout, r.Dir)
	}
	return id, st, err
}

// startLoad dials the client at primary and starts a fixed-rate load.
func (r *drillRun) startLoad(primary uint32) error {
	var err error
	if r.rec, err = client.CreateRecorder(r.recordPath()); err != nil {
		return err
	}
	count := uint64(r.rate * 60) // a minute at most: the drill stops it sooner
	// The record keeps every output with the node and epoch of the frame
	// that carried it: the verifier's stale check reads it.
	r.load, err = cluster.StartLoad(r.ctx, client.Options{
		Core: client.Config{Session: r.session}, Primary: r.Nodes[primary],
		Witness: r.Witness, Nodes: r.Nodes, Recorder: r.rec,
	}, client.LoadConfig{Rate: r.rate, Count: count, Instruments: 4, Seed: 11, Drain: 10 * time.Second})
	if err != nil {
		r.rec.Close()
		r.rec = nil
	}
	return err
}

// answered is how many answers the client has.
func (r *drillRun) answered() uint64 { return r.load.Client.Stats().Answered }

// waitAnswered waits (bounded) until the client has n answers.
func (r *drillRun) waitAnswered(n uint64, timeout time.Duration) error {
	err := cluster.Poll(r.ctx, timeout, 10*time.Millisecond, func() bool { return r.answered() >= n })
	if errors.Is(err, cluster.ErrTimeout) {
		return fmt.Errorf("only %d of %d answers within %v", r.answered(), n, timeout)
	}
	return err
}

// watch prints the cluster once a second for d: every node's role and
// epoch and the client's answers.
func (r *drillRun) watch(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && r.ctx.Err() == nil {
		time.Sleep(min(time.Second, time.Until(end)))
		line := ""
		for _, id := range r.IDs() {
			if r.Dead[id] {
				line += fmt.Sprintf("node%d dead  ", id)
				continue
			}
			s, err := r.Status(id)
			if err != nil {
				line += fmt.Sprintf("node%d ?  ", id)
				continue
			}
			line += fmt.Sprintf("node%d %s e%d released %d  ", id, s.Role, s.Epoch, s.Released)
		}
		r.at("%sclient answered %d", line, r.answered())
	}
}

func (r *drillRun) recordPath() string { return filepath.Join(r.Dir, "client.jsonl") }

// lostAcks runs the verifier (seqbus verify's) on the client's record and
// both nodes, final the primary, and returns how many outputs the client
// received are not in the final history, and how many orders it saw
// acknowledged. Call after stopLoad and StopAll.
func (r *drillRun) lostAcks(final uint32) (lost, acked int, err error) {
	res, err := r.Verdict(r.recordPath(), final, r.engine)
	if err != nil {
		return 0, 0, err
	}
	r.verdict = res
	cluster.WriteVerdict(r.out, r.recordPath(), r.Local, res)
	return int(res.Lost), r.load.Acked(), nil
}

// stopLoad ends the load: the client stops and its error is collected.
func (r *drillRun) stopLoad() {
	r.load.Stop(5 * time.Second)
	if r.rec != nil {
		if err := r.rec.Close(); err != nil {
			fmt.Fprintf(r.out, "  client record: %v\n", err)
		}
	}
}

// loadOnFirstPrimary waits for the first primary, starts the load on it
// and waits for a second of answers.
func (r *drillRun) loadOnFirstPrimary() (uint32, cluster.Status, error) {
	old, ost, err := r.waitPrimary(0, 1, 10*time.Second)
	if err != nil {
		return 0, ost, err
	}
	r.at("node%d holds the lease at epoch %d; client load %.0f cmd/s starts", old, ost.Epoch, r.rate)
	if err := r.startLoad(old); err != nil {
		return 0, ost, err
	}
	return old, ost, r.waitAnswered(uint64(r.rate), 20*time.Second)
}

// drillPause: SIGSTOP the primary past its lease (after holding the
// standby for 100 ms, so acks for answers the primary has not yet released
// are waiting in its socket when it resumes), wait for the promotion,
// SIGCONT, and watch what reaches the client.
func drillPause(r *drillRun) (string, error) {
	old, ost, err := r.loadOnFirstPrimary()
	if err != nil {
		return "", err
	}
	other := uint32(3 - old)
	oldName, otherName := "node"+strconv.Itoa(int(old)), "node"+strconv.Itoa(int(other))
	stoppedAt, err := r.pauseHoldingStandby(oldName, otherName)
	if err != nil {
		return "", err
	}
	r.at(">>> SIGSTOP node%d (the primary), %v lease; standby node%d held for the last 100 ms, so acks wait for the primary", old, drillLease, other)
	nw, nst, err := r.waitPrimary(old, ost.Epoch+1, 10*time.Second)
	if err != nil {
		return "", err
	}
	r.at(">>> node%d PROMOTED at epoch %d (%v after the SIGSTOP)", nw, nst.Epoch, time.Since(stoppedAt).Round(time.Millisecond))
	time.Sleep(time.Until(stoppedAt.Add(2 * drillLease)))
	r.Signal(oldName, syscall.SIGCONT)
	contAt := time.Now()
	r.at(">>> SIGCONT node%d (paused %v, twice its lease)", old, contAt.Sub(stoppedAt).Round(time.Millisecond))
	stepped := false
	deadline := contAt.Add(5 * time.Second)
	for time.Now().Before(deadline) && !stepped {
		time.Sleep(20 * time.Millisecond)
		if s, err := r.Status(old); err == nil && s.Role == "standby" && s.Epoch >= nst.Epoch {
			stepped = true
			r.at(">>> node%d stepped down: standby at epoch %d (%v after SIGCONT)", old, s.Epoch, time.Since(contAt).Round(time.Millisecond))
		}
	}
	r.watch(3 * time.Second)
	if !stepped {
		r.at("node%d did not step down (still leading at epoch %d in its own eyes)", old, ost.Epoch)
	}
	r.stopLoad()
	r.StopAll()
	cluster.WriteTimeline(r.out, r.NodeLog(old))
	cluster.WriteTimeline(r.out, r.NodeLog(nw))
	lost, acked, err := r.lostAcks(nw)
	if err != nil {
		return "", err
	}
	stale, first := r.verdict.Stale, r.verdict.FirstStale
	fmt.Fprintf(r.out, "  client: %d orders acknowledged; %d outputs received are not in the final history; outputs of an older epoch after a newer one's: %d (its epoch fence delivered %d of them)\n",
		acked, lost, stale, r.verdict.StaleDelivered)
	var anomaly string
	if stale > 0 && first != nil {
		anomaly = fmt.Sprintf("the deposed primary node%d's answers (epoch %d) reached the client %d times after the new primary (epoch %d) began answering; the first arrived %v after SIGCONT (order %d, %s)",
			first.Node, first.Epoch, stale, nst.Epoch, time.Unix(0, first.WallNs).Sub(contAt).Round(time.Millisecond), first.ClientOrderID, first.Kind)
	}
	if lost > 0 {
		anomaly = join(anomaly, fmt.Sprintf("%d outputs the client received are missing from the final history", lost))
	}
	anomaly = join(anomaly, r.otherFindings())
	if !stepped && r.scenario.Unsafe == "" {
		anomaly = join(anomaly, "the old primary did not step down")
	}
	return anomaly, nil
}

// pauseHoldingStandby stops the standby for 100 ms, then the primary, and
// resumes the standby: the primary pauses with answers applied but not
// released, whose acks reach its socket while it is stopped. It returns
// when the primary stopped.
func (r *drillRun) pauseHoldingStandby(primary, standby string) (time.Time, error) {
	if err := r.Pause(standby, 2*time.Second); err != nil {
		return time.Time{}, err
	}
	time.Sleep(100 * time.Millisecond)
	// The primary must be stopped for real before the standby resumes:
	// otherwise it reads the standby's acks and releases those answers
	// before it stops, and nothing is left to release stale.
	if err := r.Pause(primary, 2*time.Second); err != nil {
		return time.Time{}, err
	}
	stoppedAt := time.Now()
	r.Signal(standby, syscall.SIGCONT)
	return stoppedAt, nil
}

// drillNoGating: stop the standby (its small receive buffer overflows, so
// it loses what the primary multicasts meanwhile), SIGKILL the primary,
// resume the standby, let it promote, and count acknowledged orders missing
// from the final history.
func drillNoGating(r *drillRun) (string, error) {
	old, ost, err := r.loadOnFirstPrimary()
	if err != nil {
		return "", err
	}
	other := uint32(3 - old)
	if err := r.Pause("node"+strconv.Itoa(int(other)), 2*time.Second); err != nil {
		return "", err
	}
	r.at(">>> SIGSTOP node%d (the standby): it stops acking, and its 32 KB receive buffer soon overflows", other)
	before := r.answered()
	time.Sleep(300 * time.Millisecond)
	during := r.answered() - before
	r.Kill(old)
	killedAt := time.Now()
	r.Signal("node"+strconv.Itoa(int(other)), syscall.SIGCONT)
	r.at(">>> SIGKILL node%d (the primary); it answered %d commands while the standby was stopped; SIGCONT node%d", old, during, other)
	nw, nst, err := r.waitPrimary(old, ost.Epoch+1, 10*time.Second)
	if err != nil {
		return "", err
	}
	r.at(">>> node%d PROMOTED at epoch %d (%v after the kill)", nw, nst.Epoch, time.Since(killedAt).Round(time.Millisecond))
	r.watch(2 * time.Second)
	r.stopLoad()
	r.StopAll()
	cluster.WriteTimeline(r.out, r.NodeLog(nw))
	lost, acked, err := r.lostAcks(nw)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(r.out, "  client: %d orders acknowledged; %d outputs it received are not in node%d's history\n", acked, lost, nw)
	stale := ""
	if r.verdict.Stale > 0 {
		stale = fmt.Sprintf("%d outputs of an older epoch arrived after a newer one's (%d delivered)", r.verdict.Stale, r.verdict.StaleDelivered)
	}
	if lost > 0 {
		return join(join(fmt.Sprintf("%d outputs the client received (acks, executions) vanished in the failover (the dead primary answered before the standby had them)", lost),
			stale), r.otherFindings()), nil
	}
	return join(stale, r.otherFindings()), nil
}

// otherFindings names what the verifier found besides lost outputs ("" for
// nothing).
func (r *drillRun) otherFindings() string {
	v := r.verdict
	if v == nil || v.Duplicates+v.Conflicts+v.HashMismatches == 0 {
		return ""
	}
	return fmt.Sprintf("seqbus verify: duplicates %d, conflicts %d, hash mismatches %d", v.Duplicates, v.Conflicts, v.HashMismatches)
}

func join(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}
