package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/wire"
)

// becomeStandby makes this node follow the highest epoch it knows.
func (n *Node) becomeStandby() error {
	n.tr.SetGroupMember(true) // a no-op unless we led
	n.tm.BecomeStandby()
	return n.fol.Reset(n.eng().AppliedSeq())
}

// applyEntries carries out the follower's entries in seq order: journal,
// then apply. The ack follows the journal's durable watermark, never the
// window alone. The clock is read once for the entries of one call (the
// journal only notes when its write buffer started filling): a clock read
// per entry was 4 % of a standby's CPU at 1.2M commands/s.
func (n *Node) applyEntries() {
	now := n.nowNs()
	n.stageBatch()
	for {
		seq, payload, ok := n.fol.Next()
		if !ok {
			return
		}
		n.applyEntry(seq, payload, now)
	}
}

func (n *Node) applyEntry(seq uint64, payload []byte, now int64) {
	epoch := n.epochOf(seq)
	if err := n.j.Append(epoch, seq, payload, now); err != nil {
		n.journalFailed(err)
		return
	}
	n.eng().Apply(seq, payload, n.applyOut(seq)) // the session history and the market-data ring
	if o := n.cfg.Observer; o != nil {
		o.Applied(n.cfg.ID, epoch, seq, payload)
	}
	n.stats.Applied = seq
	if seq%n.cfg.HashEvery == 0 {
		if !n.fol.LocalHash(seq, n.eng().StateHash()) {
			n.hashMismatch(seq)
		}
	}
	n.periodicSnapshot(seq, epoch)
}

func (n *Node) hashMismatch(seq uint64) {
	n.stats.HashMismatches++
	n.cfg.Log.Error("STATE DIVERGENCE: state hash differs from the primary's; this node acknowledges nothing more and will not lead: restart it with the primary's --engine (it rebuilds from its journal)", "seq", seq)
}

// acceptEpoch applies the fence to a frame of the replication stream
// (replica.Standby.Fence): older epochs are stale; a newer one is accepted
// only through its NEW_EPOCH, and until that arrives its frames are
// dropped and its primary asked to repeat it.
func (n *Node) acceptEpoch(f *wire.Frame, now int64) bool {
	switch n.fol.Standby().Fence(f.Epoch, n.tm.Epoch(), n.tm.Fence().Refuses(f.Epoch)) {
	case replica.Stale:
		n.stats.DropStaleEpoch++
		return false
	case replica.AwaitNewEpoch:
		n.stats.DropAwaitingNewEpoch++
		n.askForNewEpoch(f.Node, now)
		return false
	}
	return n.learnPrimary(f.Node, now)
}

// learnPrimary notes which node leads the current epoch.
func (n *Node) learnPrimary(id uint32, now int64) bool {
	st := n.fol.Standby()
	if id == st.Primary() {
		st.SawPrimary(id, now) // the common case: no lookup
		return true
	}
	addr, ok := n.cfg.Peers[id]
	if !ok {
		n.stats.DropUnknownNode++
		return false
	}
	st.SawPrimary(id, now)
	n.primaryAddr = addr
	n.fol.Addressed()
	n.fol.PrimaryChanged(now) // a fetch under way restarts from it (sim bug F)
	n.followerReady()
	return true
}

func (n *Node) standbyFrame(f *wire.Frame, from netip.AddrPort, now int64) {
	switch f.Type {
	case wire.TypeHeartbeat, wire.TypeHash, wire.TypeNeedSnapshot, wire.TypeSnapshotChunk:
		if !n.acceptEpoch(f, now) { // the fence first (DATA's is below: it may be older history)
			return
		}
	}
	switch f.Type {
	case wire.TypeData, wire.TypeRetransmit:
		if n.tm.OlderHistory(f, n.fol.Standby().Primary()) {
			// Records from before the current epoch, resent by our
			// primary under the epoch they were sequenced in.
			n.tm.History().Note(f.Seq, f.LastSeq(), f.Epoch)
		} else if !n.acceptEpoch(f, now) {
			return
		}
		if !n.confirmHistory(now) {
			n.stats.DropAwaitingHistory++ // taken again once we know whose history it is
			return
		}
		if f.Type == wire.TypeRetransmit {
			n.stats.RetransmitsReceived++
		}
		n.fol.Data(f, now)
		n.applyEntries()
	case wire.TypeHeartbeat:
		if !n.heardHistory(wire.HistoryOf(f), f.Node) {
			return
		}
		n.fol.Heartbeat(f.Seq)
		n.md.OnHeartbeat(f, now) // learns the primary's released MD seq
		if f.Flags&wire.FlagLeaseReleased != 0 && n.lease.Keeper() != nil {
			// Our primary gave its lease up: ask for it at the next tick.
			n.lease.Keeper().Hurry(now)
			n.stats.LeaseReleasesHeard++
		}
		n.mdSendReplies()
	case wire.TypeHash:
		h, _ := wire.DecodeHash(f)
		if !n.fol.RemoteHash(h.Seq, h.Hash) {
			n.hashMismatch(h.Seq)
		}
	case wire.TypeNeedSnapshot:
		if !n.confirmHistory(now) {
			return // no fetch into a directory of unknown history
		}
		n.fol.NeedSnapshot(now)
	case wire.TypeSnapshotChunk:
		c, _ := wire.DecodeSnapshotChunk(f)
		n.fol.Chunk(&c, now)
	case wire.TypeNewEpoch:
		n.onNewEpoch(f, now)
	case wire.TypeCommand:
		n.stats.DropNotPrimary++
	default:
		n.stats.DropUnexpected++
	}
	n.followerReady()
}

