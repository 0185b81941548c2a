// Package storage is a node's history on disk and the state machine
// rebuilt from it, at run time: the journal opened and recovered (a
// corrupt one set aside, a torn tail cut), the state machine rebuilt from
// the newest snapshot and the records after it, the history cut back to a
// fork and rebuilt, and the refetch state, kept on disk, that stops a node
// whose history is partial from leading until it has caught up.
//
// It follows etcd's rule for a damaged log: never serve from it, never
// skip a bad record. A history that cannot be rebuilt at a fork is
// discarded whole and fetched again, never run half-built.
//
// A Storage is owned by one goroutine at a time (the node's agent, or
// whoever holds the node's lock). It sends nothing and reads no clock but
// the wall clock's seconds that name a journal set aside. What it does is
// counted (Counters) and its failures logged.
package storage

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/dirlock"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/snapshot"
)

// Config is where the history lives, how its state machine is built and
// who is told what a rebuild replays.
type Config struct {
	FS      journal.FS
	Dir     string
	Journal journal.Options
	// SetAsideCorrupt: a corrupt journal is set aside and the state
	// refetched from a primary (a node that can follow one). Without it
	// a corrupt journal is an error (a static primary has no one to
	// fetch from).
	SetAsideCorrupt bool
	// NewStateMachine builds the state machine every rebuild starts from.
	NewStateMachine func() (engine.StateMachine, error)
	// Snapshots configures the snapshot store over the journal (its
	// Journal is set by Open).
	Snapshots snapshot.Config
	Log       *slog.Logger // nil: slog.Default()
	Hooks     Hooks
}

// Hooks are the owner's, each optional, called on the owner's goroutine
// during a rebuild, in the order listed.
type Hooks struct {
	// Refill runs first: the outputs of the commands at and below the
	// newest snapshot (the session history, the market-data ring), before
	// the state machine is built.
	Refill func(j *journal.Journal) error
	// Rebuilt: a fresh state machine was restored from the snapshot at
	// fromSnapshot (0: none); Batch, then Applied for every record
	// replayed after it follow.
	Rebuilt func(fromSnapshot uint64)
	Batch   func()
	// Emitter is what a replayed command at seq emits into (nil or a nil
	// result: its outputs are discarded).
	Emitter func(seq uint64) engine.Emitter
	Applied func(epoch, seq uint64, payload []byte)
}

// Counters are what a Storage counted, for the node's status.
type Counters struct {
	// JournalsSetAside: corrupt journals set aside at start-up.
	// TornTailBytes: bytes of torn tail cut at start-up.
	// HistoryDiscarded: histories discarded at a fork because the
	// journal no longer reached back to a snapshot at or below it.
	// HistoriesShort: start-ups whose history ended below the durable
	// seq the directory's last run reported (CheckDurableClaim).
	JournalsSetAside, TornTailBytes, HistoryDiscarded, HistoriesShort uint64
	// SpareSegmentFailures: episodes in which the journal could not
	// prepare its next segment ahead (WatchSpare).
	SpareSegmentFailures uint64
	// Broken: the journal failed (Break) for the rest of the process's
	// life: nothing more becomes durable, released or acknowledged, and
	// the node never asks to lead; it needs a restart.
	Broken bool
}

// Storage is a node's journal, snapshots and the state machine rebuilt
// from them.
type Storage struct {
	cfg   Config
	log   *slog.Logger
	lock  *dirlock.Lock // the journal directory's (nil on a simulated FS)
	j     *journal.Journal
	snaps *snapshot.Store
	eng   engine.StateMachine
	// snapSeq and snapEpoch are the seq and epoch label of the snapshot
	// the state started from: the last rebuild's, or one installed since.
	snapSeq, snapEpoch uint64
	// refetching: the history was discarded (or set aside) and is being
	// fetched again; broken: this process no longer trusts its disk with
	// the history (a write failed, or the refetch state could not be
	// recorded).
	refetching, broken bool
	// newDir: the directory was empty when this node first opened it,
	// and the node has neither led nor caught up since
	// (journal.NewDirMarker; NewDirectory).
	newDir bool
	// history: the directory's history id (journal.HistoryFile; 0:
	// none yet).
	history uint64
	// fence: the highest epoch recorded as led or followed
	// (journal.FenceFile; RaiseFence).
	fence uint64
	c     Counters
	// spareErr and spareRoom: what WatchSpare last heard of the journal's
	// next segment (journal.SpareError).
	spareErr  error
	spareRoom int64
}

