package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// restoreSnapshot loads the newest valid snapshot into the state machine.
func (n *Node) restoreSnapshot() (uint64, error) {
	seq, epoch, r, err := n.j.OpenLatestSnapshot()
	if errors.Is(err, journal.ErrNoSnapshot) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("node: open snapshot: %w", err)
	}
	defer r.Close()
	if err := n.eng.Restore(r); err != nil {
		return 0, fmt.Errorf("node: restore snapshot %d: %w", seq, err)
	}
	n.tm.Fence().Accept(epoch)
	if _, last := n.j.Last(); last < seq {
		// The snapshot was installed after everything the journal holds
		// (a standby caught up by snapshot): the journal continues at seq+1.
		if err := n.j.ResetTo(seq); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

func (n *Node) latestSnapshotSeq() (uint64, bool) {
	if seq, ok := n.snapServe.Latest(); ok {
		return seq, true
	}
	seq, _, r, err := n.j.OpenLatestSnapshot()
	if err != nil {
		return 0, false
	}
	r.Close()
	return seq, true
}

// initSnapshots makes the snapshot writer (journal.SnapshotWriter: inline
// under a simulated clock, where everything runs on the simulator's one
// goroutine) and the snapshot server (sequencer.SnapshotServer, within the
// primary's budget of chunks per standby) once the journal is open.
func (n *Node) initSnapshots() {
	n.snapw = journal.NewSnapshotWriter(n.j, journal.SnapshotWriterOptions{Inline: n.cfg.Clock != nil, NowNs: n.nowNs})
	n.snapServe = sequencer.NewSnapshotServer(sequencer.SnapshotServerConfig{
		Every: n.cfg.SnapshotEvery, ChunkBytes: wire.MaxSnapshotData(n.tr.DatagramLen()), Burst: SnapshotChunkBurst, Budget: sequencer.NewSnapshotBudget(0, 0),
	})
}

// encodeSnapshot serialises the engine's state, which must be at seq.
func (n *Node) encodeSnapshot(seq uint64) ([]byte, bool) {
	var buf bytes.Buffer
	if err := n.eng.Snapshot(&buf); err != nil {
		n.cfg.Log.Error("snapshot failed", "seq", seq, "err", err)
		return nil, false
	}
	return buf.Bytes(), true
}

// periodicSnapshot runs on either role after it applied seq: every
// SnapshotEvery (the state is deterministic, so a primary's and its
// standbys' snapshots at a seq are byte-identical) it cuts a snapshot, so
// every node's disk stays bounded and a restart replays at most
// SnapshotEvery records.
func (n *Node) periodicSnapshot(seq uint64) {
	if seq%n.cfg.SnapshotEvery == 0 {
		n.cutSnapshot(seq)
	}
}

// cutSnapshot encodes the state now (at seq, just applied) and hands it
// to the snapshot writer, which leaves the disk work (the write, its
// fsyncs, the rename and the compaction behind it) for
// writePendingSnapshot, so the agent does not wait for the disk. Two cuts
// at most wait for the disk; a third waits for the first to be written
// (SnapshotWaitNsMax), so no multiple of SnapshotEvery is left out.
func (n *Node) cutSnapshot(seq uint64) ([]byte, bool) {
	start := n.nowNs()
	data, ok := n.encodeSnapshot(seq)
	n.stats.SnapshotEncodeNsMax = max(n.stats.SnapshotEncodeNsMax, n.nowNs()-start)
	if !ok {
		return nil, false
	}
	waitNs, done := n.snapw.Cut(seq, n.tm.Epoch(), data)
	n.snapshotsWritten(done)
	n.stats.SnapshotWaitNsMax = max(n.stats.SnapshotWaitNsMax, waitNs)
	return data, true
}

// writePendingSnapshot starts writing the oldest snapshot cut, if its
// write has not started: off the agent (the lz4 compression, the fsyncs
// and the rename; acks, applies and releases go on meanwhile), or inline
// under a simulated clock. The snapshot is fsynced on its own; a crash
// that leaves the journal ending before it is recovered by
// restoreSnapshot (the journal continues after it).
func (n *Node) writePendingSnapshot() { n.snapshotsWritten(n.snapw.Start()) }

// pollSnapshotWrite finishes a snapshot write that has completed.
func (n *Node) pollSnapshotWrite() { n.snapshotsWritten(n.snapw.Poll()) }

// finishSnapshotWrite writes the snapshots waiting, if any, and waits for
// them: before promotion and Close.
func (n *Node) finishSnapshotWrite() { n.snapshotsWritten(n.snapw.Finish()) }

// abandonSnapshotWrite waits for a write under way and forgets the
// snapshots waiting without compacting behind them: before the history is
// reset or another snapshot installed (the reset then drops a written one
// if it lies past the fork).
func (n *Node) abandonSnapshotWrite() { n.snapw.Abandon() }

// snapshotsWritten publishes the snapshots the writer wrote (served after
// a promotion); it compacted the journal behind each.
func (n *Node) snapshotsWritten(done []journal.SnapshotWrite) {
	for i := range done {
		w := &done[i]
		n.stats.SnapshotWriteNsMax = max(n.stats.SnapshotWriteNsMax, w.WriteNs)
		if w.Err != nil {
			n.cfg.Log.Error("snapshot write failed", "seq", w.Seq, "err", w.Err)
			continue
		}
		n.snapServe.Hold(w.Seq, w.Epoch, w.Data)
		n.stats.Snapshots++
		if n.ldr != nil && n.tm.Primary() {
			n.ldr.SnapshotWritten(w.Seq)
		}
		if w.CompactErr != nil {
			n.cfg.Log.Warn("journal compaction failed", "err", w.CompactErr)
		}
	}
}

// serveSnapshot answers a SNAPSHOT_REQUEST from standby node with a burst
// of chunks (sequencer.SnapshotServer decides: from which offset, whether
// to cut a fresh snapshot first, within the chunks per standby).
func (n *Node) serveSnapshot(req *wire.SnapshotRequest, node uint32, to netip.AddrPort) {
	switch n.snapServe.Answer(req, n.eng.AppliedSeq()) {
	case sequencer.SnapshotNotBehind:
		n.stats.SnapshotRequestsNotBehind++
		return // nothing we hold is ahead of the standby
	case sequencer.SnapshotCutFirst:
		// Served from memory at once; its file is written off the agent
		// after the pass, like a periodic one.
		applied := n.eng.AppliedSeq()
		if data, ok := n.cutSnapshot(applied); ok {
			n.snapServe.Hold(applied, n.tm.Epoch(), data)
			n.stats.SnapshotsOnDemand++
		}
	}
	if !n.snapServe.Begin(req, node) {
		return
	}
	for n.snapServe.Serving() {
		frame, st, err := n.snapServe.Next(n.origin(), n.nowNs(), n.frameBuf[:0])
		switch st {
		case sequencer.ChunkReady:
			n.frameBuf = frame
			n.tr.Send(frame, to)
			n.stats.SnapshotChunksSent++
		case sequencer.ChunkRefusedFirst:
			seq, _ := n.snapServe.Latest()
			n.cfg.Log.Warn("snapshot chunks to this standby hit their bound; refusing more of this snapshot",
				"standby", node, "snapshot", seq, "chunks_served", n.snapServe.Served(node), "snapshot_chunks", n.snapServe.Chunks())
			n.stats.SnapshotChunksRefused++
		case sequencer.ChunkRefused:
			n.stats.SnapshotChunksRefused++
		case sequencer.ChunkFailed:
			n.cfg.Log.Error("snapshot chunk encode", "err", err)
		}
	}
}

func (n *Node) sendSnapshotRequest(req *wire.SnapshotRequest) {
	req.Origin = n.origin()
	n.frameBuf = req.Append(n.frameBuf[:0])
	n.tr.Send(n.frameBuf, n.primaryAddr)
}

// installSnapshot replaces the state with a fetched snapshot at seq,
// stores it locally (so a restart resumes from it), and resumes the
// follower after it (what it buffered past seq is applied now).
func (n *Node) installSnapshot(seq uint64, data []byte) {
	n.abandonSnapshotWrite() // of the state being replaced
	if err := n.eng.Restore(bytes.NewReader(data)); err != nil {
		n.cfg.Log.Error("snapshot restore failed", "seq", seq, "err", err)
		return
	}
	err := n.j.WriteSnapshot(seq, n.tm.Epoch(), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err == nil {
		err = n.j.ResetTo(seq)
	}
	if err != nil {
		n.cfg.Log.Error("snapshot store failed", "seq", seq, "err", err)
	}
	n.fol.Install(seq)
	n.applyEntries()
	n.fol.Installed()
	n.replay.Reset()
	if o := n.cfg.Observer; o != nil {
		o.Installed(n.cfg.ID, seq)
	}
	n.stats.SnapshotsInstalled++
	n.stats.Applied = seq
	n.cfg.Log.Info("snapshot installed", "seq", seq, "bytes", len(data))
	// The primary ran on while we fetched; what it sent past our window
	// meanwhile comes by retransmit from its journal, which holds
	// everything after the snapshot it just served.
}
