package node

import (
	"github.com/seqbus/seqbus/arbiter"
)

// The in-sync set's rules live in package replica (replica.InSync); the
// node keeps its view across roles and carries out what the primary's
// core decides: the gate's required acks change inside the core, and a
// proposal comes back in its Ready (see release).

// onWitnessSet records the set an arbiter's grant carries; a primary
// requires it at once.
func (n *Node) onWitnessSet(r *arbiter.Reply, now int64) {
	if !n.tm.Primary() {
		n.isr.Confirm(r)
		return
	}
	if !n.ldr.Primary().ConfirmInSync(r, now) {
		return
	}
	n.stats.InSyncMembers = uint64(n.ldr.Primary().Required())
	n.cfg.Log.Info("in-sync set confirmed by the witness", "version", n.isr.Version(), "members", n.isr.Members())
	n.release(now)
}

// maintainInSync lets the primary's core propose removals of lagging
// members and additions of caught-up standbys (witness mode); the
// proposal leaves with the next release.
func (n *Node) maintainInSync(now int64) {
	if n.lease == nil || !n.tm.Primary() {
		return
	}
	n.ldr.Primary().Tick(now)
	n.stats.InSyncMembers = uint64(n.ldr.Primary().Required())
}

// proposeInSync hands a Ready's in-sync proposal to the arbiter.
func (n *Node) proposeInSync(base uint64, members []arbiter.NodeID, lagging []uint32, now int64) {
	if err := n.lease.ProposeInSync(base, members, now); err != nil {
		n.cfg.Log.Error("in-sync proposal", "err", err)
		return
	}
	n.ldr.Primary().Proposed(members, now)
	n.stats.InSyncProposals++
	n.cfg.Log.Info("proposing in-sync set", "base_version", base, "members", members, "lagging", lagging)
}
