// Package demo runs `seqbus demo`: the whole product on loopback over
// internal/cluster. A witness and two nodes run as child processes of
// the seqbus binary, a load client in this process follows the lease
// holder; partway through the demo SIGKILLs the primary and shows the
// failover, then checks (internal/verdict) that nothing a client saw was
// lost. A stall watchdog stops it, showing each process's state, when
// answers stop moving. Everything it prints goes to Config.Out.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/verdict"
)

// demo runs the whole product on loopback: a witness and two nodes as
// child processes of this binary (internal/cluster), and a load client in
// this process that follows the lease holder. Partway through it SIGKILLs
// the primary and shows the failover, then checks that nothing a client
// saw was lost.
type demo struct {
	*cluster.Local
	flags   Config
	key     *auth.MasterKey
	keyArgs []string
	mdGroup netip.AddrPort
	rec     *client.Recorder
	record  string
	first   uint32
	load    *cluster.Load
	md      *client.MarketData
	// The failover as the demo saw it.
	killedAt, promotedAt time.Time
	second               uint32
	// The stall watchdog (stall.go): when answers last moved, and
	// the error that stopped the demo (nil: none).
	lastAnswered uint64
	lastMoved    time.Time
	stall        error
	out          io.Writer
}

// Config is the demo's flags.
// demoSegmentBytes is the demo nodes' --segment-bytes.
const demoSegmentBytes = 16 << 20

type Config struct {
	Bin string // the seqbus binary: the witness and nodes are its subcommands
	// Rate, Duration: the load client's commands per second, for this long.
	Rate     float64
	Duration time.Duration
	// KillAfter: SIGKILL the primary this long into the load (0: never).
	KillAfter time.Duration
	Keep      bool   // keep the demo's directory (logs, journals)
	NoAuth    bool   // run without frame authentication
	Record    string // the client's record ("": client.jsonl in the directory)
	Fsync     string // the nodes' --fsync ("": group)
	// Engine is the nodes' engine configuration, for the verifier.
	Engine engine.Config
	// Out receives the progress, the summary and the verdict.
	Out io.Writer
}

// Check checks the settings `seqbus demo`'s flags give (every error a
// flagcheck.UsageError naming its flag): the load must have a rate, a
// duration and at least one command, the kill must fall inside the
// load, the fsync policy must be one, and a --record file must be one
// this process can create.
func (cfg *Config) Check() error {
	err := flagcheck.First(flagcheck.Rate("rate", cfg.Rate, client.RateMax), flagcheck.Positive("duration", cfg.Duration),
		flagcheck.NonNegative("kill-after", cfg.KillAfter), flagcheck.Fsync("fsync", cmp.Or(cfg.Fsync, "group")),
		flagcheck.OutputFile("record", cfg.Record))
	switch {
	case err != nil:
		return err
	case cfg.Rate*cfg.Duration.Seconds() < 1:
		return flagcheck.Usagef("--rate %v for --duration %v is less than one command", cfg.Rate, cfg.Duration)
	case cfg.KillAfter >= cfg.Duration:
		return flagcheck.Usagef("--kill-after must be < --duration (%v), got %v (0: never kill)", cfg.Duration, cfg.KillAfter)
	}
	return nil
}

// ErrInterrupted is Run's error when ctx ended it (after it printed the
// summary so far).
var ErrInterrupted = errors.New("interrupted")

// killWaitMax bounds how long past --kill-after the demo waits for the
// standby to be in the in-sync set before it kills the primary anyway.
const killWaitMax = 3 * time.Second

