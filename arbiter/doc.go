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
// Usage contract:
//
//  1. Witness: build one Arbiter with NewArbiter. If the witness has
//     persisted a highest epoch, call Restore(highest, nowNs) before
//     answering anything: it grants nothing to anyone for one lease
//     duration, because the old lease may still be live.
//  2. Witness: for each LEASE_ACQUIRE or LEASE_RENEW, call Acquire or Renew
//     with the witness's monotonic nowNs. If the Decision has PersistEpoch,
//     durably write Decision.Epoch BEFORE sending the grant; if the write
//     fails, send nothing. Reply with a grant (echoing the request ID,
//     Epoch, and RemainingNs as the duration) or a deny (Holder, Epoch,
//     RemainingNs). Answer LEASE_QUERY with Query.
//  3. Node: build one Keeper with NewKeeper and call SetWantLead(true) to
//     contend. In the run loop, read the monotonic clock, call Tick(nowNs),
//     and send the returned Request if any, in that order: the send time is
//     the nowNs given to Tick, read before sending.
//  4. Node: pass each reply to OnGrant or OnDeny with the echoed request ID.
//     Replies may be late, duplicated, reordered or lost; the keeper
//     ignores what it cannot use.
//  5. Node: before releasing any output, read the clock and check
//     MayLead(nowNs); stamp frames with Epoch(). When MayLead turns false,
//     stop releasing at once; it may turn true again on the next grant
//     (with the same epoch if renewed in time, else a new one).
//  6. Journal and standby: keep a Fence (zero value, or Accept the
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
