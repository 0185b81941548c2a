// Package chaos runs `seqbus chaos`: the product on loopback (a witness
// and 2..5 nodes as child processes of the seqbus binary, over
// internal/cluster) under a client's steady load, while a seeded
// schedule injects one fault after another: the primary or a standby
// SIGKILLed and restarted, either one SIGSTOPped (the primary past its
// lease), the witness SIGKILLed and restarted (faults.go). Before each
// fault it waits for the cluster to be whole again: a primary holding
// the lease with every other node in its in-sync set, and answers
// moving, so no fault meets a market halted by design, and a cluster that
// does not recover within RecoverMax fails the run, showing every
// process. At the end it checks what the demo checks: nothing a client
// saw was lost, duplicated or contradicted, the replicas' state hashes
// agree (internal/verdict), and the market-data feed has neither gap nor
// conflict.
package chaos

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
	"strings"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/verdict"
	"github.com/seqbus/seqbus/journal"
)

// Config is a chaos run's settings (`seqbus chaos`'s flags).
type Config struct {
	Bin string // the seqbus binary: the witness and nodes are its subcommands
	// Nodes in the cluster, 2..MaxNodes.
	Nodes int
	// Duration of the client's load; faults stop TailCalm before its end.
	Duration time.Duration
	// Rounds bounds the faults injected (0: as many as fit in Duration).
	Rounds int
	// Seed draws the faults, their order and their delays.
	Seed uint64
	// Rate is the client's commands per second.
	Rate float64
	// Fsync is the nodes' --fsync ("": group).
	Fsync string
	// Arbiter is the lease's: ArbiterWitness ("": it) or ArbiterEtcd (a
	// 3-member etcd cluster, children of the run like the nodes).
	Arbiter string
	// Faults are the faults drawn from (nil: ProcessFaults). A network
	// fault runs the whole run again in a network namespace of its own
	// (network.go): Args are the arguments that start it (`chaos` and
	// its flags).
	Faults []string
	Args   []string
	Keep   bool // keep the run's directory (logs, journals)
	// Engine is the nodes' engine configuration, for the verifier.
	Engine engine.Config
	// Out receives each fault as it happens, the summary and the verdict.
	Out io.Writer
}

// MaxNodes bounds Config.Nodes: the witness's set and the machine.
const MaxNodes = 5

const (
	// RecoverMax bounds the wait for a whole cluster after a fault.
	RecoverMax = 20 * time.Second
	// TailCalm is the end of the load left without faults, so the last
	// failover's answers and replays arrive before the verdict.
	TailCalm = 3 * time.Second
	// lease is the nodes' and the witness's lease (their default).
	lease = time.Duration(arbiter.DefaultLeaseDurationNs)
)

// MinDuration is the shortest load a run takes: a fault, its recovery
// and TailCalm.
const MinDuration = TailCalm + 5*time.Second

// Check refuses settings a run cannot use, as usage errors naming the
// flag (internal/flagcheck), before anything starts.
func (c Config) Check() error {
	if err := flagcheck.First(flagcheck.Range("nodes", c.Nodes, 2, MaxNodes), flagcheck.NonNegative("rounds", c.Rounds),
		flagcheck.Rate("rate", c.Rate, client.RateMax)); err != nil {
		return err
	}
	if c.Duration < MinDuration {
		return flagcheck.Usagef("--duration must be at least %v (a fault, its recovery and %v of calm at the end), got %v", MinDuration, TailCalm, c.Duration)
	}
	if _, err := journal.ParseSyncPolicy(c.Fsync); c.Fsync != "" && err != nil {
		return flagcheck.Usagef("--fsync: %v", err)
	}
	arb := c.arbiter()
	if arb != ArbiterWitness && arb != ArbiterEtcd {
		return flagcheck.Usagef("--arbiter: want witness or etcd, got %q", c.Arbiter)
	}
	if _, err := os.Stat(cluster.EtcdBinary); arb == ArbiterEtcd && err != nil {
		return flagcheck.Usagef("--arbiter etcd: %s missing (scripts/setup installs etcd-server)", cluster.EtcdBinary)
	}
	for _, f := range c.Faults {
		if _, err := ParseFaults(f, arb); err != nil {
			return flagcheck.Usagef("--faults: %v", err)
		}
		if !applies(f, arb) {
			return flagcheck.Usagef("--faults: %s does not apply to --arbiter %s", f, arb)
		}
	}
	if needsNetwork(c.Faults) {
		if err := CheckNetwork(); err != nil {
			return flagcheck.Usagef("--faults: %v", err)
		}
	}
	if needsDisk(c.Faults) {
		if err := CheckDisk(); err != nil {
			return flagcheck.Usagef("--faults: %v", err)
		}
	}
	for _, f := range c.Faults {
		if slices.Contains(hangFaults, f) {
			if err := CheckHang(); err != nil {
				return flagcheck.Usagef("--faults: %v", err)
			}
		}
	}
	return nil
}