// Run runs the demo: a witness and two nodes as children of cfg.Bin on
// loopback, a load client in this process, the primary killed at
// cfg.KillAfter; it prints as it goes and ends with the verdict. The
// error is the verdict's (lost or conflicting outputs, a stall), a setup
// failure, or ErrInterrupted.
func Run(ctx context.Context, cfg Config) error {
	dir, err := os.MkdirTemp("", "seqbus-demo-")
	if err != nil {
		return err
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	local, err := cluster.NewLocal(cfg.Bin, dir, 2, 77)
	if err != nil {
		return err
	}
	d := &demo{Local: local, flags: cfg, out: cfg.Out}
	defer d.StopAll()
	if err := d.startProcesses(); err != nil {
		return err
	}
	if err := d.waitFirstPrimary(ctx); err != nil {
		return err
	}
	if err := d.startLoad(ctx); err != nil {
		return err
	}
	defer d.md.Close()
	defer d.load.Client.Close()
	interrupted := d.watch(ctx)
	return d.finish(interrupted)
}

// startProcesses makes the key (unless --no-auth) and starts the witness
// and both nodes.
func (d *demo) startProcesses() error {
	mdPort, err := cluster.FreeLoopbackPort()
	if err != nil {
		return err
	}
	d.mdGroup = cluster.RandomGroup(78, mdPort)
	fmt.Fprintf(d.out, "seqbus demo on loopback (multicast %s pinned to lo, TTL 0); files in %s%s\n", d.Group, d.Dir, keepNote(d.flags.Keep))
	if !d.flags.NoAuth {
		keyPath := filepath.Join(d.Dir, "seqbus.key")
		k, err := auth.Keygen(keyPath)
		if err != nil {
			return err
		}
		d.key, d.keyArgs = &k, []string{"--key", keyPath}
		fmt.Fprintf(d.out, "every frame is authenticated (HMAC-SHA256, key %s; --no-auth to compare)\n", keyPath)
	}
	if err := d.StartWitness(nil, d.WitnessKeyArgs(d.keyArgs)...); err != nil {
		return err
	}
	for _, id := range d.IDs() {
		args := append([]string{"node"}, d.NodeArgs(id)...)
		// --insync-timeout 1s: on a shared machine a slow fdatasync (the
		// standby acks only what is durable) can hold the standby's ack
		// past the default 200 ms; the primary then rightly removes it
		// from the in-sync set, and a kill right after halts the market
		// by design, which is not the failover the demo shows. The drills
		// and the e2e failover tests run with the same bound.
		fsync := d.flags.Fsync
		if fsync == "" {
			fsync = "group"
		}
		args = append(args, "--market-data", d.mdGroup.String(), "--fsync", fsync, "--insync-timeout", "1s")
		// 16 MiB segments: a node preallocates its segment and the next
		// one (journal.Options.PrepareAhead), and the demo's directory is
		// in $TMPDIR, which is memory on many systems; a default run
		// (40k commands, 2.4 MB of journal) never rolls, a long one does.
		args = append(args, "--segment-bytes", strconv.Itoa(demoSegmentBytes))
		if err := d.Start(cluster.NodeName(id), append(args, d.keyArgs...)...); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) waitFirstPrimary(ctx context.Context) error {
	start := time.Now()
	first, _, err := d.WaitPrimary(ctx, 0, 0, 10*time.Second)
	switch {
	case errors.Is(err, cluster.ErrNoPrimary):
		return errors.New("no node became primary within 10 s (see the logs with --keep)")
	case err != nil:
		fmt.Fprintln(d.out, "\ninterrupted before the load started: stopping every process")
		return ErrInterrupted
	}
	d.first = first
	fmt.Fprintf(d.out, "witness up; node %d holds the lease (%v)\n", first, time.Since(start).Round(time.Millisecond))
	return nil
}

// startLoad subscribes to the market data and starts the client's load,
// recording every output it receives.
func (d *demo) startLoad(ctx context.Context) error {
	md, err := client.OpenMarketData(client.MDOptions{Group: d.mdGroup, Iface: "lo", Key: d.key, Stream: 1, Recovery: d.Addrs()})
	if err != nil {
		return err
	}
	d.record = d.flags.Record
	if d.record == "" {
		d.record = filepath.Join(d.Dir, "client.jsonl")
	}
	rec, err := client.CreateRecorder(d.record)
	if err != nil {
		md.Close()
		return fmt.Errorf("--record: %v", err)
	}
	const session = 42
	count := uint64(d.flags.Rate * d.flags.Duration.Seconds())
	d.load, err = cluster.StartLoad(ctx, client.Options{Core: client.Config{Session: session}, Primary: d.Nodes[d.first],
		Witness: d.Witness, Nodes: d.Nodes, Key: d.key, Recorder: rec,
		Poll: true}, // Load's paced generator reads the answers itself
		client.LoadConfig{Rate: d.flags.Rate, Count: count, Instruments: 4, Seed: 7, Drain: 20 * time.Second})
	if err != nil {
		rec.Close()
		md.Close()
		return err
	}
	d.md, d.rec = md, rec
	return nil
}

// watch prints the cluster every 500 ms while the load runs, kills the
// primary at --kill-after and times the failover. It reports whether the
// demo was interrupted.
func (d *demo) watch(ctx context.Context) (interrupted bool) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	loadStart := time.Now()
	for {
		select {
		case <-d.load.Done():
			return false
		case <-ctx.Done():
			// The load sees the same context and stops at once; wait
			// for its report, then print the summary so far.
			fmt.Fprintf(d.out, "\ninterrupted after %v: stopping every process; the summary so far:\n", time.Since(loadStart).Round(time.Millisecond))
			<-d.load.Done()
			return true
		case <-tick.C:
		}
		st := d.load.Client.Stats()
		if d.stalled(st.Answered) {
			d.load.Stop(time.Second)
			return true
		}
		pid, ps := d.Primary()
		// The rate and the p99 are of the same answers (one read):
		// counting the client's answers apart from the histogram let a
		// line show answers and an empty p99 ("4 cmd/s ... p99=0µs").
		p99, answers := d.load.IntervalLatency(99)
		fmt.Fprintln(d.out, progressLine(time.Since(loadStart), float64(answers)*2, pid, ps.Epoch, ps.Released, p99))
		if d.flags.KillAfter > 0 && d.killedAt.IsZero() && time.Since(loadStart) >= d.flags.KillAfter {
			if !d.maybeKill(pid, ps, time.Since(loadStart)) {
				continue
			}
		}
		d.notePromotion()
	}
}

// progressLine is the demo's line every half second. p99 is that of the
// answers of the last half second (the summary gives the whole run's), in
// whole microseconds whatever its size (a Duration's %v switches to
// "1.2ms" above a millisecond, and the steady state is read in µs).
// primary 0 is no primary (between the kill and the promotion): no node
// to name, and no epoch or release watermark; a half second with no
// answer has no p99.
func progressLine(elapsed time.Duration, answeredPerSec float64, primary uint32, epoch, released uint64, p99 time.Duration) string {
	lead := fmt.Sprintf("primary=node%d epoch=%d released=%-7d", primary, epoch, released)
	if primary == 0 {
		lead = fmt.Sprintf("%-38s", "primary=none (no node leads)")
	}
	q := fmt.Sprintf("p99=%dµs", p99.Round(time.Microsecond).Microseconds())
	if answeredPerSec == 0 {
		q = "p99=-"
	}
	return fmt.Sprintf("%5.1fs  %6.0f cmd/s answered  %s %s", elapsed.Seconds(), answeredPerSec, lead, q)
}

// maybeKill kills the first primary, unless it should wait for the
// standby to be back in the in-sync set (it reports whether it killed).
func (d *demo) maybeKill(pid uint32, ps cluster.Status, into time.Duration) bool {
	// The failover the demo shows needs a standby the witness may
	// promote: one in the in-sync set. On a loaded machine the primary
	// may have just removed a standby that stalled; a kill then halts the
	// market by design (nobody may lead), so wait for it to be added
	// back, within a bound.
	other := 3 - d.first
	inSync := pid == d.first && slices.Contains(ps.InSync.Members, other)
	if !inSync && into < d.flags.KillAfter+killWaitMax {
		fmt.Fprintf(d.out, ">>> waiting for node%d to be back in the in-sync set before the kill\n", other)
		return false
	}
	if !inSync {
		fmt.Fprintf(d.out, ">>> node%d is not in the in-sync set: the witness will not promote it, so this kill halts the market (by design)\n", other)
	}
	fmt.Fprintf(d.out, ">>> SIGKILL node%d (the primary)\n", d.first)
	d.Kill(d.first)
	d.killedAt = time.Now()
	return true
}

// notePromotion notes the promotion (the load times the answers' outage).
func (d *demo) notePromotion() {
	if !d.killedAt.IsZero() && d.promotedAt.IsZero() {
		if id, _ := d.Primary(); id != 0 && id != d.first {
			d.second, d.promotedAt = id, time.Now()
			fmt.Fprintf(d.out, ">>> node%d promoted\n", d.second)
		}
	}
}

// finish stops everything, verifies the history and prints the summary
// and the verdict.
func (d *demo) finish(interrupted bool) error {
	fmt.Fprintln(d.out)
	final, _ := d.Primary()
	if final == 0 {
		final = d.first
	}
	cluster.MDCatchUp(d.md, func() uint64 { s, _ := d.Status(final); return s.MD.Released }, 3*time.Second)
	d.StopAll()
	// Nothing a client saw may be missing from the final primary's
	// history, nor differ from it: seqbus verify's check, on the record.
	d.load.Client.Close()
	if err := d.rec.Close(); err != nil {
		return err
	}
	res, err := d.Verdict(d.record, final, d.flags.Engine)
	if err != nil {
		return err
	}
	rep, loadErr := d.load.Result()
	d.printSummary(rep, res, final)
	switch {
	case d.stall != nil:
		return d.stall
	case interrupted:
		return ErrInterrupted
	case loadErr != nil:
		return loadErr
	}
	if err := cluster.Broken(res, d.md.Tracker()); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "  verdict: OK, nothing a client saw was lost")
	return nil
}

