package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/wire"
)

// becomeStandby makes this node follow the highest epoch it knows.
func (n *Node) becomeStandby() error {
	n.tr.SetGroupMember(true) // a no-op unless we led
	n.rep.Roles().BecomeStandby()
	return n.rep.Follower().Reset(n.eng().AppliedSeq())
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
		seq, payload, ok := n.rep.Follower().Next()
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
		if !n.rep.Follower().LocalHash(seq, n.eng().StateHash()) {
			n.hashMismatch(seq)
		}
	}
	n.periodicSnapshot(seq, epoch)
}

func (n *Node) hashMismatch(seq uint64) {
	n.stats.HashMismatches++
	n.cfg.Log.Error("STATE DIVERGENCE: state hash differs from the primary's; this node acknowledges nothing more and will not lead: restart it with the primary's --engine (it rebuilds from its journal)", "seq", seq)
}

// learnPrimary notes that node id leads the followed epoch
// (replica.Replica.LearnPrimary); another node than before is addressed,
// and the follower's Ready is carried out at once.
func (n *Node) learnPrimary(id uint32, now int64) {
	switch changed, known := n.rep.LearnPrimary(id, now); {
	case !known:
		n.stats.DropUnknownNode++
	case changed:
		n.followerReady()
	}
}

// admit carries out what the core says of a replication frame before its
// payload (replica.Replica.Admit): the new primary first, the asks, and
// the drop's count; false: the frame goes no further.
func (n *Node) admit(f *wire.Frame, now int64) bool {
	a := n.rep.Admit(f, now)
	if a.NewPrimary {
		n.followerReady()
	}
	if a.AskNewEpoch {
		// An ACK of our epoch: its primary repeats NEW_EPOCH at once,
		// not at its next 100 ms repeat.
		to, _ := n.rep.Peer(f.Node)
		n.sendAck(wire.Ack{Origin: n.origin(), Seq: n.rep.Follower().Window().Ack()}, to, 1)
	}
	if a.AskHistory {
		addr, _ := n.rep.PrimaryAddr()
		n.sendAck(wire.Ack{Origin: n.origin(), Seq: n.rep.Follower().Standby().AckSent(), AskHistory: true}, addr, 1)
		n.stats.HistoryAsked++
	}
	switch a.Drop {
	case replica.AdmitStale:
		n.stats.DropStaleEpoch++
	case replica.AdmitAwaitNewEpoch:
		n.stats.DropAwaitingNewEpoch++
	case replica.AdmitUnknownNode:
		n.stats.DropUnknownNode++
	case replica.AdmitAwaitHistory:
		if f.Type != wire.TypeNeedSnapshot {
			n.stats.DropAwaitingHistory++ // taken again once we know whose history it is
		}
	}
	return a.Drop == replica.AdmitTake
}