// arbiter is Arbiter with its default.
func (c Config) arbiter() string {
	if c.Arbiter == "" {
		return ArbiterWitness
	}
	return c.Arbiter
}

// leaseFlags are the nodes' lease flags: with etcd, what etcdarb
// recommends beside a 250 ms election timeout (a 2 s lease, which
// outlasts an etcd leader election); with the witness, its defaults.
func (c Config) leaseFlags() []string {
	if c.arbiter() == ArbiterEtcd {
		return []string{"--lease", "2s", "--renew", "500ms", "--margin", "100ms", "--retry", "50ms"}
	}
	return nil
}

// leaseLen is the nodes' lease.
func (c Config) leaseLen() time.Duration {
	if c.arbiter() == ArbiterEtcd {
		return 2 * time.Second
	}
	return lease
}

// ErrInterrupted is Run's error when ctx ended it.
var ErrInterrupted = errors.New("interrupted")

// run is one chaos run.
type run struct {
	*cluster.Local
	cfg      Config
	out      io.Writer
	keyArgs  []string
	key      *auth.MasterKey
	mdGroup  netip.AddrPort
	load     *cluster.Load
	md       *client.MarketData
	rec      *client.Recorder
	record   string
	sched    *schedule
	start    time.Time
	injected map[string]int
	fw       *firewall // nil unless the run has its own network
	disks    *disks    // nil unless the run has its own filesystems
	etcd     *cluster.Etcd
	unfollow func() // stops following etcd's holder (nil: none)
}

// Run runs cfg: it starts the cluster and the load, injects the faults,
// lets the load end and prints the verdict. The error is the verdict's
// (lost, duplicated or conflicting outputs, a market-data gap), a cluster
// that did not recover, a setup failure, or ErrInterrupted.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = ForArbiter(ProcessFaults, cfg.arbiter())
	}
	isolated := os.Getenv(isolatedEnv) == "1"
	if needsIsolation(cfg.Faults) && !isolated {
		return runIsolated(ctx, cfg, cfg.Out)
	}
	var fw *firewall
	if isolated && needsNetwork(cfg.Faults) {
		f, err := setUpNetwork()
		if err != nil {
			return err
		}
		fw = &f
	}
	dir, err := os.MkdirTemp("", "seqbus-chaos-")
	if err != nil {
		return err
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	local, err := cluster.NewLocal(cfg.Bin, dir, cfg.Nodes, 79)
	if err != nil {
		return err
	}
	r := &run{Local: local, cfg: cfg, out: cfg.Out, fw: fw, sched: newSchedule(cfg.Seed, cfg.Faults, cfg.leaseLen()), injected: map[string]int{}}
	if needsDisk(cfg.Faults) {
		if r.disks, err = setUpDisks(filepath.Join(dir, "disks"), r.diskDirs()); err != nil {
			return err
		}
		defer r.disks.unmount() // before the directory is removed
	}
	defer r.StopAll()
	where := "loopback"
	if fw != nil {
		where = "the loopback of a network namespace of its own"
	}
	if r.disks != nil {
		where += fmt.Sprintf(", each node's and the witness's directory on an ext4 filesystem of its own (%d MiB)", diskImageBytes>>20)
	}
	arb := "a witness"
	if cfg.arbiter() == ArbiterEtcd {
		arb = "a 3-member etcd cluster"
	}
	fmt.Fprintf(r.out, "seqbus chaos: %d nodes and %s on %s (multicast %s on lo), %v of load at %v/s, faults %s, seed %d; files in %s%s\n",
		cfg.Nodes, arb, where, r.Group, cfg.Duration, cfg.Rate, strings.Join(cfg.Faults, ","), cfg.Seed, dir, keepNote(cfg.Keep))
	if err := r.startProcesses(ctx); err != nil {
		return err
	}
	if _, _, err := r.WaitPrimary(ctx, 0, 0, firstPrimaryMax); err != nil {
		return r.setupFailed(ctx, err)
	}
	if err := r.startLoad(ctx); err != nil {
		return err
	}
	defer r.md.Close()
	defer r.load.Client.Close()
	faultErr := r.inject(ctx)
	if faultErr == nil {
		select {
		case <-r.load.Done():
		case <-ctx.Done():
		}
	} else {
		r.load.Stop(time.Second)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(r.out, "\ninterrupted: stopping every process; the verdict so far:")
		faultErr = ErrInterrupted
	}
	return r.finish(faultErr)
}