func (d *demo) printSummary(rep client.LoadReport, res *verdict.Result, final uint32) {
	st := rep.Stats
	fmt.Fprintf(d.out, "\nsummary\n  commands sent %d, answered %d (acks %d, rejects %d), resent %d, answered as duplicates %d\n",
		rep.Sent, st.Answered, st.Acks, st.Rejects, st.Resent, st.Duplicates)
	fmt.Fprintf(d.out, "  lost (received but not in node%d's history): %d\n", final, res.Lost)
	for _, s := range res.Sessions {
		fmt.Fprintf(d.out, "  session %d: delivered %d of its %d outputs in node%d's history (missing %d, duplicated %d, out of order %d, not yet received at the end %d), %d by replay, of them %d executions recovered\n",
			s.Session, s.Delivered-s.Duplicated, s.History, final, s.Missing, s.Duplicated, s.OutOfOrder, s.Tail, s.Replayed, s.ReplayedExecutions)
	}
	cluster.WriteVerdict(d.out, d.record, d.Local, res)
	fst, _ := d.Status(final)
	fmt.Fprintln(d.out, "  "+d.md.Tracker().Summary(fst.MD.Republished))
	epochs, _ := epochSummary(d.Dir, d.IDs())
	fmt.Fprintln(d.out, "  "+epochs)
	if !d.killedAt.IsZero() {
		d.writeFailover()
		fmt.Fprintf(d.out, "  timeline by step (from node%d's log%s):\n", d.second, logNote(d.flags.Keep, d.NodeLog(d.second)))
		cluster.WriteTimeline(d.out, d.NodeLog(d.second))
	}
	l := d.load
	fmt.Fprintf(d.out, "  client round trip (from intended send time, HDR): p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n",
		us(l.Latency(50)), us(l.Latency(90)), us(l.Latency(99)), us(l.Latency(99.9)), us(l.Latency(101)))
}

