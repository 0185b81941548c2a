package sim

// Moment crashes (Options.Moments): a crash drawn at a fixed time rarely
// lands right after a node changed its role or its history, where the
// state on its disk is the newest and the least exercised; these land
// there. After each step of a node the simulator looks at what the step
// did; at one of the moments below it crashes the node, one time in
// momentOdds, at the next instant (before anything more reaches it) and
// restarts it 10..300 ms later, at most maxMoments times a run and only
// while faults run.

const (
	momentOdds = 3
	maxMoments = 4
)

// moment crashes node sn, maybe, if its last step passed a moment: it
// became primary, stepped down, followed a newer epoch, installed a
// fetched snapshot.
func (s *sim) moment(sn *simNode, isPrimary bool) {
	epoch := sn.n.Epoch()
	installed := sn.installed
	sn.installed = false
	what := ""
	switch {
	case installed:
		what = "installed a snapshot"
	case epoch != sn.momentEpoch && isPrimary:
		what = "was promoted"
	case epoch != sn.momentEpoch && sn.momentEpoch != 0:
		what = "followed a new epoch"
	}
	sn.momentEpoch = epoch
	if what == "" || s.quiet || s.moments >= maxMoments || s.rng.IntN(momentOdds) != 0 {
		return
	}
	s.moments++
	s.stats.MomentCrashes++
	dur := 10_000_000 + s.rng.Int64N(290_000_000)
	s.logf("MOMENT: node %d %s (epoch %d): it crashes now, restarts after %s", sn.id, what, epoch, fmtDur(dur))
	s.faults = append(s.faults, fault{at: s.now + 1, dur: dur, kind: fCrash, node: sn.id})
	s.push(event{at: s.now + 1, kind: evFaultStart, host: len(s.faults) - 1})
}
