package node

import (
	"errors"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/lease"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/wire"
)

// openLease builds the node's lease client (package lease: the UDP
// witness, or Config.NewArbiter's backend); nil for a static node.
func (n *Node) openLease() error {
	cfg := &n.cfg
	if !cfg.Witness.IsValid() && cfg.NewArbiter == nil {
		return nil // a static node: no lease client, and no clock read for one
	}
	// Request IDs start from the wall clock, unique to this process run
	// (arbiter.NewLink); a simulated clock keeps simulated runs replayable.
	var after uint64
	if cfg.Clock != nil {
		after = uint64(cfg.Clock.NowNs()) << 20
	} else {
		after = uint64(time.Now().UnixNano())
	}
	c, err := lease.New(lease.Config{Node: cfg.ID, Stream: cfg.Stream, Lease: cfg.Lease, Witness: cfg.Witness, NewArbiter: cfg.NewArbiter,
		After: after, Send: n.tr.Send, OnReply: n.onLeaseReply, NowNs: n.nowNs, RestampOnReply: cfg.Unsafe.LeaseFromReply, Log: cfg.Log})
	n.lease = c
	return err
}

// leaseTick sends the keeper's due request to the arbiter and acts on
// the lease: a primary releases only while it may lead; a standby that
// was granted a newer epoch promotes.
func (n *Node) leaseTick(now int64) {
	if n.lease == nil {
		return
	}
	if k := n.lease.Keeper(); k != nil {
		k.SetHistory(n.rep.Identity().ID())
	}
	if n.lease.Tick(now, n.rep.WantLead(n.st.Broken(), n.st.Refetching())) {
		n.stats.WitnessSilent++
	}
	n.leaseChanged(now)
}

// onLease takes a lease frame: a reply of the UDP witness.
func (n *Node) onLease(pkt []byte, from netip.AddrPort, now int64) {
	r, err := n.lease.OnDatagram(pkt, from, now)
	switch {
	case errors.Is(err, lease.ErrUnexpected):
		n.stats.DropUnexpected++
	case err != nil:
		n.stats.CountDrop(err)
	default:
		n.onLeaseReply(r, now)
		// What the lease decides is carried out after the batch
		// (afterBatch).
	}
}

// leaseChanged carries out, between batches, what the lease decides
// (replica.PrimaryLease, replica.StandbyLease) as the term's role change
// (replica.Roles.Lease).
func (n *Node) leaseChanged(now int64) {
	switch rd := n.rep.Roles().Lease(n.rep.LeaseDecision(n.lease.Keeper(), now)); {
	case rd.Drain:
		n.promote(&rd, now)
	case rd.StepDown:
		n.stepDown(&rd)
	case rd.Regained:
		n.cfg.Log.Info("lease held again; releasing", "epoch", rd.Epoch)
	case rd.LeaseLost:
		dropped := n.rep.Leader().DropQueued()
		n.stats.LeaseLost++
		n.stats.OutputsDroppedAtGate += uint64(dropped)
		n.cfg.Log.Warn("lease not held: releases stop, queued outputs dropped (clients resend)", "epoch", rd.Epoch, "dropped", dropped)
		n.tellClients(rd.Epoch)
	}
}

