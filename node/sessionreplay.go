package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/wire"
)

// Session replay (issue 20, item 2) is package session's pure core; the
// node feeds it the outputs it applies and the requests that arrive, and
// sends what it answers (session/doc.go has the rules and the bounds).

// historyEmitter records the outputs of a node that does not release (a
// standby, a rebuild from the journal): those to sessions in the history,
// market data in the market-data ring (mdfeed.go; dropped without one).
// seq is the command applied: a rebuild's scratch state machine is not
// the node's, so it comes from here, not from the node's engine.
type historyEmitter struct {
	n   *Node
	seq uint64
}

func (e *historyEmitter) Emit(to uint64, payload []byte) {
	if to == engine.MarketData {
		e.n.md.Add(e.seq, payload) // false without a ring: dropped
		return
	}
	e.n.replay.Record(e.seq, to, payload)
}

func (n *Node) historyAt(seq uint64) engine.Emitter {
	n.histEmitter = historyEmitter{n: n, seq: seq}
	return &n.histEmitter
}

// applyOut is the emitter a standby or a rebuild applies seq with: the
// history's, the ring's alone without a history, or nil without either
// (then the engine skips encoding its outputs).
func (n *Node) applyOut(seq uint64) engine.Emitter {
	if n.replay.History() == nil {
		return n.mdStandbyEmitter()
	}
	return n.historyAt(seq)
}

// historyBelowSnapshot refills the history and the ring with the outputs
// of the commands at and below the latest snapshot, before the rebuild
// replays the journal above it (session.FillBelowSnapshot).
func (n *Node) historyBelowSnapshot(j *journal.Journal) error {
	if n.replay.History() == nil && !n.md.Enabled() {
		return nil
	}
	return session.FillBelowSnapshot(j, journal.DirReader{FS: n.cfg.FS, Dir: n.cfg.Dir}, n.cfg.NewScratchStateMachine, n.historyAt)
}

// onReplayRequest answers a REPLAY_REQUEST (MAC already verified with the
// client key when one is configured).
func (n *Node) onReplayRequest(f *wire.Frame, from netip.AddrPort, now int64) {
	req, err := wire.DecodeReplayRequest(f)
	if err != nil {
		n.stats.DropUnexpected++
		return
	}
	// Leading by the clock now, not the pass's time (see release).
	q := session.Request{Session: req.Session, From: req.From, NowNs: now, Leading: n.rep.MayLeadNow(n.nowNs())}
	if q.Leading {
		q.Released, q.Durable, q.Epoch = n.rep.Leader().Primary().Gate().Released(), n.j.Durable(), n.rep.Roles().Epoch()
	}
	q.Engine, _ = n.eng().(session.OutSeqer)
	n.carryOut(n.replay.Request(q), from)
}

// carryOut does what an answer says, in its order: note where the
// session is, then start a recompute, or send the replayed OUTPUT frames
// and REPLAY_END.
func (n *Node) carryOut(a session.Answer, to netip.AddrPort) {
	if a.NoteSession && !n.rep.Sessions().Note(a.End.Session, to) {
		n.stats.SessionsFull++
	}
	switch a.Action {
	case session.StartRecompute:
		n.startRecompute(a.Job, to)
	case session.Send:
		if a.End.Status != wire.ReplayRefused {
			// Released outputs, like a release's: queued alone, and the
			// lease checked by the clock right before they leave
			// (sendUnderLease, deferred: after the frames below are
			// queued). A refusal holds none and leaves with the pass.
			n.tr.Flush()
			defer n.sendUnderLease()
		}
		frames := n.replay.Frames(&a, n.origin())
		for frame, ok := frames.Next(); ok; frame, ok = frames.Next() {
			n.tr.Send(frame, to)
		}
		a.End.Origin = n.origin()
		n.tr.Send(a.End.Append(n.frameBuf[:0]), to)
	}
}
