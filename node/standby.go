package node

import (
	"errors"
	"net/netip"

	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/standby"
	"github.com/seqbus/seqbus/wire"
)

// standbyMaxPending is how far ahead of applied a standby buffers before
// it needs a snapshot: 8192 frames' worth of single messages, 12 MB of
// slots at one datagram each.
const standbyMaxPending = 8192

// becomeStandby makes this node follow the highest epoch it knows.
func (n *Node) becomeStandby() error {
	n.setGroupMember(true) // a no-op unless we led
	n.role = RoleStandby
	n.epoch = n.fence.Highest()
	w, err := standby.New(standby.Config{
		Start:           n.eng.AppliedSeq(),
		MaxPending:      standbyMaxPending,
		MaxMessageBytes: wire.DefaultDatagramLen,
	}, n.applyFromWindow)
	if err != nil {
		return err
	}
	n.win = w
	n.catchingUp = false
	n.follow.Reset()
	n.hashes.Reset() // hashes of another history must not be compared
	return nil
}

// applyFromWindow is the window's ApplyFunc: journal, then apply. The ack
// follows the journal's durable watermark, never the window alone.
func (n *Node) applyFromWindow(seq uint64, payload []byte) {
	epoch := n.epochOf(seq)
	if err := n.j.Append(epoch, seq, payload, n.nowNs()); err != nil {
		// The ack follows the journal, so it stops here; this node must
		// not be promoted either. Logged once.
		n.stats.JournalErrors++
		if !n.journalBroken {
			n.journalBroken = true
			n.cfg.Log.Error("standby journal append failed; acks stop, will not lead", "seq", seq, "err", err)
		}
		return
	}
	n.eng.Apply(seq, payload, n.applyOut(seq)) // the session history and the market-data ring
	if o := n.cfg.Observer; o != nil {
		o.Applied(n.cfg.ID, epoch, seq, payload)
	}
	n.stats.Applied = seq
	if seq%n.cfg.HashEvery == 0 {
		if !n.hashes.Local(seq, n.eng.StateHash()) {
			n.hashMismatch(seq)
		}
	}
	n.periodicSnapshot(seq)
}

func (n *Node) hashMismatch(seq uint64) {
	n.stats.HashMismatches++
	n.cfg.Log.Error("STATE DIVERGENCE: state hash differs from the primary's", "seq", seq)
}