// promote carries out a promotion to rd.Epoch (a standby's, or a new
// term of this primary's own: rd.NewTerm): drain (the window has applied
// everything contiguous; what is buffered past a gap was never
// acknowledged, so never released, and is dropped), lead from applied+1,
// announce NEW_EPOCH with the fork point. A new term keeps the outputs
// waiting in the gate: they are part of the history it continues, and
// the new gate releases them once the standbys acknowledge them under
// the new epoch and they are durable, exactly as for any output.
func (n *Node) promote(rd *replica.RolesReady, now int64) {
	if why := n.rep.DeclineLead(n.st.NewDirectory(), rd.Epoch); why != replica.LeadGranted {
		n.declineLead(rd.Epoch, why)
		return
	}
	prev := n.rep.Leader()
	if rd.NewTerm {
		n.stats.NewTerms++
		n.cfg.Log.Info("NEW TERM: the witness granted this node a newer epoch; leading on, queued outputs kept",
			"ours", n.rep.Roles().Epoch(), "new", rd.Epoch, "queued_outputs", prev.Queued())
	}
	detectNs := now - n.rep.Follower().Standby().LastPrimaryNs()
	// Drain: the window applies every contiguous message as it arrives,
	// so what is left is to make what we applied durable before leading.
	drainStart := n.nowNs()
	err := n.j.Flush()
	if err == nil {
		err = n.j.Sync()
	}
	if err != nil {
		// A failed journal stays failed: what we applied never becomes
		// durable here, so this node must never lead, and the lease it
		// cannot lead under goes back at once (journalFailed) for another
		// standby's.
		n.rep.Roles().DrainFailed()
		n.journalFailed(err)
		return
	}
	drainNs := n.nowNs() - drainStart
	promoteStart := n.nowNs()
	lead := n.rep.Roles().Drained(n.eng().AppliedSeq(), n.st)
	if err := n.becomePrimary(lead.Epoch); err != nil {
		n.cfg.Log.Error("promotion failed", "epoch", lead.Epoch, "err", err)
		n.rep.Roles().LeadFailed()
		n.becomeStandby()
		n.giveUpLease("the promotion failed") // not held again until asked for again
		return
	}
	n.rep.Leader().Primary().SetLease(n.lease.Keeper().MayLead(now))
	led := n.rep.Roles().Led() // our own history is this epoch's
	if led.Announce {
		n.announce(now)
	}
	n.stats.Promotions++
	n.rep.Leader().Promoted(now)
	n.cfg.Log.Info("PROMOTED",
		"epoch", lead.Epoch, "from_seq", lead.LeadFrom, "prev_epoch", lead.PrevEpoch,
		"since_last_primary_frame", time.Duration(detectNs),
		"lease_acquired_in", time.Duration(now-n.lease.Keeper().View().SentAtNs),
		"drain", time.Duration(drainNs),
		"promotion", time.Duration(n.nowNs()-promoteStart))
	if led.KeepQueued {
		n.rep.Leader().TakeQueued(prev)
	}
	if prev != nil {
		n.rep.Retired(prev) // its memory, for the next term
	}
}

// declineLead gives back a lease replica.DeclineLead refuses, declined:
// the arbiter undoes the grant (arbiter.Arbiter.Decline), so the
// previous holder, which has everything released, may lead again at
// once. A node of another history never leads this cluster's. A node
// whose directory is new was granted a term another node may hold a
// history for: it never led nor caught up, and held back its acks until
// it would have, so the arbiter took it for a member (or the holder of a
// term that added one) only because its directory was replaced or wiped
// since. Leading would start the history over and un-happen everything
// released before; it does not ask again until it has caught up with a
// primary (the refetch state). An arbiter that cannot undo the grant (it
// restarted since) refuses the nodes that hold the history until an
// operator names one (seqbus witness override): the market halts rather
// than lose it.
func (n *Node) declineLead(epoch uint64, why replica.Decline) {
	n.rep.Roles().DrainFailed()
	if why == replica.DeclineForeign {
		n.stats.LeadsDeclinedForeign++
		n.cfg.Log.Error("NOT LEADING: granted the lease, but this node's directory holds another history; giving the lease back, declined", "epoch", epoch, "dir", n.cfg.Dir)
	} else {
		n.stats.LeadsDeclinedNewDirectory++
		n.cfg.Log.Error("NOT LEADING: granted the lease after other terms, but this node's directory is new (replaced or wiped?): "+
			"leading would discard the history clients saw; giving the lease back, declined. Start the node that holds the history; "+
			"if the witness still refuses it, name it: seqbus witness override --allow ID (docs/witness.md)", "epoch", epoch, "dir", n.cfg.Dir)
		n.st.SetRefetching(true)
	}
	n.giveUpLease("declined, so the previous holder may lead again")
}

// joined records that this node leads or caught up with a primary
// (storage.Storage.Joined): its directory holds the history from now
// on, so its acks go.
func (n *Node) joined() error {
	err := n.st.Joined() // a no-op once joined; logs either way
	n.holdAcks()
	return err
}

// stepDown carries out replica.Roles' step-down: nothing more is
// released or sequenced; queued outputs are dropped (repair from state,
// not history); the node follows as a standby and reconciles its history
// when the new primary's NEW_EPOCH arrives.
func (n *Node) stepDown(rd *replica.RolesReady) {
	var keeperEpoch uint64
	if n.lease.Keeper() != nil {
		keeperEpoch = n.lease.Keeper().Epoch()
	}
	dropped := n.rep.EndTerm(rd.From, rd.To, keeperEpoch)
	n.stats.StepDowns++
	n.stats.OutputsDroppedAtGate += uint64(dropped)
	n.cfg.Log.Warn("STEPPING DOWN: a newer epoch leads", "ours", rd.From, "newer", rd.To, "dropped_outputs", dropped)
	n.tellClients(rd.From)
	if err := n.becomeStandby(); err != nil {
		n.cfg.Log.Error("step-down", "err", err)
	}
}

