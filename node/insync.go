package node

import (
	"github.com/seqbus/seqbus/arbiter"
)

// The in-sync set's rules live in package replica (replica.InSync); the
// node keeps its view across roles and carries out what the primary's
// core decides: the gate's required acks change inside the core, and a
// proposal comes back in its Ready (see release).

// onLeaseReply acts on a reply the keeper took: it records the in-sync
// set a grant carries, which a primary requires at once; what the reply
// decides of the lease is carried out by leaseChanged.
func (n *Node) onLeaseReply(r arbiter.Reply, now int64) {
	s := n.rep.LeaseReply(&r, now)
	if s.Latched {
		n.foreignHistory(r.History, "the arbiter")
	}
	if s.WitnessBehind {
		n.cfg.Log.Error("WITNESS BEHIND: the witness granted an epoch this cluster already used: its state was lost or replaced, or it is another cluster's; no node leads until an operator raises its epoch: seqbus witness override --epoch (docs/witness.md)", "granted", r.Epoch, "highest_known", n.rep.Roles().Fence().Highest())
	}
	if !s.InSyncConfirmed {
		return
	}
	n.stats.InSyncMembers = uint64(n.rep.Leader().Primary().Required())
	n.cfg.Log.Info("in-sync set confirmed by the witness", "version", n.rep.InSync().Version(), "members", n.rep.InSync().Members())
	n.release(now)
}

// maintainInSync lets the primary's core propose removals of lagging
// members and additions of caught-up standbys (witness mode); the
// proposal leaves with the next release.
func (n *Node) maintainInSync(now int64) {
	if n.lease == nil || !n.rep.Roles().Primary() {
		return
	}
	n.rep.Leader().Primary().Tick(now)
	n.stats.InSyncMembers = uint64(n.rep.Leader().Primary().Required())
}

// proposeInSync hands a Ready's in-sync proposal to the arbiter.
func (n *Node) proposeInSync(base uint64, members []arbiter.NodeID, lagging []uint32, now int64) {
	if err := n.lease.ProposeInSync(base, members, now); err != nil {
		n.cfg.Log.Error("in-sync proposal", "err", err)
		return
	}
	n.rep.Leader().Primary().Proposed(members, n.lease.Keeper().Epoch(), now)
	n.stats.InSyncProposals++
	n.cfg.Log.Info("proposing in-sync set", "base_version", base, "members", members, "lagging", lagging)
}

// probe sends each member the core asks about (replica.Ready.Probe) a
// HEARTBEAT from the transport's prober: a live standby takes it as any
// heartbeat; a dead one's host answers "port unreachable", which
// hearRefusals finds at a later tick.
func (n *Node) probe(ids []uint32, now int64) {
	for _, id := range ids {
		addr, ok := n.rep.Peer(id)
		if !ok {
			continue
		}
		n.frameBuf = n.rep.Leader().ProbeFrame(n.frameBuf[:0])
		n.tr.Probe(id, addr, n.frameBuf, now)
	}
}

// hearRefusals gives the core every refusal the prober heard: a member
// whose process is gone is proposed for removal now, not after
// --insync-timeout (the witness still confirms it before the primary
// stops waiting for its acks).
func (n *Node) hearRefusals(now int64) {
	for _, id := range n.tr.Refused(now) {
		if !n.rep.Leader().Primary().Unreachable(id) {
			continue
		}
		n.stats.StandbysUnreachable++
		n.cfg.Log.Warn("in-sync standby gone: its host refused a probe (no process at its port); proposing its removal now", "standby", id)
		n.maintainInSync(now)
	}
}