// Open opens and recovers the journal in cfg.Dir and the snapshot store
// over it; Rebuild then builds the state machine. A corrupt journal is
// set aside (with cfg.SetAsideCorrupt) and the state marked to refetch; a
// refetch an earlier run had not finished is picked up from its marker; a
// torn tail is cut and counted. On the real filesystem it first locks
// cfg.Dir (journal.LockFileName): another Open of the directory, in this
// process or another, fails until Close.
func Open(cfg Config) (*Storage, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Storage{cfg: cfg, log: cfg.Log}
	var err error
	if s.lock, err = lockDir(cfg.FS, cfg.Dir); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		s.lock.Release()
		return nil, err
	}
	return s, nil
}

// lockDir takes the journal directory's lock (journal.LockFileName) on
// the real filesystem: two nodes on one directory would append to the
// same segments. A simulated FS (journal.MemFS) is one process's alone.
func lockDir(fsys journal.FS, dir string) (*dirlock.Lock, error) {
	if _, ok := fsys.(journal.OSFS); !ok {
		return nil, nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal directory %s: %w", dir, err)
	}
	l, err := dirlock.Acquire(dir, journal.LockFileName)
	if err != nil {
		return nil, fmt.Errorf("another node uses %s: %w", dir, err)
	}
	return l, nil
}

// Close closes the journal and then releases the directory's lock.
func (s *Storage) Close() error {
	err := s.j.Close()
	if lerr := s.lock.Release(); err == nil {
		err = lerr
	}
	return err
}

// open is Open's work once the directory is locked.
func (s *Storage) open() error {
	cfg := s.cfg
	if err := s.noteNewDirectory(); err != nil {
		return err
	}
	var err error
	if s.history, err = journal.ReadHistoryID(cfg.FS, cfg.Dir); err != nil {
		return fmt.Errorf("journal directory %s: %w (it names the history the records belong to; a node cannot tell whose they are without it)", cfg.Dir, err)
	}
	if s.fence, err = journal.ReadFence(cfg.FS, cfg.Dir); err != nil {
		return fmt.Errorf("journal directory %s: %w (it holds the highest epoch the node led or followed; without it the node could follow an older one)", cfg.Dir, err)
	}
	j, rec, err := journal.Open(cfg.FS, cfg.Dir, cfg.Journal)
	if errors.Is(err, journal.ErrCorrupt) && cfg.SetAsideCorrupt {
		aside, merr := journal.SetAside(cfg.FS, cfg.Dir, time.Now().Unix())
		if merr != nil {
			return fmt.Errorf("journal %s is corrupt (%v) and could not be set aside: %w", cfg.Dir, err, merr)
		}
		s.log.Error("JOURNAL CORRUPT: set aside; refetching the state from the primary; this node will not lead until it has caught up",
			"dir", cfg.Dir, "err", err, "files_set_aside", aside)
		s.c.JournalsSetAside++
		s.SetRefetching(true)
		j, rec, err = journal.Open(cfg.FS, cfg.Dir, cfg.Journal)
	}
	if err != nil {
		return fmt.Errorf("open journal %s: %w", cfg.Dir, err)
	}
	s.j = j
	sc := cfg.Snapshots
	sc.Journal = j
	s.snaps = snapshot.New(sc)
	if !s.refetching && journal.HasRefetchMarker(cfg.FS, cfg.Dir) {
		s.refetching = true
		s.log.Warn("this node had discarded its history and not caught up before it stopped: refetching; it will not lead until caught up")
	}
	if rec.BytesCut > 0 {
		s.c.TornTailBytes += uint64(rec.BytesCut)
		s.log.Warn("journal: torn tail truncated", "bytes", rec.BytesCut, "file", rec.CutFile, "offset", rec.CutOffset, "records", rec.RecordsKept)
	}
	return nil
}

// Journal is the journal; it stays the same object for the Storage's
// life (a reset cuts it in place).
func (s *Storage) Journal() *journal.Journal { return s.j }

// Snapshots is the snapshot store over the journal.
func (s *Storage) Snapshots() *snapshot.Store { return s.snaps }

// Engine is the state machine the last Rebuild built (nil before one).
func (s *Storage) Engine() engine.StateMachine { return s.eng }

// Counters returns what the Storage counted.
func (s *Storage) Counters() Counters {
	c := s.c
	c.Broken = s.broken
	return c
}