// announce sends NEW_EPOCH: where this epoch's history forks.
func (n *Node) announce(now int64) {
	prev, last := n.rep.Roles().History().Announcement()
	n.rep.Leader().Announce(prev, last, now)
	n.leaderReady()
	n.rep.Roles().History().Announced(now)
}

// onNewEpoch carries out what a new primary's NEW_EPOCH means to this
// node (replica.Roles.NewEpoch): a primary steps down, the history is
// reconciled (kept, its suffix cut, or discarded and refetched), then
// the node follows the new epoch.
func (n *Node) onNewEpoch(f *wire.Frame, now int64) {
	ne, _ := wire.DecodeNewEpoch(f)
	if !n.heardHistory(ne.History, f.Node) {
		return
	}
	applied := n.eng().AppliedSeq()
	rd := n.rep.NewEpoch(&ne, f.Node, applied, n.st)
	switch {
	case rd.Drop == replica.DropStale:
		n.stats.DropStaleEpoch++
		return
	case rd.Drop == replica.DropUnknown:
		n.stats.DropUnknownNode++
		return
	case rd.Repeat:
		n.learnPrimary(rd.Primary, now)
		return
	case rd.Ignored:
		return // UNSAFE: a deposed primary that never steps down
	}
	if rd.StepDown {
		n.stepDown(&rd)
	}
	err := n.reconcile(&rd, &ne, applied)
	if err == nil {
		err = n.st.RaiseFence(ne.Epoch) // durable before we ack anything of it
	}
	if err != nil {
		// Each NEW_EPOCH repeat retries it; whatever it left behind, this
		// node must never lead on it (logged once, counted every time).
		n.rep.Roles().ResetFailed()
		n.stats.JournalErrors++
		if n.st.Break() {
			n.cfg.Log.Error("reconcile with the new primary failed (the journal cut at its fork, the rebuild, or recording the new epoch): this node will not lead; restart it once the disk is fixed", "err", err)
		}
		return
	}
	rd = n.rep.Roles().Reconciled()
	if err := n.becomeStandby(); err != nil {
		n.cfg.Log.Error("follow new epoch", "err", err)
		return
	}
	n.learnPrimary(rd.Primary, now)
	n.cfg.Log.Info("following a new epoch", "epoch", ne.Epoch, "primary", f.Node, "fork_seq", ne.LastSeq, "applied", n.eng().AppliedSeq())
}

// reconcile carries out rd's reconciliation of our history (applied up
// to applied) against NEW_EPOCH ne.
func (n *Node) reconcile(rd *replica.RolesReady, ne *wire.NewEpoch, applied uint64) error {
	switch rd.Reconcile {
	case replica.Discard:
		n.cfg.Log.Warn("history not provably shared with the new primary: discarding it, refetching state",
			"applied", applied, "fork_seq", ne.LastSeq, "prev_epoch", ne.PrevEpoch)
		n.stats.HistoryDiscarded++
	case replica.Truncate:
		n.cfg.Log.Warn("discarding our unreplicated suffix", "from", rd.CutAfter+1, "to", applied)
		n.stats.SuffixDiscarded += applied - rd.CutAfter
	default:
		return nil
	}
	return n.resetHistory(rd.CutAfter)
}

// resetHistory cuts the journal after seq (0: all of it) and rebuilds
// the state machine from what is left (storage.Storage.ResetTo).
func (n *Node) resetHistory(seq uint64) error {
	n.rep.Follower().ResetHashes()
	return n.rebuilt(n.st.ResetTo(seq))
}

// epochOf is the epoch a standby journals seq under
// (replica.History.EpochOf).
func (n *Node) epochOf(seq uint64) uint64 {
	return n.rep.Roles().History().EpochOf(seq, n.rep.Roles().Epoch(), n.eng().AppliedSeq(), n.j.HighestEpoch()) // inlined: no call a command
}

// leaseView reports the lease as the node sees it, for status.
func (n *Node) leaseView(now int64) (held bool, remainingNs int64, epoch uint64) {
	if n.lease == nil {
		return n.rep.Roles().Primary(), 0, n.rep.Roles().Epoch()
	}
	return n.lease.Lease(now)
}

// LastStepDown returns how many times this node stepped down and the
// epochs of the latest one: the epoch it led (from), the newer one (to)
// and its keeper's epoch then. The simulator checks that no node steps
// down from an epoch of its own.
func (n *Node) LastStepDown() (count, from, to, keeperEpoch uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.rep.LastStepDown()
	return r.Count, r.From, r.To, r.KeeperEpoch
}

// Epoch returns the epoch this node leads or follows (cheap, unlike
// Status).
func (n *Node) Epoch() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rep.Roles().Epoch()
}
