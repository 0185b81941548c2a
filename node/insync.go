package node

import (
	"slices"

	"github.com/seqbus/seqbus/arbiter"
)

// The in-sync set (Kafka's ISR) lives at the witness, versioned with the
// lease: the standbys that may be promoted. The primary requires the acks
// of every member, so every member holds everything released.
//
//   - A member that lags for InSyncTimeoutNs is proposed for removal with
//     the next renew (sent at once). It lags when it is silent (no ack at
//     all: dead, or its acks are lost) or stalled: an output waits above
//     its ack and its ack has not advanced to cover it (measured from its
//     last ack that advanced or covered everything applied, not from the
//     last ack datagram: a standby cut off from our DATA, or stopped,
//     keeps or resumes acking the same old seq, and must not hold every
//     release for as long as that lasts; see gating.Gate.Lagging). With
//     nothing waiting, only silence removes. So no partition of one
//     standby holds releases for much more than InSyncTimeoutNs plus a
//     witness round trip. The primary stops waiting for it only after the
//     witness confirms, so a standby is never dropped from the required
//     acks while it could still be promoted.
//   - A non-member whose ack has reached released is proposed for
//     addition, and its ack is required from that moment (stricter than
//     the witness), so released cannot run ahead of it while the witness
//     decides; if the witness refuses, the local requirement is dropped.
//   - With the set empty the primary runs alone (durable on its own disk
//     only) and says so loudly; MinInSync > 0 makes it halt instead.

// DefaultInSyncTimeoutNs: 200 ms without an ack, or with outputs waiting
// above an ack that does not advance, removes a standby. Standbys ack
// every seq they get and at least every 5 ms when healthy, so 200 ms is 40
// missed acks: long against scheduling stalls on these machines, short
// enough that the market pauses for a fifth of a second, not until an
// operator acts.
const DefaultInSyncTimeoutNs = 200_000_000

// inSyncState is the primary's view of the set.
type inSyncState struct {
	version  uint64           // the witness's version in force
	members  []arbiter.NodeID // confirmed by the witness
	adding   []arbiter.NodeID // proposed additions, already required locally
	proposed []arbiter.NodeID // last proposal sent
	sentNs   int64            // when it was sent
	alone    bool             // running with an empty set (logged once per episode)
	gateVer  uint64           // the gate's own version counter
}

// onWitnessSet records the set an arbiter's grant carries.
func (n *Node) onWitnessSet(r *arbiter.Reply, now int64) {
	if !r.Granted() || r.InSyncVersion < n.isr.version {
		return
	}
	if r.InSyncVersion == n.isr.version && slices.Equal(r.Members.Slice(), n.isr.members) {
		return
	}
	n.isr.version = r.InSyncVersion
	n.isr.members = slices.Clone(r.Members.Slice())
	// Additions the witness now confirms are no longer pending; refused
	// ones stop being required.
	n.isr.adding = slices.DeleteFunc(n.isr.adding, func(id arbiter.NodeID) bool {
		return slices.Contains(n.isr.members, id) || !slices.Contains(n.isr.proposed, id)
	})
	n.isr.proposed = nil
	if n.role == RolePrimary {
		n.applyInSync(now)
		n.cfg.Log.Info("in-sync set confirmed by the witness", "version", n.isr.version, "members", n.isr.members)
	}
}

// applyInSync sets the gate's required acks: confirmed members plus
// pending additions.
func (n *Node) applyInSync(now int64) {
	req := make([]uint32, 0, len(n.isr.members)+len(n.isr.adding))
	for _, m := range n.isr.members {
		req = append(req, uint32(m))
	}
	for _, m := range n.isr.adding {
		if !slices.Contains(req, uint32(m)) {
			req = append(req, uint32(m))
		}
	}
	if n.cfg.Unsafe.NoGating {
		req = req[:0] // UNSAFE: no standby ack is ever required
	}
	n.isr.gateVer++
	if err := n.gate.SetInSync(n.isr.gateVer, req, now); err != nil {
		n.cfg.Log.Error("gate in-sync set", "err", err)
		return
	}
	n.stats.InSyncMembers = uint64(len(req))
	if len(req) == 0 && !n.isr.alone {
		n.isr.alone = true
		n.stats.RunningAlone++
		n.cfg.Log.Warn("RUNNING ALONE: the in-sync set is empty; releases are durable on this node's disk only")
	} else if len(req) > 0 {
		n.isr.alone = false
	}
	n.release(now)
}

// maintainInSync proposes removals of lagging members (silent or stalled,
// see gating.Gate.Lagging) and additions of caught-up standbys (primary,
// witness mode). A removed standby is re-added once its ack reaches
// released again.
func (n *Node) maintainInSync(now int64) {
	if n.arb == nil || n.isr.version == 0 || n.role != RolePrimary {
		return
	}
	if n.isr.proposed != nil && now-n.isr.sentNs < n.cfg.Lease.RetryNs*2 {
		return // a proposal is in flight
	}
	var buf [16]uint32
	lagging := n.gate.Lagging(now, n.cfg.InSyncTimeoutNs, buf[:0])
	desired := slices.Clone(n.isr.members)
	for _, id := range lagging {
		desired = slices.DeleteFunc(desired, func(m arbiter.NodeID) bool { return uint32(m) == id })
	}
	released := n.gate.Released()
	for id := range n.cfg.Peers {
		nid := arbiter.NodeID(id)
		if slices.Contains(desired, nid) || slices.Contains(lagging, id) {
			continue
		}
		st, ok := n.gate.Standby(id)
		if ok && st.AckSeq >= released && now-st.LastAckNs < n.cfg.InSyncTimeoutNs && len(desired) < arbiter.MaxInSyncMembers {
			desired = append(desired, nid)
			if !slices.Contains(n.isr.adding, nid) && !slices.Contains(n.isr.members, nid) {
				n.isr.adding = append(n.isr.adding, nid)
				n.applyInSync(now) // require its ack from now on
				if n.role != RolePrimary {
					return
				}
			}
		}
	}
	slices.Sort(desired)
	if slices.Equal(desired, n.isr.members) {
		return
	}
	if err := n.arb.ProposeInSync(n.isr.version, desired); err != nil {
		n.cfg.Log.Error("in-sync proposal", "err", err)
		return
	}
	n.isr.proposed, n.isr.sentNs = desired, now
	n.keeper.Hurry(now)
	n.stats.InSyncProposals++
	n.cfg.Log.Info("proposing in-sync set", "base_version", n.isr.version, "members", desired, "lagging", lagging)
}
