// Package snapshot is a node's snapshots at run time: cut from the state
// machine on its owner (the node's agent, or whoever holds the node's
// lock), written off it by the journal's snapshot writer
// (journal.SnapshotWriter: the lz4, the fsyncs and the rename on a
// goroutine of its own, the journal compacted behind each), the latest
// held and served in chunks to a fetching standby
// (sequencer.SnapshotServer, within its budget of chunks per standby; one
// cut for a fetch is served from memory and never written), and a
// fetched one installed.
//
// A Store is owned by one goroutine at a time. It reads no clock but the
// one it is given and sends nothing: Next hands the owner each chunk to
// send. What it does is counted (Counters) and its failures logged.
package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// Config is a Store's journal, cadence and chunk size.
type Config struct {
	Journal *journal.Journal
	// Inline writes each snapshot on the owner's goroutine (a simulated
	// clock, where everything runs on the simulator's one goroutine).
	Inline bool
	NowNs  func() int64 // monotonic nanoseconds
	// Every: a snapshot is cut at every multiple of Every (Periodic).
	Every uint64
	// ChunkBytes and Burst: the data of one chunk, and how many chunks
	// one answer sends.
	ChunkBytes, Burst int
	Log               *slog.Logger // nil: slog.Default()
}

// Counters are what a Store counted, for the node's status.
type Counters struct {
	// Written: snapshots written. OnDemand: cut to answer a fetch.
	// Installed: fetched from a primary and installed.
	Written, OnDemand, Installed uint64
	// ChunksSent, and ChunksRefused by the budget of chunks per standby.
	ChunksSent, ChunksRefused uint64
	// RequestsNotBehind: fetches from a standby not behind us.
	RequestsNotBehind uint64
	// Skipped: snapshots found on disk at a restore that did not verify
	// (each logged; the restore fell back to an older one or the journal).
	Skipped uint64
	// The longest encode, write and wait for the writer (0 unless the
	// disk is slower than Every commands), in nanoseconds.
	EncodeNsMax, WriteNsMax, WaitNsMax int64
}

// Store is a node's snapshots: its writer and its server.
type Store struct {
	j     *journal.Journal
	w     *journal.SnapshotWriter
	srv   *sequencer.SnapshotServer
	every uint64
	now   func() int64
	log   *slog.Logger
	c     Counters
	// written is the latest snapshot written since Written last looked.
	written    uint64
	newWritten bool
	// serving: the standby a burst of chunks goes to (Serve, Next).
	serving uint32
	// lastBytes is the last snapshot's size: the next is encoded into a
	// buffer of about that size, not one grown by doubling from empty.
	lastBytes int
	// The encode buffers' owners: queued were handed to the writer and
	// are not finished (oldest first), served is the server's. A buffer
	// neither holds is spare, and the next cut encodes into it when it is
	// large enough (recycle): in steady state two buffers take turns, and
	// a cut page-faults no fresh memory.
	queued [][]byte
	served []byte
	spare  []byte
}

// New returns a store over cfg.Journal, which must be open.
func New(cfg Config) *Store {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Store{
		j:     cfg.Journal,
		w:     journal.NewSnapshotWriter(cfg.Journal, journal.SnapshotWriterOptions{Inline: cfg.Inline, NowNs: cfg.NowNs}),
		srv:   sequencer.NewSnapshotServer(sequencer.SnapshotServerConfig{Every: cfg.Every, ChunkBytes: cfg.ChunkBytes, Burst: cfg.Burst, Budget: sequencer.NewSnapshotBudget(0, 0)}),
		every: cfg.Every,
		now:   cfg.NowNs,
		log:   cfg.Log,
	}
}

// Counters returns what the store counted.
func (s *Store) Counters() Counters { return s.c }

// Waiting is how many snapshots were cut and are not yet written (0, 1
// or 2).
func (s *Store) Waiting() int { return s.w.Waiting() }

// Chunks is the chunk count of the snapshot held for serving.
func (s *Store) Chunks() uint64 { return s.srv.Chunks() }