func keepNote(keep bool) string {
	if keep {
		return " (kept: --keep)"
	}
	return " (deleted at the end; --keep keeps them)"
}

func (r *run) setupFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	fmt.Fprintf(r.out, "no node became primary within %v (%v); the processes:\n", firstPrimaryMax, err)
	r.WriteProcesses(r.out, 8)
	return fmt.Errorf("no node became primary within %v", firstPrimaryMax)
}

// firstPrimaryMax bounds the wait for the first primary.
const firstPrimaryMax = 15 * time.Second

// startProcesses makes the key and starts the arbiter (the witness, or
// etcd) and every node.
func (r *run) startProcesses(ctx context.Context) error {
	mdPort, err := cluster.FreeLoopbackPort()
	if err != nil {
		return err
	}
	r.mdGroup = cluster.RandomGroup(80, mdPort)
	keyPath := filepath.Join(r.Dir, "seqbus.key")
	k, err := auth.Keygen(keyPath)
	if err != nil {
		return err
	}
	r.key, r.keyArgs = &k, []string{"--key", keyPath}
	if r.cfg.arbiter() == ArbiterEtcd {
		// etcdarb's recommended raft timing (25 ms heartbeat, 250 ms
		// election timeout).
		if r.etcd, err = cluster.StartEtcd(ctx, &r.Procs, 25, 250, 20*time.Second); err != nil {
			return err
		}
		r.Arbiter = r.etcd.URL()
	} else if err := r.startWitness(); err != nil {
		return err
	}
	for _, id := range r.IDs() {
		if err := r.startNode(id); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) startWitness() error {
	return r.StartWitness(nil, r.WitnessKeyArgs(r.keyArgs)...)
}

// startNode starts node id, or starts it again after a kill (its
// journal and snapshots are where it left them). --insync-timeout 1s as
// in the demo: on a shared machine a slow fdatasync can hold a
// standby's ack past the default, and the run waits for a whole cluster
// before each fault anyway.
func (r *run) startNode(id uint32) error {
	fsync := r.cfg.Fsync
	if fsync == "" {
		fsync = "group"
	}
	args := append([]string{"node"}, r.NodeArgs(id)...)
	args = append(args, "--market-data", r.mdGroup.String(), "--fsync", fsync, "--insync-timeout", "1s")
	args = append(args, r.cfg.leaseFlags()...)
	if r.disks != nil {
		args = append(args, "--segment-bytes", strconv.Itoa(diskSegmentBytes), "--snapshot-every", strconv.Itoa(diskSnapshotEvery))
	}
	if err := r.Start(cluster.NodeName(id), append(args, r.keyArgs...)...); err != nil {
		return err
	}
	r.Dead[id] = false
	return nil
}

// startLoad subscribes to the market data and starts the client's load,
// recording every output it receives.
func (r *run) startLoad(ctx context.Context) error {
	md, err := client.OpenMarketData(client.MDOptions{Group: r.mdGroup, Iface: "lo", Key: r.key, Stream: 1, Recovery: r.Addrs()})
	if err != nil {
		return err
	}
	r.record = filepath.Join(r.Dir, "client.jsonl")
	rec, err := client.CreateRecorder(r.record)
	if err != nil {
		md.Close()
		return err
	}
	first, _ := r.Primary()
	count := uint64(r.cfg.Rate * r.cfg.Duration.Seconds())
	opts := client.Options{Core: client.Config{Session: 43}, Primary: r.Nodes[first], Nodes: r.Nodes, Key: r.key, Recorder: rec, Poll: true}
	if r.etcd == nil {
		opts.Witness = r.Witness
	}
	r.load, err = cluster.StartLoad(ctx, opts,
		client.LoadConfig{Rate: r.cfg.Rate, Count: count, Instruments: 4, Seed: r.cfg.Seed, Drain: 20 * time.Second})
	if err == nil && r.etcd != nil {
		// No witness to ask who leads: follow etcd's holder.
		if r.unfollow, err = cluster.FollowEtcd(r.etcd.Endpoints(), 1, r.Nodes, r.load.Client); err != nil {
			r.load.Stop(time.Second)
		}
	}
	if err != nil {
		rec.Close()
		md.Close()
		return err
	}
	r.md, r.rec, r.start = md, rec, time.Now()
	return nil
}

// inject runs the schedule until the rounds are done or the load is
// within TailCalm of its end: each fault on a whole cluster.
func (r *run) inject(ctx context.Context) error {
	end := r.start.Add(r.cfg.Duration - TailCalm)
	for round := 1; r.cfg.Rounds == 0 || round <= r.cfg.Rounds; round++ {
		if err := r.waitWhole(ctx, round-1); err != nil {
			return err
		}
		st := r.sched.next()
		if !sleep(ctx, st.calm) {
			return nil
		}
		if time.Now().After(end) {
			return nil
		}
		r.load.MarkWindow()
		line, err := r.fault(ctx, st)
		fmt.Fprintf(r.out, "%6.1fs  fault %d: %s\n", time.Since(r.start).Seconds(), round, line)
		if err != nil {
			return err
		}
		r.injected[st.fault]++
	}
	return r.waitWhole(ctx, r.cfg.Rounds)
}

// sleep waits d unless ctx ends first (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitWhole waits, at most RecoverMax, for a whole cluster: a primary
// holding the lease, every other node in its in-sync set, and the client
// answered since the wait began. after is the fault it follows (0: none).
func (r *run) waitWhole(ctx context.Context, after int) error {
	begin := time.Now()
	why, err := r.untilWhole(ctx)
	switch {
	case err == nil:
		if after > 0 {
			fmt.Fprintf(r.out, "          whole again %v after fault %d; the client's longest silence since it began %v\n",
				time.Since(begin).Round(time.Millisecond), after, r.load.WindowSilence().Len().Round(time.Millisecond))
		}
		return nil
	case ctx.Err() != nil:
		return nil // Run reports the interruption
	}
	fmt.Fprintf(r.out, "\n>>> the cluster is not whole %v after fault %d (%s); the processes:\n", RecoverMax, after, why)
	r.WriteProcesses(r.out, 12)
	return fmt.Errorf("the cluster did not recover within %v of fault %d: %s", RecoverMax, after, why)
}

// untilWhole polls, at most RecoverMax, for a whole cluster (whole, with
// answers since the call); on a timeout or ctx's end it returns the error
// and what kept the cluster from being whole.
func (r *run) untilWhole(ctx context.Context) (why string, err error) {
	answered := r.load.Client.Stats().Answered
	err = cluster.Poll(ctx, RecoverMax, 20*time.Millisecond, func() bool {
		why = r.whole(answered)
		return why == ""
	})
	return why, err
}

// whole says what keeps the cluster from being whole ("" when it is).
func (r *run) whole(answered uint64) string {
	select {
	case <-r.load.Done():
		return "" // nothing left to answer: the end decides
	default:
	}
	p, st := r.Primary()
	switch {
	case p == 0:
		return "no primary"
	case !st.Lease.Held:
		return fmt.Sprintf("node%d is primary without the lease", p)
	case r.load.Client.Stats().Answered == answered:
		return "no answer yet"
	}
	if r.etcd != nil {
		if n := r.etcd.Healthy(); n < cluster.EtcdMembers {
			return fmt.Sprintf("%d of %d etcd members healthy", n, cluster.EtcdMembers)
		}
	}
	for _, id := range r.IDs() {
		if id != p && !slices.Contains(st.InSync.Members, id) {
			return fmt.Sprintf("node%d is not in primary node%d's in-sync set %v", id, p, st.InSync.Members)
		}
	}
	return ""
}

// standby picks a standby of primary p by rank (0 when none).
func (r *run) standby(p uint32, rank int) uint32 {
	var ids []uint32
	for _, id := range r.IDs() {
		if id != p {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	return ids[rank%len(ids)]
}

// fault injects st and returns the line that tells it. Its error is a
// fault that could not be carried out or a cluster that did not elect a
// primary after it.
func (r *run) fault(ctx context.Context, st step) (string, error) {
	p, ps := r.Primary()
	if p == 0 {
		return st.fault + ": no primary", errors.New("no primary before a fault")
	}
	switch st.fault {
	case KillPrimary, RestartPrimary:
		r.Kill(p)
		if err := r.waitExit(cluster.NodeName(p)); err != nil {
			return st.fault, err
		}
		sleep(ctx, st.hold)
		if err := r.startNode(p); err != nil {
			return st.fault, err
		}
		return r.afterPrimaryFault(ctx, fmt.Sprintf("%s: SIGKILL node%d (primary, epoch %d), restarted %v later", st.fault, p, ps.Epoch, st.hold.Round(time.Millisecond)), ps.Epoch)
	case StopPrimary:
		r.Dead[p] = true
		t0 := time.Now()
		if _, err := r.Stop(cluster.NodeName(p), 5*time.Second); err != nil {
			return st.fault, fmt.Errorf("node%d did not exit within 5 s of SIGTERM", p)
		}
		exited := time.Since(t0)
		line := fmt.Sprintf("%s: SIGTERM node%d (primary, epoch %d), exited in %v", st.fault, p, ps.Epoch, exited.Round(time.Millisecond))
		id, nst, err := r.WaitPrimary(ctx, p, ps.Epoch+1, RecoverMax)
		if err != nil {
			if ctx.Err() != nil {
				return line, nil
			}
			return line + "; no new primary", fmt.Errorf("no primary at an epoch above %d within %v", ps.Epoch, RecoverMax)
		}
		line += fmt.Sprintf("; node%d leads epoch %d %v after the SIGTERM", id, nst.Epoch, time.Since(t0).Round(time.Millisecond))
		sleep(ctx, st.hold)
		return line + fmt.Sprintf(", restarted %v later", st.hold.Round(time.Millisecond)), r.startNode(p)
	case PausePrimary:
		if err := r.pauseFor(ctx, p, st.hold); err != nil {
			return st.fault, err
		}
		return r.afterPrimaryFault(ctx, fmt.Sprintf("%s: SIGSTOP node%d (primary, epoch %d) for %v", st.fault, p, ps.Epoch, st.hold.Round(time.Millisecond)), ps.Epoch)
	case KillStandby, StopStandby, PauseStandby:
		return r.standbyFault(ctx, st, r.standby(p, st.standby))
	case KillAll:
		return r.killAll(ctx, st, ps.Epoch)
	case KillEtcd:
		m := st.standby % cluster.EtcdMembers
		if err := r.etcd.Kill(m); err != nil {
			return st.fault, err
		}
		sleep(ctx, st.hold)
		return fmt.Sprintf("%s: SIGKILL %s, restarted %v later", st.fault, r.etcd.Name(m), st.hold.Round(time.Millisecond)), r.etcd.StartMember(m)
	case KillWitness:
		r.Signal("witness", syscall.SIGKILL)
		if err := r.waitExit("witness"); err != nil {
			return st.fault, err
		}
		sleep(ctx, st.hold)
		return fmt.Sprintf("%s: SIGKILL the witness, restarted %v later", st.fault, st.hold.Round(time.Millisecond)), r.startWitness()
	}
	if slices.Contains(NetworkFaults, st.fault) {
		return r.networkFault(ctx, st, p, ps.Epoch)
	}
	if slices.Contains(DiskFaults, st.fault) {
		return r.diskFault(ctx, st, p, ps.Epoch)
	}
	return st.fault, fmt.Errorf("unknown fault %q", st.fault)
}

// killAll SIGKILLs every node, one right after another, waits for them
// all to be gone, and restarts them st.hold later: a newer epoch must
// lead from what the journals hold.
func (r *run) killAll(ctx context.Context, st step, epoch uint64) (string, error) {
	ids := r.IDs()
	for _, id := range ids {
		r.Kill(id)
	}
	for _, id := range ids {
		if err := r.waitExit(cluster.NodeName(id)); err != nil {
			return st.fault, err
		}
	}
	sleep(ctx, st.hold)
	for _, id := range ids {
		if err := r.startNode(id); err != nil {
			return st.fault, err
		}
	}
	return r.afterPrimaryFault(ctx, fmt.Sprintf("%s: SIGKILL all %d nodes (the primary's epoch %d), restarted %v later", st.fault, len(ids), epoch, st.hold.Round(time.Millisecond)), epoch)
}

// pauseFor stops node id (SIGSTOP) for hold, then continues it.
func (r *run) pauseFor(ctx context.Context, id uint32, hold time.Duration) error {
	if err := r.Pause(cluster.NodeName(id), 2*time.Second); err != nil {
		return err
	}
	sleep(ctx, hold)
	r.Signal(cluster.NodeName(id), syscall.SIGCONT)
	return nil
}

// standbyFault stops, kills or pauses standby s (KillStandby,
// StopStandby, PauseStandby) and brings it back.
func (r *run) standbyFault(ctx context.Context, st step, s uint32) (string, error) {
	switch st.fault {
	case KillStandby:
		r.Kill(s)
		if err := r.waitExit(cluster.NodeName(s)); err != nil {
			return st.fault, err
		}
		sleep(ctx, st.hold)
		return fmt.Sprintf("%s: SIGKILL node%d, restarted %v later", st.fault, s, st.hold.Round(time.Millisecond)), r.startNode(s)
	case StopStandby:
		t0 := time.Now()
		if _, err := r.Stop(cluster.NodeName(s), 5*time.Second); err != nil {
			return st.fault, fmt.Errorf("node%d did not exit within 5 s of SIGTERM", s)
		}
		line := fmt.Sprintf("%s: SIGTERM node%d, exited in %v", st.fault, s, time.Since(t0).Round(time.Millisecond))
		sleep(ctx, st.hold)
		return line + fmt.Sprintf(", restarted %v later", st.hold.Round(time.Millisecond)), r.startNode(s)
	case PauseStandby:
		if err := r.pauseFor(ctx, s, st.hold); err != nil {
			return st.fault, err
		}
		return fmt.Sprintf("%s: SIGSTOP node%d for %v", st.fault, s, st.hold.Round(time.Millisecond)), nil
	}
	return st.fault, fmt.Errorf("unknown standby fault %q", st.fault)
}

// networkFault cuts or loses datagrams for st.hold, then heals.
func (r *run) networkFault(ctx context.Context, st step, p uint32, epoch uint64) (string, error) {
	if r.fw == nil {
		return st.fault, errors.New("a network fault outside a network of the run's own")
	}
	var line string
	var err error
	switch st.fault {
	case IsolatePrimary:
		line, err = fmt.Sprintf("%s: cut node%d (primary, epoch %d) off for %v", st.fault, p, epoch, st.hold.Round(time.Millisecond)), r.fw.cut(r.Nodes[p].Port())
	case IsolateStandby:
		s := r.standby(p, st.standby)
		line, err = fmt.Sprintf("%s: cut node%d off for %v", st.fault, s, st.hold.Round(time.Millisecond)), r.fw.cut(r.Nodes[s].Port())
	case IsolateWitness:
		line, err = fmt.Sprintf("%s: cut the witness off for %v", st.fault, st.hold.Round(time.Millisecond)), r.fw.cut(r.Witness.Port())
	case Loss:
		line, err = fmt.Sprintf("%s: drop 1 in %d datagrams for %v", st.fault, st.lossMod, st.hold.Round(time.Millisecond)), r.fw.lose(st.lossMod)
	}
	if err != nil {
		return line, err
	}
	sleep(ctx, st.hold)
	if err := r.fw.heal(); err != nil {
		return line, err
	}
	if st.fault == IsolatePrimary && r.etcd == nil {
		// (With etcd the primary's lease is renewed over TCP, which the
		// cut leaves alone: it keeps leading, without its standbys or
		// clients meanwhile.)
		return r.afterPrimaryFault(ctx, line, epoch)
	}
	return line, nil
}

// waitExit waits for a killed child to be gone, so its ports are free
// for its restart.
func (r *run) waitExit(name string) error {
	_, err := r.Wait(name, 5*time.Second)
	return err
}

// afterPrimaryFault waits for a primary at a newer epoch than the one
// the fault hit and says who leads, and when it was first seen leading:
// a node may have been promoted while the fault lasted (a pause past the
// lease), so that is when the run saw it, not when it was promoted (its
// log's PROMOTED line says that).
func (r *run) afterPrimaryFault(ctx context.Context, line string, epoch uint64) (string, error) {
	t0 := time.Now()
	id, st, err := r.WaitPrimary(ctx, 0, epoch+1, RecoverMax)
	if err != nil {
		if ctx.Err() != nil {
			return line, nil
		}
		return line + "; no new primary", fmt.Errorf("no primary at an epoch above %d within %v", epoch, RecoverMax)
	}
	return fmt.Sprintf("%s; node%d leads epoch %d (seen %v after the fault ended)", line, id, st.Epoch, time.Since(t0).Round(time.Millisecond)), nil
}

// finish stops everything, verifies the history and prints the summary
// and the verdict; faultErr is the fault loop's error, reported after
// the verdict.
func (r *run) finish(faultErr error) error {
	final, _ := r.Primary()
	if final == 0 {
		final = r.IDs()[0]
	}
	if faultErr == nil {
		cluster.MDCatchUp(r.md, func() uint64 { s, _ := r.Status(final); return s.MD.Released }, 3*time.Second)
	}
	if r.unfollow != nil {
		r.unfollow()
	}
	r.StopAll()
	r.load.Client.Close()
	if err := r.rec.Close(); err != nil {
		return err
	}
	res, err := r.Verdict(r.record, final, r.cfg.Engine)
	if err != nil {
		return err
	}
	rep, loadErr := r.load.Result()
	r.printSummary(rep, res, final)
	switch {
	case faultErr != nil:
		return faultErr
	case loadErr != nil:
		return loadErr
	}
	if err := cluster.Broken(res, r.md.Tracker()); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "  verdict: OK, nothing a client saw was lost through %d faults\n", r.faults())
	return nil
}

func (r *run) faults() int {
	n := 0
	for _, c := range r.injected {
		n += c
	}
	return n
}

// replayCommand is the command line that draws the same schedule under
// the same load: every setting that shapes the run.
func (c Config) replayCommand() string {
	cmd := fmt.Sprintf("seqbus chaos --seed %d --nodes %d --arbiter %s --faults %s --duration %v --rate %v --fsync %s",
		c.Seed, c.Nodes, c.arbiter(), strings.Join(c.Faults, ","), c.Duration, c.Rate, cmp.Or(c.Fsync, "group"))
	if c.Rounds > 0 {
		cmd += fmt.Sprintf(" --rounds %d", c.Rounds)
	}
	return cmd
}

func (r *run) printSummary(rep client.LoadReport, res *verdict.Result, final uint32) {
	st := rep.Stats
	var per []string
	for _, f := range AllFaults {
		if c := r.injected[f]; c > 0 {
			per = append(per, fmt.Sprintf("%s %d", f, c))
		}
	}
	fmt.Fprintf(r.out, "\nsummary\n  faults %d (%s); replay with: %s\n", r.faults(), strings.Join(per, ", "), r.cfg.replayCommand())
	fmt.Fprintf(r.out, "  commands sent %d, answered %d (acks %d, rejects %d), resent %d, answered as duplicates %d\n  refused by the client's epoch fence: %d frames of a deposed primary, %d outputs in them (the rest: its replay answers)\n",
		rep.Sent, st.Answered, st.Acks, st.Rejects, st.Resent, st.Duplicates, st.StaleEpoch, st.StaleOutputs)
	fmt.Fprintf(r.out, "  lost (received but not in node%d's history): %d\n", final, res.Lost)
	cluster.WriteVerdict(r.out, r.record, r.Local, res)
	fst, _ := r.Status(final)
	fmt.Fprintln(r.out, "  "+r.md.Tracker().Summary(fst.MD.Republished))
	l := r.load
	fmt.Fprintf(r.out, "  client round trip (from intended send time, HDR): p50 %v  p99 %v  max %v; longest silence %v\n",
		l.Latency(50), l.Latency(99), l.Latency(101), l.LongestSilence().Len().Round(time.Millisecond))
}
