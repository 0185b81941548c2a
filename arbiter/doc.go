// Package arbiter holds the leadership cores of seqbus: the witness's lease
// Arbiter, the Keeper a node runs to hold a lease, the LeaseView and MayLead
// rule a node leads by, and the Fence the journal and the standby put in
// front of every frame. All of them are pure: no clock, no socket, no file,
// no goroutine. Time is a monotonic nanosecond int64 passed in by the
// caller; the witness's clock and each node's clock are different clocks
// and are never compared with each other.
//
// Leadership is a lease plus a fencing epoch. The arbiter grants one live
// lease at a time; every new holder gets epoch highest+1; the holder extends
// its lease under the same epoch. A node times its lease from the moment it
// SENT the request (which is no later than when the witness granted it) and
// stops leading a margin before the end, so with clocks whose rates differ
// by less than margin/duration the node stops leading before the witness
// could grant the lease to anyone else. Frames from a deposed leader are
// then refused by fences, which remember the highest epoch seen.
//
// The arbiter also keeps the in-sync set (Kafka's ISR), versioned: the
// standbys the primary waits for before releasing output. Only they, or
// the previous holder (which had everything it released), may take a free
// lease once one was ever granted; anyone else is refused with
// ReasonNotInSync, so a failover never promotes a node that lacks released
// output. The primary changes the set with RenewWithInSync, a
// compare-and-set on the version carried atomically by a renew.
//
// Usage contract:
//
//  1. Witness: build one Arbiter with NewArbiter. If the witness has
//     persisted a state, call Restore(state, nowNs) before answering
//     anything: for one lease duration it grants nothing to anyone but the
//     last holder's renew of the restored epoch, because the old lease may
//     still be live, and keeps the in-sync set and last holder.
//  2. Witness: for each LEASE_ACQUIRE or LEASE_RENEW, call AcquireRequest
//     (with the request ID), Renew
//     or (a renew carrying a proposal) RenewWithInSync with the witness's
//     monotonic nowNs. If the Decision has Persist, durably write
//     Decision.PersistentState() BEFORE sending the grant; if the write
//     fails, send nothing. Reply with a grant (echoing the request ID,
//     Epoch, RemainingNs as the duration, InSyncVersion and Members) or a
//     deny (Holder, Epoch, RemainingNs, InSyncVersion, Members). Answer
//     LEASE_QUERY with Query.
//  3. Node: build one Keeper with NewKeeper and call SetWantLead(true) to
//     contend. In the run loop, read the monotonic clock, call Tick(nowNs),
//     and send the returned Request if any, in that order: the send time is
//     the nowNs given to Tick, read before sending.
//  4. Node: pass each reply to OnGrant or OnDeny with the echoed request ID.
//     Replies may be late, duplicated, reordered or lost; the keeper
//     ignores what it cannot use.
//  5. Node (primary): gate releases on the members of the in-sync set
//     last granted, and propose a new set (based on the version last
//     granted) to add standbys that caught up or drop ones that lag. Adopt
//     the set a grant reports whatever was proposed: a refused proposal
//     (stale version, invalid set) leaves the renew granted and the old
//     set in force. A node added to the set must be waited for from the
//     moment it is proposed, a node dropped only once a grant shows it
//     gone.
//  6. Node: before releasing any output, read the clock and check
//     MayLead(nowNs); stamp frames with Epoch(). When MayLead turns false,
//     stop releasing at once; it may turn true again on the next grant
//     (with the same epoch if renewed in time, else a new one).
//  7. Journal and standby: keep a Fence (zero value, or Accept the
//     persisted highest epoch on recovery) and Accept every frame's epoch
//     before acting on it; drop frames for which it returns ErrStaleEpoch.
//
// A complete node loop, the network left out:
//
//	k, _ := arbiter.NewKeeper(self, arbiter.DefaultConfig())
//	k.SetWantLead(true)
//	for {
//		nowNs := monotonicNs()
//		if req, ok := k.Tick(nowNs); ok {
//			sendToWitness(req)
//		}
//		for _, r := range receivedReplies() {
//			if r.Granted {
//				k.OnGrant(r.RequestID, r.Epoch, r.DurationNs)
//			} else {
//				k.OnDeny(r.RequestID, r.Holder, r.Epoch, r.RemainingNs)
//			}
//		}
//		if k.MayLead(monotonicNs()) {
//			releaseUpTo(released, k.Epoch())
//		}
//	}
package arbiter