// acceptEpoch applies the fence to a frame of the replication stream
// (replica.Standby.Fence): older epochs are stale; a newer one is accepted
// only through its NEW_EPOCH, and until that arrives its frames are
// dropped and its primary asked to repeat it.
func (n *Node) acceptEpoch(f *wire.Frame, now int64) bool {
	switch n.follow.Fence(f.Epoch, n.epoch, n.fence.Refuses(f.Epoch)) {
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
	if id == n.follow.Primary() {
		n.follow.SawPrimary(id, now) // the common case: no lookup
		return true
	}
	addr, ok := n.cfg.Peers[id]
	if !ok {
		n.stats.DropUnknownNode++
		return false
	}
	n.follow.SawPrimary(id, now)
	n.primaryAddr = addr
	if n.fetch.Active() {
		// The new primary may hold another snapshot, or none cached at
		// our offset: start the transfer over from it (sim bug F).
		n.snapFile = nil
		req := n.fetch.Restart(now)
		n.sendSnapshotRequest(&req)
		n.cfg.Log.Info("new primary during a snapshot fetch: restarting it", "primary", id)
	}
	return true
}

func (n *Node) standbyFrame(f *wire.Frame, from netip.AddrPort, now int64) {
	switch f.Type {
	case wire.TypeData, wire.TypeRetransmit:
		if n.isOlderHistory(f) {
			// Records from before the current epoch, resent by our
			// primary under the epoch they were sequenced in.
			n.hist.Note(f.Seq, f.LastSeq(), f.Epoch)
		} else if !n.acceptEpoch(f, now) {
			return
		}
		if f.Type == wire.TypeRetransmit {
			n.nak.sched.OnRetransmit(f.Seq, f.LastSeq(), now)
			n.stats.RetransmitsReceived++
		}
		n.onMessages(f, now)
	case wire.TypeHeartbeat:
		if !n.acceptEpoch(f, now) {
			return
		}
		n.win.ObserveHighest(f.Seq)
		n.md.OnHeartbeat(f, now) // learns the primary's released MD seq
		n.mdSendReplies()
	case wire.TypeHash:
		if !n.acceptEpoch(f, now) {
			return
		}
		h, _ := wire.DecodeHash(f)
		if !n.hashes.Remote(h.Seq, h.Hash) {
			n.hashMismatch(h.Seq)
		}
	case wire.TypeNeedSnapshot:
		if !n.acceptEpoch(f, now) {
			return
		}
		n.startFetch(now)
	case wire.TypeSnapshotChunk:
		if !n.acceptEpoch(f, now) {
			return
		}
		c, _ := wire.DecodeSnapshotChunk(f)
		n.onChunk(&c, now)
	case wire.TypeNewEpoch:
		n.onNewEpoch(f, now)
	case wire.TypeCommand:
		n.stats.DropNotPrimary++
	default:
		n.stats.DropUnexpected++
	}
}

func (n *Node) onMessages(f *wire.Frame, now int64) {
	it := f.Messages()
	for {
		seq, msg, ok := it.Next()
		if !ok {
			return
		}
		_, _, err := n.win.OnMessage(seq, msg)
		if err == nil {
			continue
		}
		n.nak.rejects.Count(err)
		if errors.Is(err, standby.ErrNeedSnapshot) {
			if n.catchingUp {
				n.win.ObserveHighest(seq) // NAKed as part of the tail
			} else {
				n.startFetch(now)
			}
		}
	}
}

func (n *Node) standbyAfterBatch(now int64) {
	n.pollSnapshotWrite()
	if n.refetching && n.follow.Primary() != 0 && n.win.Highest() > 0 && n.win.Applied() >= n.win.Highest() && !n.fetch.Active() {
		n.setRefetching(false)
		n.stats.RefetchesDone++
		n.cfg.Log.Info("caught up after discarding the history: may lead again", "applied", n.win.Applied())
	}
	n.catchUpDone()
	n.nakGaps(now)
	n.flushJournal()
	n.kickSync()
	n.maybeAck(now, false)
	n.writePendingSnapshot() // after the ack, and off the lock
}

// flushJournal writes the records appended in this batch (one write); the
// ack follows Durable, which counts only written records.
func (n *Node) flushJournal() {
	if err := n.j.Flush(); err != nil {
		n.stats.JournalErrors++
		if !n.journalBroken {
			n.journalBroken = true
			n.cfg.Log.Error("standby journal write failed; acks stop, will not lead", "err", err)
		}
	}
}

func (n *Node) standbyTick(now int64) {
	n.pollSnapshotWrite()
	n.writePendingSnapshot()
	n.flushJournal()
	n.nakGaps(now)
	if req, ok := n.fetch.Poll(now); ok {
		n.sendSnapshotRequest(&req)
	}
	n.maybeAck(now, true)
}

// nakState is the standby's loss repair: the NAK timers, the rejected
// messages by reason and the scratch the gaps are found in.
type nakState struct {
	sched   *standby.NakScheduler
	rejects standby.Rejects
	gapBuf  [wire.MaxNakRanges]standby.Range
	dueBuf  [wire.MaxNakRanges]standby.Range
}

// nakGaps asks the primary for every gap that is due (one NAK frame).
func (n *Node) nakGaps(now int64) {
	if !n.primaryAddr.IsValid() || n.fetch.Active() {
		return
	}
	gaps := n.win.Gaps(n.nak.gapBuf[:0])
	due := n.nak.sched.Poll(gaps, now, n.nak.dueBuf[:0])
	if len(due) == 0 {
		return
	}
	nak := wire.Nak{Origin: n.origin(), Ack: n.win.Ack()}
	for _, r := range due {
		nak.Add(wire.Range{From: r.From, To: r.To})
	}
	n.frameBuf = nak.Append(n.frameBuf[:0])
	n.send(n.frameBuf, n.primaryAddr)
	n.stats.NaksSent++
}

// maybeAck sends ACK(min(applied, durable)) when it moved, or every
// AckIntervalNs when periodic is set (liveness for the primary).
func (n *Node) maybeAck(now int64, periodic bool) {
	if !n.primaryAddr.IsValid() {
		return
	}
	ack := replica.Ack(n.win.Ack(), n.j.Durable()) // durable before ack
	if !n.follow.AckDue(ack, now, periodic) {
		return
	}
	a := wire.Ack{Origin: n.origin(), Seq: ack}
	n.frameBuf = a.Append(n.frameBuf[:0])
	n.send(n.frameBuf, n.primaryAddr)
	n.follow.Acked(ack, now)
	n.stats.AcksSent++
}

// isOlderHistory reports whether f is a RETRANSMIT from our current
// primary of records wholly before the current epoch
// (replica.History.IsOlder).
func (n *Node) isOlderHistory(f *wire.Frame) bool {
	return !n.cfg.Unsafe.NoFencing && n.hist.IsOlder(f, n.epoch, n.follow.Primary())
}

// askForNewEpoch tells a primary of a newer epoch that we still follow an
// older one (an ACK stamped with our epoch), so it repeats its NEW_EPOCH
// at once instead of at its next 100 ms repeat. At most once a
// millisecond.
func (n *Node) askForNewEpoch(id uint32, now int64) {
	addr, ok := n.cfg.Peers[id]
	if !ok || !n.follow.AskNewEpoch(now) {
		return
	}
	a := wire.Ack{Origin: n.origin(), Seq: n.win.Ack()}
	n.frameBuf = a.Append(n.frameBuf[:0])
	n.send(n.frameBuf, addr)
}