func (n *Node) standbyFrame(f *wire.Frame, from netip.AddrPort, now int64) {
	if !n.admit(f, now) {
		n.followerReady()
		return
	}
	switch f.Type {
	case wire.TypeData, wire.TypeRetransmit:
		if f.Type == wire.TypeRetransmit {
			n.stats.RetransmitsReceived++
		}
		n.rep.Follower().Data(f, now)
		n.applyEntries()
	case wire.TypeHeartbeat:
		if !n.heardHistory(wire.HistoryOf(f), f.Node) {
			return
		}
		n.rep.Follower().Heartbeat(f.Seq)
		n.md.OnHeartbeat(f, now) // learns the primary's released MD seq
		if f.Flags&wire.FlagLeaseReleased != 0 && n.lease.Keeper() != nil {
			// Our primary gave its lease up: ask for it at the next tick.
			n.lease.Keeper().Hurry(now)
			n.stats.LeaseReleasesHeard++
		}
		n.mdSendReplies()
	case wire.TypeHash:
		h, _ := wire.DecodeHash(f)
		if !n.rep.Follower().RemoteHash(h.Seq, h.Hash) {
			n.hashMismatch(h.Seq)
		}
	case wire.TypeNeedSnapshot:
		n.rep.Follower().NeedSnapshot(now)
	case wire.TypeSnapshotChunk:
		c, _ := wire.DecodeSnapshotChunk(f)
		n.rep.Follower().Chunk(&c, now)
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
	if !n.rep.Follower().HasReady() {
		return
	}
	rd := n.rep.Follower().Ready()
	if rd.FetchStarted {
		n.cfg.Log.Info("too far behind: fetching a snapshot", "applied", n.rep.Follower().Applied())
		n.stats.SnapshotFetches++
	}
	if rd.FetchRestarted {
		n.cfg.Log.Info("new primary during a snapshot fetch: restarting it", "primary", n.rep.Follower().Standby().Primary())
	}
	if rd.NotAhead {
		n.stats.SnapshotsNotAhead++
		n.cfg.Log.Info("snapshot not ahead of us: catching up by retransmit", "applied", n.rep.Follower().Applied())
	}
	if rd.FetchErr != nil {
		n.cfg.Log.Warn("snapshot fetch", "err", rd.FetchErr)
	}
	if rd.CatchUpStarted {
		n.stats.CatchUpsByRetransmit++
	}
	if rd.CaughtUp {
		n.cfg.Log.Info("caught up by retransmit", "applied", n.rep.Follower().Applied())
	}
	to, _ := n.rep.PrimaryAddr()
	if rd.HasNak {
		rd.Nak.Origin = n.origin()
		n.frameBuf = rd.Nak.Append(n.frameBuf[:0])
		n.tr.Send(n.frameBuf, to)
		n.stats.NaksSent++
	}
	if rd.HasRequest {
		rd.Request.Origin = n.origin()
		n.frameBuf = rd.Request.Append(n.frameBuf[:0])
		n.tr.Send(n.frameBuf, to)
	}
	if rd.HasAck {
		n.sendAck(wire.Ack{Origin: n.origin(), Seq: rd.Ack}, to, 1)
		n.stats.AcksSent++
	}
	n.rep.Follower().Advance()
	if rd.Install != nil {
		n.installSnapshot(rd.InstallSeq, rd.Install)
		n.followerReady() // the catch-up it started
	}
}

func (n *Node) standbyAfterBatch(now int64) {
	n.snaps.Poll()
	n.snapshotsWritten()
	caughtUp := n.rep.CaughtUp(n.st.NewDirectory(), n.st.Refetching())
	if caughtUp && n.st.NewDirectory() {
		_ = n.joined() // an error is logged and breaks the storage: no ack, no lead
	}
	if caughtUp && n.st.Refetching() {
		n.st.SetRefetching(false)
		n.stats.RefetchesDone++
		n.cfg.Log.Info("caught up after discarding the history: may lead again", "applied", n.rep.Follower().Applied())
	}
	n.flushJournal()
	n.kickSync()
	n.rep.Follower().Durable(n.j.Durable())
	n.rep.Follower().EndBatch(now)
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
	n.rep.Follower().Durable(n.j.Durable())
	n.rep.Follower().Tick(now)
	n.followerReady()
}

// sayLeaving tells the primary a closing standby follows that it is
// stopping: its last ack (what it acknowledged already), flagged
// wire.Ack.Leaving, sent twice against a lost datagram. The primary
// proposes its removal from the in-sync set at once instead of after
// --insync-timeout without acks: a planned stop of a standby (a rolling
// restart) holds releases up for a round trip to the arbiter.
func (n *Node) sayLeaving() {
	to, ok := n.rep.PrimaryAddr()
	if n.rep.Roles().Primary() || !ok || n.rep.Follower().Standby().Primary() == 0 {
		return
	}
	a := wire.Ack{Origin: n.origin(), Seq: n.rep.Follower().Standby().AckSent(), Leaving: true}
	n.sendAck(a, to, 2)
	n.tr.Flush()
	n.stats.LeavingSent++
	n.cfg.Log.Info("stopping: told the primary, which stops waiting for this standby's acks", "primary", n.rep.Follower().Standby().Primary(), "acked", a.Seq)
}

// sendAck queues ACK a, stamped with our history id, to addr, times
// times (the pass sends it).
func (n *Node) sendAck(a wire.Ack, addr netip.AddrPort, times int) {
	a.History = n.rep.Identity().ID()
	n.frameBuf = a.Append(n.frameBuf[:0])
	for range times {
		n.tr.Send(n.frameBuf, addr)
	}
}