// writeFailover times the failover: the promotion and the first release
// by the new primary's log (the status poll sees them up to 500 ms
// late), the outage by the client's longest silence.
func (d *demo) writeFailover() {
	promoted := d.promotedAt.Sub(d.killedAt).Round(time.Millisecond)
	how := "status polled every 500 ms"
	if l, ok := cluster.FindLogFile(d.NodeLog(d.second), "PROMOTED", d.killedAt); ok && !l.At.IsZero() {
		promoted, how = l.At.Sub(d.killedAt).Round(time.Millisecond), fmt.Sprintf("node%d's log", d.second)
	}
	fmt.Fprintf(d.out, "  failover: primary killed -> node%d promoted in %v (lease %v; by %s)\n", d.second, promoted, time.Second, how)
	if l, ok := cluster.FindLogFile(d.WitnessLog(), "witness: new epoch granted", d.killedAt); ok {
		fmt.Fprintf(d.out, "  the witness granted epoch %s to node%s %v after the old lease ended\n",
			l.Fields["epoch"], l.Fields["node"], l.Duration("after_prev_lease_ended").Round(100*time.Microsecond))
	}
	if l, ok := cluster.FindLogFile(d.NodeLog(d.second), "first release after promotion", d.killedAt); ok {
		fmt.Fprintf(d.out, "  first release %v after the promotion\n", l.Duration("after").Round(100*time.Microsecond))
	}
	// The client's longest silence is the outage: the answer that ended
	// it is when answers resumed, to the client's clock.
	if g := d.load.LongestSilence(); g.To.After(d.killedAt) {
		fmt.Fprintf(d.out, "  answers resumed %v after the kill (the client went %v without an answer)\n",
			g.To.Sub(d.killedAt).Round(time.Millisecond), g.Len().Round(time.Millisecond))
	}
}

// keepNote and logNote say where the files are only while they exist:
// without --keep the demo deletes its directory when it ends.
func keepNote(keep bool) string {
	if keep {
		return " (kept: --keep)"
	}
	return " (deleted at the end; --keep keeps them)"
}

func logNote(keep bool, path string) string {
	if keep {
		return ", kept in " + path
	}
	return "; --keep keeps the logs"
}

func us(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