// WatchSpare warns, once an episode, when the journal cannot prepare
// its next segment ahead (journal.SpareError): the roll at the end of the
// current one then creates it itself, and on a full disk that roll fails
// the journal (a primary then gives its lease up). The warning comes a
// segment of records early: time to free space before anything stops. A
// warning, not an error: nothing has failed yet (seqbus chaos counts a
// journal's ERROR lines as its failures). The runtime calls it at every
// tick; Spare reports the last word.
func (s *Storage) WatchSpare(nowNs int64) {
	room, err := s.j.SpareError(nowNs)
	switch was := s.spareErr; {
	case err != nil && was == nil:
		s.c.SpareSegmentFailures++
		s.log.Warn("JOURNAL CANNOT PREPARE ITS NEXT SEGMENT: free disk space; the journal fails when its current segment fills (a primary then gives its lease up)",
			"room_bytes", room, "err", err)
	case err == nil && was != nil:
		s.log.Info("journal's next segment prepared again", "room_bytes", room)
	}
	s.spareErr, s.spareRoom = err, room
}

// Spare is what WatchSpare last heard: the bytes of records the current
// segment still takes, and why the next segment could not be prepared
// (nil while it can).
func (s *Storage) Spare() (roomBytes int64, err error) { return s.spareRoom, s.spareErr }

// HighestEpoch is the highest epoch the history holds: its newest
// snapshot's or its journal's (a fence must refuse anything older).
func (s *Storage) HighestEpoch() uint64 { return max(s.snapEpoch, s.j.HighestEpoch(), s.fence) }

// RaiseFence records, durably, that the node leads or follows epoch,
// before it releases or acknowledges anything under it (journal.FenceFile):
// a crash before its first record of epoch would otherwise bring it back
// fenced at an older epoch, free to follow a deposed primary's and cut
// what it released under this one. A no-op at or below the recorded
// fence. An error breaks the Storage: the node must not lead or follow
// on a fence it could forget.
func (s *Storage) RaiseFence(epoch uint64) error {
	if epoch <= s.fence {
		return nil
	}
	if err := journal.WriteFence(s.cfg.FS, s.cfg.Dir, epoch); err != nil {
		s.broken = true
		s.log.Error("cannot record the epoch fence; this node will not lead", "epoch", epoch, "err", err)
		return fmt.Errorf("recording the epoch fence %d: %w", epoch, err)
	}
	s.fence = epoch
	return nil
}

// EpochAt is the epoch of the record at seq (replica.Log): the journal's,
// or, at the seq of the snapshot the state started from when the journal
// no longer holds that record (it was compacted behind the snapshot, or
// the snapshot was fetched), the snapshot's label. A label is the epoch
// of a primary whose history holds the record (the record's own, a
// primary's own term, or a fetched snapshot's previous epoch), which is
// what reconciliation and a promotion's fork point ask: without it a node
// restarted from a fetched snapshot could not show that it shares its
// history with the next primary and discarded it.
func (s *Storage) EpochAt(seq uint64) (uint64, bool) {
	if e, ok := s.j.EpochAt(seq); ok {
		return e, true
	}
	if seq != 0 && seq == s.snapSeq && s.snapEpoch != 0 {
		return s.snapEpoch, true
	}
	return 0, false
}

// Installed notes a snapshot fetched and installed at seq, labelled
// epoch: the state starts from it now (EpochAt).
func (s *Storage) Installed(seq, epoch uint64) { s.snapSeq, s.snapEpoch = seq, epoch }

// CheckDurableClaim compares the rebuilt history with claimed, the
// durable seq the directory's last run reported (its status file; 0:
// none known), after Rebuild. A history that ends below it lost records
// that were durable: a journal cut at a record boundary or emptied, a
// backup restored, a disk that dropped writes. Such a history is a valid
// prefix, so it is kept, but a node that could lead from it would
// un-happen what it had acknowledged and make the standbys discard their
// copies at the fork. With SetAsideCorrupt the state is marked to
// refetch (the node follows, catches up and only then may lead); without
// it (a static primary) it is an error naming the way out.
func (s *Storage) CheckDurableClaim(claimed uint64, source string) error {
	have := s.eng.AppliedSeq()
	if claimed <= have {
		return nil
	}
	if !s.cfg.SetAsideCorrupt {
		return fmt.Errorf("history in %s ends at seq %d, below the durable seq %d that %s reported: records that were durable are gone (restore them, or move %s away to lead from what is left)",
			s.cfg.Dir, have, claimed, source, source)
	}
	s.c.HistoriesShort++
	s.log.Error("HISTORY SHORT: the journal ends below the durable seq its last run reported; records are gone. Refetching from the primary; this node will not lead until it has caught up",
		"dir", s.cfg.Dir, "ends_at", have, "reported_durable", claimed, "reported_by", source)
	if !s.refetching {
		s.SetRefetching(true)
	}
	return nil
}

