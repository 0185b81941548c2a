package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/seqbus/seqbus/arbiter"
)

// faultKind is one kind of scheduled fault.
type faultKind uint8

const (
	fIsolatePrimary faultKind = iota // two-way: the primary from everyone
	fIsolateWitness                  // two-way: the witness from everyone
	fSplitStandby                    // two-way: one standby from the primary only
	fOneWayIn                        // one-way: the primary hears nothing from one host
	fOneWayOut                       // one-way: nothing the primary sends reaches one host
	fCrash                           // a node loses power; restarts after dur
	fCrashPrimary                    // the primary loses power; restarts after dur
	fPause                           // a node stops running for dur (its clock runs on)
	fPausePrimary                    // the primary pauses
	fWitnessCrash                    // the witness restarts after dur
	fDelaySpike                      // datagrams to and from the witness are late by extra
	numFaultKinds
)

var faultNames = [numFaultKinds]string{
	"isolate-primary", "isolate-witness", "split-standby-from-primary", "one-way-into-primary",
	"one-way-out-of-primary", "crash-node", "crash-primary", "pause-node", "pause-primary",
	"crash-witness", "delay-spike-witness",
}

func (k faultKind) String() string { return faultNames[k] }

// fault is one entry of the schedule; target and pick are drawn up front,
// the primary is resolved when the fault starts.
type fault struct {
	at, dur int64
	kind    faultKind
	node    int    // fCrash, fPause: the node
	pick    uint64 // a random choice made when the fault starts
	extraNs int64  // fDelaySpike
	// standby (scenarios only; genSchedule never sets it): the one-way
	// faults, fPause and fCrash hit a standby of the primary of that
	// moment instead of a host drawn from pick or node.
	standby bool

	// runtime
	active  bool
	target  int
	blocked [][2]int
	// hang: a pause that hangs the node's writeback instead
	// (Options.DiskStalls).
	hang bool
}

// genSchedule draws 2 to 8 faults inside the fault phase.
func genSchedule(r *rand.Rand, faultNs int64, lease arbiter.Config, nodes int) []fault {
	n := 2 + r.IntN(7)
	fs := make([]fault, 0, n)
	for range n {
		f := fault{
			kind: faultKind(r.IntN(int(numFaultKinds))),
			at:   100_000_000 + int64(r.Uint64N(uint64(faultNs-200_000_000))),
			node: 1 + r.IntN(nodes),
			pick: r.Uint64(),
		}
		switch f.kind {
		case fPause, fPausePrimary:
			// Half a lease to three: often longer than the lease.
			f.dur = lease.LeaseDurationNs/2 + int64(r.Uint64N(uint64(lease.LeaseDurationNs*5/2)))
		case fWitnessCrash:
			f.dur = 1_000_000 + int64(r.Uint64N(uint64(2*lease.LeaseDurationNs)))
		case fCrash, fCrashPrimary:
			f.dur = int64(r.Uint64N(1_500_000_000))
		case fDelaySpike:
			f.dur = 100_000_000 + int64(r.Uint64N(1_000_000_000))
			f.extraNs = lease.MarginNs/2 + int64(r.Uint64N(uint64(4*lease.MarginNs)))
		default:
			f.dur = 50_000_000 + int64(r.Uint64N(1_500_000_000))
		}
		fs = append(fs, f)
	}
	return fs
}

