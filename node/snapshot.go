package node

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"

	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapshotCache is the primary's latest snapshot, decompressed in memory,
// so chunks can be served from any offset without re-reading the file.
type snapshotCache struct {
	seq, epoch uint64
	data       []byte
	crc        uint32
}

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
	n.fence.Accept(epoch)
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
	if n.snapCache != nil {
		return n.snapCache.seq, true
	}
	seq, _, r, err := n.j.OpenLatestSnapshot()
	if err != nil {
		return 0, false
	}
	r.Close()
	return seq, true
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

// pendingSnapshot is a snapshot encoded at its seq during an apply (the
// state is the engine's at that seq); its file is written after the
// pass's frames, acks and releases have gone, off the agent (see
// writePendingSnapshot).
type pendingSnapshot struct {
	seq, epoch uint64
	data       []byte
	startNs    int64
	done       chan error // nil until the write has started
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

// cutSnapshot encodes the state now (at seq, just applied) and leaves the
// disk work (the write, its fsyncs, the rename and the compaction behind
// it) for writePendingSnapshot, so the agent does not wait for the disk.
// Two cuts at most wait for the disk, written in order, one at a time:
// the one being written and the next. A third waits for the first to be
// written (counted in SnapshotWaitNsMax): the agent waits only for a disk
// that is two snapshots behind, and no multiple of SnapshotEvery is ever
// left out.
func (n *Node) cutSnapshot(seq uint64) *pendingSnapshot {
	n.pollSnapshotWrite()
	if n.nextSnap != nil {
		start := n.nowNs()
		n.writePendingSnapshot()
		if ps := n.pendingSnap; ps != nil {
			n.snapshotWritten(ps, <-ps.done)
		}
		n.stats.SnapshotWaitNsMax = max(n.stats.SnapshotWaitNsMax, n.nowNs()-start)
	}
	start := n.nowNs()
	data, ok := n.encodeSnapshot(seq)
	n.stats.SnapshotEncodeNsMax = max(n.stats.SnapshotEncodeNsMax, n.nowNs()-start)
	if !ok {
		return nil
	}
	ps := &pendingSnapshot{seq: seq, epoch: n.epoch, data: data}
	if n.pendingSnap == nil {
		n.pendingSnap = ps
	} else {
		n.nextSnap = ps
	}
	return ps
}

// writePendingSnapshot starts writing the oldest snapshot cutSnapshot
// encoded, if its write has not started: on a goroutine of its own (the
// lz4 compression, the fsyncs and the rename run off the agent, so acks,
// applies and releases go on meanwhile), or inline under a simulated clock
// (Config.Clock), where everything runs on the simulator's one goroutine
// (then every cut waiting is written). The snapshot is fsynced on its
// own; a crash that leaves the journal ending before it is recovered by
// restoreSnapshot (the journal continues after it).
func (n *Node) writePendingSnapshot() {
	for {
		ps := n.pendingSnap
		if ps == nil || ps.done != nil {
			return
		}
		ps.startNs = n.nowNs()
		ps.done = make(chan error, 1)
		j := n.j
		write := func() error {
			// journal.WriteSnapshot touches no journal state and may run
			// off the owner goroutine, one at a time (every other snapshot
			// operation first waits for this one).
			return j.WriteSnapshot(ps.seq, ps.epoch, func(w io.Writer) error {
				_, err := w.Write(ps.data)
				return err
			})
		}
		if n.cfg.Clock == nil {
			go func() { ps.done <- write() }()
			return
		}
		ps.done <- write()
		n.pollSnapshotWrite()
	}
}

// pollSnapshotWrite finishes a snapshot write that has completed.
func (n *Node) pollSnapshotWrite() {
	ps := n.pendingSnap
	if ps == nil || ps.done == nil {
		return
	}
	select {
	case err := <-ps.done:
		n.snapshotWritten(ps, err)
	default:
	}
}

// finishSnapshotWrite writes the snapshots waiting, if any, and waits for
// them: before promotion and Close.
func (n *Node) finishSnapshotWrite() {
	for n.pendingSnap != nil {
		n.writePendingSnapshot()
		if ps := n.pendingSnap; ps != nil {
			n.snapshotWritten(ps, <-ps.done)
		}
	}
}

// abandonSnapshotWrite waits for a write under way and forgets the
// snapshots waiting without compacting behind them: before the history is
// reset or another snapshot installed (the reset then drops a written one
// if it lies past the fork).
func (n *Node) abandonSnapshotWrite() {
	if ps := n.pendingSnap; ps != nil && ps.done != nil {
		<-ps.done
	}
	n.pendingSnap, n.nextSnap = nil, nil
}

// snapshotWritten publishes a written snapshot (served after a promotion)
// and compacts the journal behind it.
func (n *Node) snapshotWritten(ps *pendingSnapshot, err error) {
	n.pendingSnap, n.nextSnap = n.nextSnap, nil
	n.stats.SnapshotWriteNsMax = max(n.stats.SnapshotWriteNsMax, n.nowNs()-ps.startNs)
	if err != nil {
		n.cfg.Log.Error("snapshot write failed", "seq", ps.seq, "err", err)
		return
	}
	if n.snapCache == nil || n.snapCache.seq < ps.seq {
		n.snapCache = newSnapshotCache(ps.seq, ps.epoch, ps.data)
	}
	n.stats.Snapshots++
	if n.ldr != nil && n.role == RolePrimary {
		n.ldr.SnapshotWritten(ps.seq)
	}
	if _, err := n.j.Compact(); err != nil {
		n.cfg.Log.Warn("journal compaction failed", "err", err)
	}
}

func newSnapshotCache(seq, epoch uint64, data []byte) *snapshotCache {
	return &snapshotCache{seq: seq, epoch: epoch, data: data, crc: crc32.Checksum(data, castagnoli)}
}

// serveSnapshot answers a SNAPSHOT_REQUEST from standby node with a burst
// of chunks from the requested offset of the latest snapshot. A request
// from offset 0 carries the seq the standby has applied: it gets a
// snapshot past it, a fresh one cut now when the latest is not (or is
// stale), and nothing when we are not ahead of it. The chunks of one
// snapshot sent to one standby are bounded per second (snapBudget): past
// the bound they are refused, counted and logged once.
func (n *Node) serveSnapshot(req *wire.SnapshotRequest, node uint32, to netip.AddrPort) {
	applied := n.eng.AppliedSeq()
	if req.Offset == 0 {
		after := req.SnapshotSeq
		if applied <= after {
			n.stats.SnapshotRequestsNotBehind++
			return // nothing we hold is ahead of the standby
		}
		if n.snapCache == nil || n.snapCache.seq <= after || applied-n.snapCache.seq > n.cfg.SnapshotEvery/2 {
			// Served from memory at once; its file is written off the
			// agent after the pass, like a periodic one.
			if ps := n.cutSnapshot(applied); ps != nil {
				n.snapCache = newSnapshotCache(ps.seq, ps.epoch, ps.data)
				n.stats.SnapshotsOnDemand++
			}
		}
	}
	c := n.snapCache
	if c == nil {
		return
	}
	offset := req.Offset
	if req.SnapshotSeq != c.seq || offset > uint64(len(c.data)) {
		offset = 0 // a different snapshot now: the standby restarts from 0
	}
	chunkBytes := uint64(wire.MaxSnapshotData(n.datagramLen()))
	chunks := (uint64(len(c.data)) + chunkBytes - 1) / chunkBytes
	for i := 0; i < SnapshotChunkBurst; i++ {
		if ok, first := n.snapBudget.Allow(node, c.seq, chunks, n.nowNs()); !ok {
			n.stats.SnapshotChunksRefused++
			if first {
				n.cfg.Log.Warn("snapshot chunks to this standby hit their bound; refusing more of this snapshot",
					"standby", node, "snapshot", c.seq, "chunks_served", n.snapBudget.Served(node), "snapshot_chunks", chunks)
			}
			return
		}
		end := min(offset+chunkBytes, uint64(len(c.data)))
		ch := wire.SnapshotChunk{Origin: n.origin(), SnapshotSeq: c.seq, Total: uint64(len(c.data)), Offset: offset, Checksum: c.crc, Data: c.data[offset:end]}
		frame, err := ch.Append(n.frameBuf[:0])
		if err != nil {
			n.cfg.Log.Error("snapshot chunk encode", "err", err)
			return
		}
		n.frameBuf = frame
		n.send(frame, to)
		n.stats.SnapshotChunksSent++
		offset = end
		if offset >= uint64(len(c.data)) {
			return
		}
	}
}

func (n *Node) sendSnapshotRequest(req *wire.SnapshotRequest) {
	req.Origin = n.origin()
	n.frameBuf = req.Append(n.frameBuf[:0])
	n.send(n.frameBuf, n.primaryAddr)
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
	err := n.j.WriteSnapshot(seq, n.epoch, func(w io.Writer) error {
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