// noteNewDirectory reads whether the directory is new (NewDirectory): a
// directory with the joined marker is not, one with the new-directory
// marker is, one with history but neither marker (from before the
// markers) is not, and an empty one is, durably marked so before anything
// is written to it: a crash before the node joins leaves it new.
func (s *Storage) noteNewDirectory() error {
	fsys, dir := s.cfg.FS, s.cfg.Dir
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("journal directory %s: %w", dir, err)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("journal directory %s: %w", dir, err)
	}
	switch {
	case slices.Contains(names, journal.JoinedMarker):
	case slices.Contains(names, journal.NewDirMarker):
		s.newDir = true
	case journal.HoldsHistory(names):
	default:
		if err := journal.SetMarker(fsys, dir, journal.NewDirMarker, true); err != nil {
			return fmt.Errorf("journal directory %s: marking it new: %w", dir, err)
		}
		s.newDir = true
	}
	if s.newDir {
		s.log.Info("new directory: acknowledging nothing until caught up with a primary; leads only a term no other node can hold a history for", "dir", dir)
	}
	return nil
}

// NewDirectory reports whether the directory was empty when this node
// first opened it and the node has neither led nor caught up with a
// primary since: nothing in it is anything a client saw, and nobody
// relies on it. Such a node may lead only a term no other node can hold
// a history for (replica.MayLeadTerm): an arbiter granting it another
// means its directory was replaced or wiped while it was in the in-sync
// set, and leading would start the history over (the node declines the
// lease). It acknowledges nothing until it has joined, so it never
// enters the in-sync set new.
func (s *Storage) NewDirectory() bool { return s.newDir }

// Joined records, durably, that the node led or caught up with a
// primary: the directory is no longer new. It writes the joined marker,
// then removes the new-directory marker (a crash between leaves both:
// joined). An error breaks the Storage: the node cannot say what its
// directory holds.
func (s *Storage) Joined() error {
	if !s.newDir {
		return nil
	}
	err := journal.SetMarker(s.cfg.FS, s.cfg.Dir, journal.JoinedMarker, true)
	if err == nil {
		err = journal.SetMarker(s.cfg.FS, s.cfg.Dir, journal.NewDirMarker, false)
	}
	if err != nil {
		s.broken = true
		s.log.Error("cannot record that the directory joined the history; this node will not lead", "err", err)
		return fmt.Errorf("recording that the directory joined the history: %w", err)
	}
	s.newDir = false
	s.log.Info("directory joined the history: acknowledging", "applied", s.eng.AppliedSeq())
	return nil
}

// History is the id of the history the directory's records belong to
// (journal.HistoryFile), 0 when it has none yet: new, or from before
// history ids.
func (s *Storage) History() uint64 { return s.history }

// SetHistory records id as the directory's history id, durably. An
// error breaks the Storage: the node cannot say whose history its
// records are.
func (s *Storage) SetHistory(id uint64) error {
	if id == s.history {
		return nil
	}
	if err := journal.WriteHistoryID(s.cfg.FS, s.cfg.Dir, id); err != nil {
		s.broken = true
		s.log.Error("cannot record the history id; this node will not lead", "err", err)
		return fmt.Errorf("recording the history id: %w", err)
	}
	s.history = id
	return nil
}

// MakeHistory gives a directory with no history id one and returns it
// (the one it has, if any): 64 random bits (crypto/rand), or seed when it
// is not 0 (a simulated run, which must replay), recorded as SetHistory
// does. A node makes one as it first leads (replica.Identity).
func (s *Storage) MakeHistory(seed uint64) (uint64, error) {
	if s.history != 0 {
		return s.history, nil
	}
	id := seed
	for id == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:]) // never fails (Go 1.24+)
		id = binary.LittleEndian.Uint64(b[:])
	}
	if err := s.SetHistory(id); err != nil {
		return 0, err
	}
	s.log.Info("new history: this directory's records are its first", "history", fmt.Sprintf("%016x", id))
	return id, nil
}