func (s *sim) describeSchedule() string {
	p := &s.params
	var b strings.Builder
	fmt.Fprintf(&b, "params: loss %.1f%% dup %.1f%% delay %s+[0,%s) drift-ppm %v sync-always %v group-window %s snapshot-every %d segment %dB send %.0f%%/5ms/client\n",
		float64(p.lossPpm)/1e4, float64(p.dupPpm)/1e4, fmtDur(p.baseDelayNs), fmtDur(p.jitterNs),
		driftPpm(p.ratePpm[1:s.numNodes+1]), p.syncAlways, fmtDur(p.groupWindowNs), p.snapshotEvery, p.segmentBytes, float64(p.sendPpm)/1e4)
	fmt.Fprintf(&b, "faults (%d), then quiet from %s:\n", len(s.faults), fmtNs(s.faultNs))
	for i, f := range s.faults {
		fmt.Fprintf(&b, "  %d. at %s for %s: %s", i+1, fmtNs(f.at), fmtDur(f.dur), f.kind)
		switch f.kind {
		case fCrash, fPause:
			fmt.Fprintf(&b, " node %d", f.node)
		case fDelaySpike:
			fmt.Fprintf(&b, " +%s", fmtDur(f.extraNs))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// currentPrimary is the node that believes it leads (the highest id on a
// tie, which only a bug makes possible), or a node chosen by pick.
func (s *sim) currentPrimary(pick uint64) int {
	p := 0
	for _, sn := range s.nodes[1:] {
		if sn.n != nil && sn.primary {
			p = sn.id
		}
	}
	if p == 0 {
		p = 1 + int(pick%uint64(s.numNodes))
	}
	return p
}

// standbyOf picks a node other than the primary p.
func (s *sim) standbyOf(p int, pick uint64) int {
	n := uint64(s.numNodes)
	sb := 1 + int(pick>>8%n)
	if sb == p {
		sb = 1 + sb%s.numNodes
	}
	return sb
}

func (s *sim) block(f *fault, from, to int) {
	s.blocked[from][to]++
	f.blocked = append(f.blocked, [2]int{from, to})
}

func (s *sim) startFault(i int) {
	f := &s.faults[i]
	if s.quiet {
		return
	}
	f.active = true
	p := s.currentPrimary(f.pick)
	// other: a host other than the primary (a node or the witness).
	other := 1 + int(f.pick>>8%uint64(s.numNodes))
	if other == p {
		other = s.witnessHost
	}
	if f.standby {
		other = s.standbyOf(p, f.pick)
	}
	switch f.kind {
	case fIsolatePrimary, fIsolateWitness, fSplitStandby, fOneWayIn, fOneWayOut:
		s.startPartition(f, p, other)
	case fCrash, fCrashPrimary:
		f.target = f.node
		if f.kind == fCrashPrimary {
			f.target = p
		} else if f.standby {
			f.target = other
		}
		s.installCrash(f.target)
		if s.planned(f, p) {
			s.stopNode(f.target) // a planned stop (Options.Graceful)
		} else {
			s.crashNode(f.target)
		}
	case fPause, fPausePrimary:
		// (Under InlineSync a hung fsync blocks the agent: a pause.)
		f.hang = s.opts.DiskStalls && !s.opts.InlineSync && f.pick>>61&1 == 1
		if !s.startPause(f, p) {
			f.active = false
			return
		}
	case fWitnessCrash:
		if !s.witnessUp {
			f.active = false
			return
		}
		s.witnessUp, s.witness = false, nil
		s.stats.WitnessCrashes++
	case fDelaySpike:
		s.spikeNs = f.extraNs
		for h := 1; h < len(s.hostAddr); h++ {
			if h != s.witnessHost {
				s.spike[s.witnessHost][h]++
				s.spike[h][s.witnessHost]++
			}
		}
		s.stats.Spikes++
	}
	s.logf("FAULT %d starts: %s primary=n%d other=%s target=%d for %s", i+1, f.kind, p, s.hostName[other], f.target, fmtDur(f.dur))
	s.push(event{at: s.now + f.dur, kind: evFaultEnd, host: i})
}

// planned reports whether crash fault f (the primary p) is a planned
// stop instead (Options.Graceful): half the primary crashes, and, on
// another bit of the draw, half the crashes of a standby (bit 58: the
// one that keeps regression seed 10698's standby crash a crash).
func (s *sim) planned(f *fault, p int) bool {
	switch {
	case !s.opts.Graceful:
		return false
	case f.kind == fCrashPrimary:
		return f.pick>>62&1 == 1
	}
	return f.target != p && f.pick>>58&1 == 1
}

// startPartition blocks the links of a partition fault; p is the
// primary, other a host other than it.
func (s *sim) startPartition(f *fault, p, other int) {
	switch f.kind {
	case fIsolatePrimary:
		f.target = p
		for h := 1; h < len(s.hostAddr); h++ {
			if h != p {
				s.block(f, p, h)
				s.block(f, h, p)
			}
		}
	case fIsolateWitness:
		for h := 1; h < len(s.hostAddr); h++ {
			if h != s.witnessHost {
				s.block(f, s.witnessHost, h)
				s.block(f, h, s.witnessHost)
			}
		}
	case fSplitStandby:
		sb := s.standbyOf(p, f.pick)
		s.block(f, p, sb)
		s.block(f, sb, p)
		f.target = sb
	case fOneWayIn:
		s.block(f, other, p)
		f.target = other
	case fOneWayOut:
		s.block(f, p, other)
		f.target = other
	}
	s.stats.Partitions++
}

// startPause pauses the fault's node (reports false when it is down or
// already paused).
func (s *sim) startPause(f *fault, p int) bool {
	f.target = f.node
	if f.kind == fPausePrimary {
		f.target = p
	} else if f.standby {
		f.target = s.standbyOf(p, f.pick)
	}
	sn := s.nodes[f.target]
	if sn.n == nil || sn.paused || sn.hung {
		return false
	}
	if f.hang {
		// Options.DiskStalls: the node runs on, its writes land, and its
		// fsync step (the fsync thread's) does not run: nothing it writes
		// becomes durable until the fault ends.
		sn.hung = true
		s.stats.DiskHangs++
		return true
	}
	sn.paused = true
	sn.gen++
	s.stats.Pauses++
	return true
}

func (s *sim) endFault(i int) {
	f := &s.faults[i]
	if !f.active {
		return
	}
	f.active = false
	for _, b := range f.blocked {
		s.blocked[b[0]][b[1]]--
	}
	f.blocked = nil
	switch f.kind {
	case fCrash, fCrashPrimary:
		if s.nodes[f.target].n == nil {
			s.startNode(f.target)
		}
	case fPause, fPausePrimary:
		if f.hang {
			s.nodes[f.target].hung = false
		} else {
			s.resume(f.target)
		}
	case fWitnessCrash:
		if !s.witnessUp {
			s.startWitness()
		}
	case fDelaySpike:
		for h := 1; h < len(s.hostAddr); h++ {
			if h != s.witnessHost {
				s.spike[s.witnessHost][h]--
				s.spike[h][s.witnessHost]--
			}
		}
	}
	s.logf("FAULT %d ends: %s", i+1, f.kind)
}

// resume runs a paused node again: its clock has run on, and what reached
// its socket buffer is read at once.
func (s *sim) resume(id int) {
	sn := s.nodes[id]
	if sn.n == nil || !sn.paused {
		return
	}
	sn.paused = false
	sn.gen++
	held := sn.held
	sn.held = nil
	s.logf("node %d RESUMED after a pause (%d datagrams were waiting)", id, len(held))
	for _, e := range held {
		if sn.n == nil || sn.paused {
			break
		}
		s.deliverNode(sn, e)
	}
	s.push(event{at: s.now, kind: evNodeTick, host: id, gen: sn.gen})
}

// driftPpm is each node's clock rate as ppm off real time, for the
// schedule's description.
func driftPpm(ratePpm []int64) []int64 {
	out := make([]int64, len(ratePpm))
	for i, r := range ratePpm {
		out[i] = r - 1e6
	}
	return out
}

// installed notes a snapshot node i installed and, under a scenario's
// crashAfterInstallNs, schedules its crash for the next instant (the
// node is in the middle of a call now) the first time.
func (s *sim) installed(i int, seq uint64) {
	s.nodes[i].installed = true
	sc := s.opts.scenario
	if sc == nil || sc.crashAfterInstallNs == 0 || s.quiet {
		return
	}
	for k := range s.installs {
		if s.installs[k].node == i {
			s.installs[k].again = true
			return
		}
	}
	s.installs = append(s.installs, installRecord{node: i, seq: seq})
	s.faults = append(s.faults, fault{at: s.now + 1, dur: sc.crashAfterInstallNs, kind: fCrash, node: i})
	s.push(event{at: s.now + 1, kind: evFaultStart, host: len(s.faults) - 1})
}

// installCrash judges, as node i crashes, the snapshot it installed and
// was crashed after (installed): was the record at its seq of an epoch
// older than the one the node followed?
func (s *sim) installCrash(i int) {
	for k := range s.installs {
		r := &s.installs[k]
		if r.node == i && !r.judged && s.nodes[i].n != nil {
			r.judged = true
			r.epochBelow = s.chk.epochAt[r.seq] < s.nodes[i].n.Epoch()
			s.logf("node %d installed a snapshot at %d (record epoch %d) following epoch %d", i, r.seq, s.chk.epochAt[r.seq], s.nodes[i].n.Epoch())
		}
	}
}
