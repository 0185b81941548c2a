package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The faults a run injects, one at a time, each on a cluster that is
// whole (a primary holding the lease, every other node in its in-sync
// set, answers moving): what a venue's processes meet in production. The
// delays are drawn from the run's seed.
const (
	// KillPrimary: SIGKILL the primary; restart it 0..1 s later, as a
	// standby of whoever the witness promoted.
	KillPrimary = "kill-primary"
	// RestartPrimary: SIGKILL the primary and restart it at once, while
	// its lease is still live at the witness.
	RestartPrimary = "restart-primary"
	// StopPrimary: SIGTERM the primary (a planned stop: it gives its
	// lease up as it exits, so a standby leads at once); restart it
	// 0..1 s later.
	StopPrimary = "stop-primary"
	// KillStandby: SIGKILL a standby; restart it 0..2 s later.
	KillStandby = "kill-standby"
	// StopStandby: SIGTERM a standby (a planned stop: it tells its
	// primary, which stops waiting for its acks at once); restart it
	// 0..2 s later.
	StopStandby = "stop-standby"
	// PausePrimary: SIGSTOP the primary past its lease (lease + 0.2..1 s),
	// then SIGCONT: it must find its lease gone and release nothing.
	PausePrimary = "pause-primary"
	// PauseStandby: SIGSTOP a standby 50 ms..1.5 s, then SIGCONT.
	PauseStandby = "pause-standby"
	// KillAll: SIGKILL every node at once (a power cut of the nodes'
	// rack, a bad deploy); restart them all 0..1 s later. Nothing a
	// client saw may be lost, and a node must lead again from the
	// journals alone.
	KillAll = "kill-all"
	// KillWitness: SIGKILL the witness; restart it 0..1.5 s later from
	// its directory.
	KillWitness = "kill-witness"
	// KillEtcd (--arbiter etcd, in kill-witness's place): SIGKILL one
	// etcd member, the raft leader a third of the time; restart it on
	// its data 0..3 s later. Two members keep the quorum.
	KillEtcd = "kill-etcd"
)

// ProcessFaults are the faults a run draws from by default: they need
// nothing but the processes (no root).
var ProcessFaults = []string{KillPrimary, RestartPrimary, StopPrimary, KillStandby, StopStandby, PausePrimary, PauseStandby, KillWitness, KillAll}

// AllFaults are every fault, the network ones (network.go) and the
// etcd one included.
var AllFaults = append(append(append(slices.Clone(ProcessFaults), NetworkFaults...), DiskFaults...), KillEtcd)

// Arbiters.
const (
	ArbiterWitness = "witness"
	ArbiterEtcd    = "etcd"
)

// applies reports whether fault can run against arbiter: the witness's
// faults need the witness, kill-etcd needs etcd.
func applies(fault, arbiter string) bool {
	switch fault {
	case KillWitness, IsolateWitness, FillWitnessDisk, StallWitnessDisk, HangWitnessFsync:
		return arbiter == ArbiterWitness
	case KillEtcd:
		return arbiter == ArbiterEtcd
	}
	return true
}

// ForArbiter keeps the faults of a group that apply to arbiter, with
// kill-etcd in kill-witness's place for etcd.
func ForArbiter(faults []string, arbiter string) []string {
	if arbiter == "" {
		arbiter = ArbiterWitness
	}
	var out []string
	for _, f := range faults {
		if f == KillWitness && arbiter == ArbiterEtcd {
			f = KillEtcd
		}
		if applies(f, arbiter) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// faultGroups are the names that stand for several faults.
var faultGroups = map[string][]string{"process": ProcessFaults, "network": NetworkFaults, "disk": DiskFaults, "all": AllFaults}

// ParseFaults reads a comma-separated list of fault names and groups
// ("process", "network", "disk", "all"); a group stands for its faults that
// apply to arbiter (ForArbiter), without the hang faults on a host that
// cannot run them (CheckHang). Config.Check refuses a named fault that
// does not apply, or cannot run.
func ParseFaults(s, arbiter string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		names, ok := faultGroups[name]
		if ok {
			names = ForArbiter(names, arbiter)
			if CheckHang() != nil {
				names = slices.DeleteFunc(slices.Clone(names), func(f string) bool { return slices.Contains(hangFaults, f) })
			}
		} else {
			names = []string{name}
		}
		for _, n := range names {
			if !slices.Contains(AllFaults, n) {
				return nil, fmt.Errorf("unknown fault %q (%s, or process, network, disk, all)", n, strings.Join(AllFaults, ", "))
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// step is one fault of the schedule: which, the calm before it, how long
// the fault lasts (a pause, or the time until a killed process restarts)
// and which standby it hits, by rank among the standbys (modulo their
// number when it runs).
type step struct {
	fault   string
	calm    time.Duration
	hold    time.Duration
	standby int
	// lossMod: Loss drops one datagram in lossMod (3..20: 33..5 %).
	lossMod int
	// untilFailed: a node's disk fault holds the disk full past hold
	// until the node's journal fails (at most fillMax).
	untilFailed bool
}

// schedule draws the steps of a run: the same seed and faults give the
// same steps (the timing of the processes is the machine's).
type schedule struct {
	rng    *rand.Rand
	faults []string
	lease  time.Duration
}

func newSchedule(seed uint64, faults []string, lease time.Duration) *schedule {
	return &schedule{rng: rand.New(rand.NewPCG(seed, 0x5e9b05)), faults: faults, lease: lease}
}

// between is a duration in [lo, hi).
func (s *schedule) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

func (s *schedule) next() step {
	st := step{fault: s.faults[s.rng.IntN(len(s.faults))], calm: s.between(300*time.Millisecond, 1500*time.Millisecond), standby: s.rng.IntN(1 << 16)}
	switch st.fault {
	case KillPrimary, StopPrimary, KillAll:
		st.hold = s.between(0, time.Second)
	case KillStandby, StopStandby:
		st.hold = s.between(0, 2*time.Second)
	case PausePrimary:
		st.hold = s.lease + s.between(200*time.Millisecond, time.Second)
	case PauseStandby:
		st.hold = s.between(50*time.Millisecond, 1500*time.Millisecond)
	case KillWitness:
		st.hold = s.between(0, 1500*time.Millisecond)
	case KillEtcd:
		st.hold = s.between(0, 3*time.Second)
	case IsolatePrimary:
		st.hold = s.lease + s.between(200*time.Millisecond, 1500*time.Millisecond)
	case IsolateStandby:
		st.hold = s.between(200*time.Millisecond, 3*time.Second)
	case IsolateWitness:
		st.hold = s.between(200*time.Millisecond, 2*time.Second)
	case FillPrimaryDisk, FillStandbyDisk:
		st.hold, st.untilFailed = s.between(300*time.Millisecond, 3*time.Second), s.rng.IntN(2) == 0
	case FillWitnessDisk:
		st.hold = s.between(300*time.Millisecond, 3*time.Second)
	case StallPrimaryDisk:
		st.hold = s.between(200*time.Millisecond, s.lease+1500*time.Millisecond)
	case StallStandbyDisk, StallWitnessDisk:
		st.hold = s.between(200*time.Millisecond, 3*time.Second)
	case HangPrimaryFsync, HangStandbyFsync, HangWitnessFsync:
		st.hold = s.between(300*time.Millisecond, 4*time.Second)
	case Loss:
		st.hold, st.lossMod = s.between(time.Second, 4*time.Second), 3+s.rng.IntN(18)
	}
	return st
}