// Refetching reports whether the history is being fetched again: the
// node must not lead until it has caught up with a live primary.
func (s *Storage) Refetching() bool { return s.refetching }

// SetRefetching sets or clears the refetch state, durably (the journal
// directory's marker, journal.RefetchMarker). Without the marker a crash
// could let the node lead with a partial history, so a failure to write
// it breaks the Storage.
func (s *Storage) SetRefetching(on bool) {
	s.refetching = on
	if err := journal.SetRefetchMarker(s.cfg.FS, s.cfg.Dir, on); err != nil {
		s.broken = true
		s.log.Error("cannot record the refetch state; this node will not lead", "err", err)
	}
}

// Broken reports whether this process no longer trusts its disk with
// the history: the node must never lead again in this process.
func (s *Storage) Broken() bool { return s.broken }

// Break records a write of the history that failed (an append, a flush);
// it reports whether this is the first, so the owner logs it once.
func (s *Storage) Break() (first bool) {
	first = !s.broken
	s.broken = true
	return first
}

// Rebuild builds a fresh state machine from the newest snapshot and the
// journal records after it, telling the hooks what it replays.
func (s *Storage) Rebuild() error {
	h := &s.cfg.Hooks
	// The history below the snapshot first: its scratch state machine must
	// not be the last one built (the simulator tracks the latest).
	if h.Refill != nil {
		if err := h.Refill(s.j); err != nil {
			return err
		}
	}
	eng, err := s.cfg.NewStateMachine()
	if err != nil {
		return err
	}
	s.eng = eng
	snapSeq, epoch, err := s.snaps.Restore(eng)
	if err != nil {
		return err
	}
	s.snapSeq, s.snapEpoch = snapSeq, epoch
	if h.Rebuilt != nil {
		h.Rebuilt(snapSeq)
	}
	j := s.j
	if _, last := j.Last(); last <= snapSeq {
		return nil
	}
	if j.First() > snapSeq+1 {
		return fmt.Errorf("journal starts at %d, after the snapshot at %d: the snapshot that covered the seqs before it is missing or corrupt, "+
			"so this directory cannot rebuild the state; a standby restarted on an empty directory (move this one aside, keep it) refetches from the primary", j.First(), snapSeq)
	}
	if h.Batch != nil {
		h.Batch()
	}
	err = j.ReadFrom(snapSeq+1, func(epoch, seq uint64, payload []byte) bool {
		var out engine.Emitter
		if h.Emitter != nil {
			out = h.Emitter(seq)
		}
		eng.Apply(seq, payload, out)
		if h.Applied != nil {
			h.Applied(epoch, seq, payload)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("replay journal: %w", err)
	}
	return nil
}

// ResetTo cuts the history after seq (0: all of it), drops the snapshots
// past it and rebuilds the state machine from what is left. When the
// journal no longer reaches back to the newest snapshot left at or below
// seq (it was compacted behind a snapshot just dropped), nothing short of
// the whole history can be rebuilt: it is discarded and marked to
// refetch (sim bug D). A rebuild that fails discards it too: never run
// on a half-built state.
func (s *Storage) ResetTo(seq uint64) error {
	s.snaps.Abandon() // it may hold state past seq
	if err := s.j.DropSnapshotsAbove(seq); err != nil {
		return err
	}
	s.snaps.Drop() // it may hold a snapshot just dropped
	base, _ := s.snaps.Latest()
	// The first record held; a journal that holds none (reset to a
	// snapshot, and a crash took the records after it) continues after
	// its last, and reaches back to nothing.
	first := s.j.First()
	if _, last := s.j.Last(); first == 0 {
		first = last + 1
	}
	var err error
	if seq == 0 || seq < first || first > base+1 {
		s.SetRefetching(true) // before the history goes: a crash must not forget
		if seq != 0 {
			s.log.Warn("cannot rebuild at the fork from a snapshot and the journal: discarding the history, refetching", "fork_seq", seq, "snapshot", base, "journal_first", first)
			s.c.HistoryDiscarded++
		}
		err = s.j.ResetTo(0)
	} else {
		err = s.j.TruncateAfter(seq)
	}
	if err != nil {
		return err
	}
	s.snaps.Drop()
	if err := s.Rebuild(); err != nil {
		s.log.Error("rebuild after truncation failed: discarding the history, refetching", "err", err)
		s.SetRefetching(true)
		if rerr := s.j.ResetTo(0); rerr != nil {
			return rerr
		}
		return s.Rebuild()
	}
	return nil
}
