package sim

import (
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/wire"
)

// checkTooOld runs when node id sends a client a replay's TooOld end: the
// client skips outputs e.From..e.Next-1 for good, which the session
// history's stated bound allows only when the node's disk cannot give
// them back (DiagSessionTooOld: no snapshot below them that the journal
// continues from, and a journal that does not start at seq 1). So it
// recomputes the first of them from the node's disk as it is now, as the
// node's own recompute does: a compaction since the node's answer only
// removes what the disk holds, and a snapshot cut since is past outputs
// already released, so the disk now can recompute no more than it could
// then. If it finds the output, the TooOld was wrong, a real bug the
// bound's diagnosis would otherwise hide (as it hid bug H until the
// soaks with more standbys).
func (c *checker) checkTooOld(id int, pkt []byte) {
	f, _, err := wire.Parse(pkt)
	if err != nil || f.Type != wire.TypeReplayEnd {
		return
	}
	e, err := wire.DecodeReplayEnd(&f)
	if err != nil || e.Status != wire.ReplayTooOld {
		return
	}
	seqs := c.historySeq[e.Session]
	if e.From == 0 || e.From > uint64(len(seqs)) || e.Next <= e.From {
		return // nothing released is skipped
	}
	seq := seqs[e.From-1]
	sn := c.s.nodes[id]
	src := journal.DirReader{FS: sn.fs, Dir: sn.cfg.Dir}
	job := session.Job{Session: e.Session, From: e.From, Upto: seq}
	res := session.Recompute(job, src, func() (engine.StateMachine, error) {
		return engine.New(engineConfig())
	}, nil)
	c.s.logf("node %d told client %d its outputs %d..%d (from seq %d) are too old; its disk recomputes %d of them (too old %v, err %v)",
		id, e.Session, e.From, e.Next-1, seq, len(res.Outputs), res.TooOld, res.Err)
	if res.Err == nil && !res.TooOld && len(res.Outputs) > 0 {
		c.violate(9, "node %d told client %d its outputs from %d (seq %d) are too old, but its disk recomputes them", id, e.Session, e.From, seq)
	}
}
