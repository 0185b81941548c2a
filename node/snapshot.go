package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/wire"
)

// Snapshots are package snapshot's Store: cut here, on the agent, from
// the state just applied; written off the agent by the journal's writer;
// the latest served in chunks to a fetching standby. The node tells a
// primary's sequencer what was written and carries out an install's
// follow-up (the follower, session replay, the observer).

// periodicSnapshot runs on either role after it applied seq, a record of
// epoch: every SnapshotEvery it cuts a snapshot (snapshot.Store.Periodic)
// labelled with that record's epoch, the epoch of the history it holds.
// Not the epoch the node follows: a standby catching up on records of an
// older epoch that restarted from a snapshot labelled with the newer one
// would take its whole history for the newer epoch's and refuse the
// older records it still lacked as stale, for good (the simulator, with
// planned stops: seed 10698).
func (n *Node) periodicSnapshot(seq, epoch uint64) {
	n.snaps.Periodic(n.eng(), seq, epoch)
	n.snapshotsWritten()
}

// writePendingSnapshot starts writing the oldest snapshot cut, off the
// agent (acks, applies and releases go on meanwhile), after a poll for a
// write that has completed.
func (n *Node) writePendingSnapshot() {
	n.snaps.Poll()
	n.snaps.Start()
	n.snapshotsWritten()
}

// finishSnapshotWrite writes the snapshots waiting, if any, and waits for
// them: before promotion and Close.
func (n *Node) finishSnapshotWrite() {
	n.snaps.Finish()
	n.snapshotsWritten()
}

// snapshotsWritten tells a primary's sequencer of the latest snapshot
// written (a NAK below it is answered from the snapshot).
func (n *Node) snapshotsWritten() {
	if seq, ok := n.snaps.Written(); ok && n.rep.Leader() != nil && n.rep.Roles().Primary() {
		n.rep.Leader().SnapshotWritten(seq)
	}
}

// serveSnapshot answers a SNAPSHOT_REQUEST from standby node with a burst
// of chunks.
func (n *Node) serveSnapshot(req *wire.SnapshotRequest, node uint32, to netip.AddrPort) {
	n.snaps.Serve(req, node, n.eng(), n.rep.Roles().Epoch())
	n.snapshotsWritten()
	for frame, ok := n.snaps.Next(n.origin(), n.nowNs(), n.frameBuf[:0]); ok; frame, ok = n.snaps.Next(n.origin(), n.nowNs(), n.frameBuf[:0]) {
		n.frameBuf = frame
		n.tr.Send(frame, to)
	}
}

// installSnapshot replaces the state with a fetched snapshot at seq,
// stores it locally (so a restart resumes from it), and resumes the
// follower after it (what it buffered past seq is applied now). The
// stored snapshot is labelled, as a periodic one is, with the epoch of
// the record at seq (the NEW_EPOCH of the epoch we follow says where the
// previous one ends), not with the epoch we follow: a new primary serves
// a snapshot it cut as a standby, and one restarted from it before the
// previous epoch's records after it arrived refused them as stale and
// fetched another (sim TestScenarioCrashAfterInstall).
func (n *Node) installSnapshot(seq uint64, data []byte) {
	epoch := n.epochOf(seq)
	if !n.snaps.Install(n.eng(), seq, epoch, data) {
		return
	}
	n.st.Installed(seq, epoch)
	n.rep.Follower().Install(seq)
	n.applyEntries()
	n.rep.Follower().Installed()
	n.replay.Reset()
	if o := n.cfg.Observer; o != nil {
		o.Installed(n.cfg.ID, seq)
	}
	n.stats.Applied = seq
	n.cfg.Log.Info("snapshot installed", "seq", seq, "bytes", len(data))
	// The primary ran on while we fetched; what it sent past our window
	// meanwhile comes by retransmit from its journal, which holds
	// everything after the snapshot it just served.
}