// Restore loads the newest valid snapshot on disk into eng and returns
// its seq and epoch (0, 0 without one). When the journal ends before it
// (a standby caught up by snapshot), the journal is reset to continue at
// seq+1.
func (s *Store) Restore(eng engine.StateMachine) (seq, epoch uint64, err error) {
	seq, epoch, r, skipped, err := s.j.OpenLatestSnapshotSkipping()
	if errors.Is(err, journal.ErrNoSnapshot) {
		return 0, 0, nil
	}
	for _, e := range skipped {
		s.c.Skipped++
		s.log.Warn("snapshot does not verify: skipped (kept on disk for inspection); restoring from an older one, or from the journal", "err", e)
	}
	if err != nil && s.j.First() == 1 {
		// Every snapshot is bad, but the journal holds the whole history.
		s.log.Warn("no snapshot verifies: rebuilding from the journal, which holds every record from seq 1", "snapshots", len(skipped))
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("open snapshot: none of %d verifies, and the journal does not hold the history from seq 1 (its first record: %d): %w; "+
			"this directory cannot rebuild the state: a standby restarted on an empty directory (move this one aside, keep it) refetches from the primary", len(skipped), s.j.First(), err)
	}
	defer r.Close()
	if err := eng.Restore(r); err != nil {
		return 0, 0, fmt.Errorf("restore snapshot %d: %w", seq, err)
	}
	if _, last := s.j.Last(); last < seq {
		if err := s.j.ResetTo(seq); err != nil {
			return 0, 0, err
		}
	}
	return seq, epoch, nil
}

// Latest is the seq of the latest snapshot: the one held for serving,
// else the newest on disk.
func (s *Store) Latest() (uint64, bool) {
	if seq, ok := s.srv.Latest(); ok {
		return seq, true
	}
	seq, _, r, err := s.j.OpenLatestSnapshot()
	if err != nil {
		return 0, false
	}
	r.Close()
	return seq, true
}

// Periodic cuts a snapshot when seq, just applied, is a multiple of
// Every. The state is deterministic, so a primary's and its standbys'
// snapshots at a seq are byte-identical; every node cuts its own, so its
// disk stays bounded and a restart replays at most Every records.
func (s *Store) Periodic(eng engine.StateMachine, seq, epoch uint64) {
	if seq%s.every == 0 {
		s.Cut(eng, seq, epoch)
	}
}

// Cut encodes eng's state now (at seq, just applied) and hands it to the
// writer, which leaves the disk work for Start, so the owner does not
// wait for the disk. Two cuts at most wait for the disk; a third waits
// for the first to be written, so no multiple of Every is left out.
func (s *Store) Cut(eng engine.StateMachine, seq, epoch uint64) ([]byte, bool) {
	data, ok := s.encode(eng, seq)
	if !ok {
		return nil, false
	}
	waitNs, done := s.w.Cut(seq, epoch, data)
	s.done(done)
	s.queued = append(s.queued, data)
	s.c.WaitNsMax = max(s.c.WaitNsMax, waitNs)
	return data, true
}

// encode encodes eng's state now (at seq, just applied) into a buffer of
// the store's.
func (s *Store) encode(eng engine.StateMachine, seq uint64) ([]byte, bool) {
	start := s.now()
	buf := bytes.NewBuffer(s.buffer(s.lastBytes + s.lastBytes/8))
	err := eng.Snapshot(buf)
	data := buf.Bytes()
	s.lastBytes = len(data)
	s.c.EncodeNsMax = max(s.c.EncodeNsMax, s.now()-start)
	if err != nil {
		s.log.Error("snapshot failed", "seq", seq, "err", err)
		s.recycle(data)
		return nil, false
	}
	return data, true
}

// buffer returns an empty buffer with room for n bytes: the spare one
// when it has the room.
func (s *Store) buffer(n int) []byte {
	b := s.spare
	s.spare = nil
	if cap(b) < n {
		return make([]byte, 0, n)
	}
	return b[:0]
}

// recycle makes b the spare buffer unless the writer's queue or the
// server still holds it (or the spare is larger).
func (s *Store) recycle(b []byte) {
	if cap(b) == 0 || cap(b) <= cap(s.spare) || sameBuffer(b, s.served) {
		return
	}
	for _, q := range s.queued {
		if sameBuffer(b, q) {
			return
		}
	}
	s.spare = b[:0]
}