// followerReady carries out the follower's Ready, in its fields' order.
func (n *Node) followerReady() {
	if !n.fol.HasReady() {
		return
	}
	rd := n.fol.Ready()
	if rd.FetchStarted {
		n.cfg.Log.Info("too far behind: fetching a snapshot", "applied", n.fol.Applied())
		n.stats.SnapshotFetches++
	}
	if rd.FetchRestarted {
		n.cfg.Log.Info("new primary during a snapshot fetch: restarting it", "primary", n.fol.Standby().Primary())
	}
	if rd.NotAhead {
		n.stats.SnapshotsNotAhead++
		n.cfg.Log.Info("snapshot not ahead of us: catching up by retransmit", "applied", n.fol.Applied())
	}
	if rd.FetchErr != nil {
		n.cfg.Log.Warn("snapshot fetch", "err", rd.FetchErr)
	}
	if rd.CatchUpStarted {
		n.stats.CatchUpsByRetransmit++
	}
	if rd.CaughtUp {
		n.cfg.Log.Info("caught up by retransmit", "applied", n.fol.Applied())
	}
	if rd.HasNak {
		rd.Nak.Origin = n.origin()
		n.frameBuf = rd.Nak.Append(n.frameBuf[:0])
		n.tr.Send(n.frameBuf, n.primaryAddr)
		n.stats.NaksSent++
	}
	if rd.HasRequest {
		rd.Request.Origin = n.origin()
		n.frameBuf = rd.Request.Append(n.frameBuf[:0])
		n.tr.Send(n.frameBuf, n.primaryAddr)
	}
	if rd.HasAck {
		n.sendAck(wire.Ack{Origin: n.origin(), Seq: rd.Ack}, n.primaryAddr, 1)
		n.stats.AcksSent++
	}
	n.fol.Advance()
	if rd.Install != nil {
		n.installSnapshot(rd.InstallSeq, rd.Install)
		n.followerReady() // the catch-up it started
	}
}

func (n *Node) standbyAfterBatch(now int64) {
	n.snaps.Poll()
	n.snapshotsWritten()
	// Only a new or refetching node asks whether it caught up: a steady
	// standby's batch does none of it.
	caughtUp := (n.st.NewDirectory() || n.st.Refetching()) && n.fol.Standby().Primary() != 0 && n.fol.CaughtUp()
	if caughtUp && n.st.NewDirectory() {
		_ = n.joined() // an error is logged and breaks the storage: no ack, no lead
	}
	if caughtUp && n.st.Refetching() {
		n.st.SetRefetching(false)
		n.stats.RefetchesDone++
		n.cfg.Log.Info("caught up after discarding the history: may lead again", "applied", n.fol.Applied())
	}
	n.flushJournal()
	n.kickSync()
	n.fol.Durable(n.j.Durable())
	n.fol.EndBatch(now)
	n.followerReady()
	n.writePendingSnapshot() // after the ack, and off the lock
}

// flushJournal writes the records appended in this batch (one write); the
// ack follows Durable, which counts only written records.
func (n *Node) flushJournal() {
	if err := n.j.Flush(); err != nil {
		n.journalFailed(err)
	}
}

func (n *Node) standbyTick(now int64) {
	n.writePendingSnapshot()
	n.flushJournal()
	n.fol.Durable(n.j.Durable())
	n.fol.Tick(now)
	n.followerReady()
}

// sayLeaving tells the primary a closing standby follows that it is
// stopping: its last ack (what it acknowledged already), flagged
// wire.Ack.Leaving, sent twice against a lost datagram. The primary
// proposes its removal from the in-sync set at once instead of after
// --insync-timeout without acks: a planned stop of a standby (a rolling
// restart) holds releases up for a round trip to the arbiter.
func (n *Node) sayLeaving() {
	if n.tm.Primary() || !n.primaryAddr.IsValid() || n.fol.Standby().Primary() == 0 {
		return
	}
	a := wire.Ack{Origin: n.origin(), Seq: n.fol.Standby().AckSent(), Leaving: true}
	n.sendAck(a, n.primaryAddr, 2)
	n.tr.Flush()
	n.stats.LeavingSent++
	n.cfg.Log.Info("stopping: told the primary, which stops waiting for this standby's acks", "primary", n.fol.Standby().Primary(), "acked", a.Seq)
}

// askForNewEpoch tells a primary of a newer epoch that we still follow an
// older one (an ACK stamped with our epoch), so it repeats its NEW_EPOCH
// at once instead of at its next 100 ms repeat. At most once a
// millisecond.
func (n *Node) askForNewEpoch(id uint32, now int64) {
	addr, ok := n.cfg.Peers[id]
	if !ok || !n.fol.Standby().AskNewEpoch(now) {
		return
	}
	n.sendAck(wire.Ack{Origin: n.origin(), Seq: n.fol.Window().Ack()}, addr, 1)
}

// sendAck queues ACK a, stamped with our history id, to addr, times
// times (the pass sends it).
func (n *Node) sendAck(a wire.Ack, addr netip.AddrPort, times int) {
	a.History = n.ident.ID()
	n.frameBuf = a.Append(n.frameBuf[:0])
	for range times {
		n.tr.Send(n.frameBuf, addr)
	}
}