// sameBuffer reports whether a and b share their backing array (from its
// start: every buffer here is a whole one).
func sameBuffer(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// hold makes data the snapshot served unless one at or past seq is held
// (sequencer.SnapshotServer.Hold); the buffer it replaces, or data when
// not taken, is recycled.
func (s *Store) hold(seq, epoch uint64, data []byte) {
	if cur, ok := s.srv.Latest(); ok && cur >= seq {
		s.recycle(data)
		return
	}
	old := s.served
	s.srv.Hold(seq, epoch, data)
	s.served = data
	s.recycle(old)
}

// unqueue removes a finished write's buffer from the writer's queue.
func (s *Store) unqueue(data []byte) {
	for i, q := range s.queued {
		if sameBuffer(q, data) {
			s.queued = append(s.queued[:i], s.queued[i+1:]...)
			return
		}
	}
}

// Start starts writing the oldest snapshot cut, if its write has not
// started: off the owner, or inline. The journal is written (and, under
// group and always, synced) through the snapshot's seq first
// (journal.SnapshotWriter), so a crash never leaves the snapshot past the
// journal's end.
func (s *Store) Start() { s.done(s.w.Start()) }

// Poll finishes a snapshot write that has completed.
func (s *Store) Poll() { s.done(s.w.Poll()) }

// Finish writes the snapshots waiting, if any, and waits for them:
// before promotion and close.
func (s *Store) Finish() { s.done(s.w.Finish()) }

// Abandon waits for a write under way and forgets the snapshots waiting
// without compacting behind them: before the history is reset or another
// snapshot installed (the reset then drops a written one if it lies past
// the fork).
func (s *Store) Abandon() {
	s.w.Abandon()
	forgotten := s.queued
	s.queued = nil
	for _, b := range forgotten {
		s.recycle(b)
	}
}

// Drop forgets the snapshot held for serving: it may lie past a fork.
func (s *Store) Drop() {
	s.srv.Drop()
	old := s.served
	s.served = nil
	s.recycle(old)
}

// Written returns the latest snapshot written since it was last called
// (a primary's sequencer serves NAKs below it from the snapshot).
func (s *Store) Written() (uint64, bool) {
	seq, ok := s.written, s.newWritten
	s.newWritten = false
	return seq, ok
}

// done holds the snapshots the writer wrote, for serving; it compacted
// the journal behind each.
func (s *Store) done(done []journal.SnapshotWrite) {
	for i := range done {
		w := &done[i]
		s.c.WriteNsMax = max(s.c.WriteNsMax, w.WriteNs)
		s.unqueue(w.Data)
		if w.Err != nil {
			s.log.Error("snapshot write failed", "seq", w.Seq, "err", w.Err)
			s.recycle(w.Data)
			continue
		}
		s.hold(w.Seq, w.Epoch, w.Data)
		s.c.Written++
		s.written, s.newWritten = w.Seq, true
		if w.CompactErr != nil {
			s.log.Warn("journal compaction failed", "err", w.CompactErr)
		}
	}
}

// Serve starts answering a SNAPSHOT_REQUEST from standby node, whose
// chunks Next returns (the server decides from which offset, whether to
// cut a fresh snapshot of eng first, within the chunks per standby). A
// snapshot cut for it is served from memory and never written: the
// snapshots on disk stay the periodic ones, so a standby's fetch does not
// push the older of the two kept (and the journal behind it) out, and
// what a restart or a session replay's recompute reaches back to stays
// one snapshot interval, however often standbys fetch.
func (s *Store) Serve(req *wire.SnapshotRequest, node uint32, eng engine.StateMachine, epoch uint64) {
	switch s.srv.Answer(req, eng.AppliedSeq()) {
	case sequencer.SnapshotNotBehind:
		s.c.RequestsNotBehind++
		return // nothing we hold is ahead of the standby
	case sequencer.SnapshotCutFirst:
		applied := eng.AppliedSeq()
		if data, ok := s.encode(eng, applied); ok {
			s.hold(applied, epoch, data)
			s.c.OnDemand++
		}
	}
	if s.srv.Begin(req, node) {
		s.serving = node
	}
}

// Next returns the next chunk of the answer Serve began, encoded into
// buf, or false when the answer is done.
func (s *Store) Next(origin wire.Origin, nowNs int64, buf []byte) ([]byte, bool) {
	for s.srv.Serving() {
		frame, st, err := s.srv.Next(origin, nowNs, buf)
		switch st {
		case sequencer.ChunkReady:
			s.c.ChunksSent++
			return frame, true
		case sequencer.ChunkRefusedFirst:
			seq, _ := s.srv.Latest()
			s.log.Warn("snapshot chunks to this standby hit their bound; refusing more of this snapshot",
				"standby", s.serving, "snapshot", seq, "chunks_served", s.srv.Served(s.serving), "snapshot_chunks", s.srv.Chunks())
			s.c.ChunksRefused++
		case sequencer.ChunkRefused:
			s.c.ChunksRefused++
		case sequencer.ChunkFailed:
			s.log.Error("snapshot chunk encode", "err", err)
		}
	}
	return nil, false
}

// Install replaces eng's state with a fetched snapshot at seq and stores
// it (so a restart resumes from it), the journal continuing at seq+1.
// false: the snapshot did not restore, and eng is as the restore left it.
// A store that fails is logged: the state is installed all the same.
func (s *Store) Install(eng engine.StateMachine, seq, epoch uint64, data []byte) bool {
	s.Abandon() // of the state being replaced
	if err := eng.Restore(bytes.NewReader(data)); err != nil {
		s.log.Error("snapshot restore failed", "seq", seq, "err", err)
		return false
	}
	err := s.j.WriteSnapshot(seq, epoch, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err == nil {
		err = s.j.ResetTo(seq)
	}
	if err != nil {
		s.log.Error("snapshot store failed", "seq", seq, "err", err)
	}
	s.c.Installed++
	return true
}
