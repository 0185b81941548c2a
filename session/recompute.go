package session

import (
	"fmt"
	"io"

	"github.com/seqbus/seqbus/engine"
)

// Snapshots reads the snapshots of a journal directory without changing
// anything (journal.DirReader).
type Snapshots interface {
	// SnapshotSeqs returns the seqs of the snapshots kept, newest first.
	SnapshotSeqs() ([]uint64, error)
	// OpenSnapshot opens the state of the snapshot at seq, checked as it
	// is read; the caller closes it.
	OpenSnapshot(seq uint64) (io.ReadCloser, error)
}

// Journal is what a recompute reads, read-only and from any goroutine
// (journal.DirReader).
type Journal interface {
	Snapshots
	// Scan hands fn every record of the journal's valid prefix in seq
	// order from the first, until fn returns false. It returns the damage
	// that ended the prefix, if any (a torn tail is not damage). payload
	// is valid only during fn.
	Scan(fn func(seq uint64, payload []byte) bool) error
}

// Log is the open journal a rebuild reads, on the goroutine that owns it
// (*journal.Journal).
type Log interface {
	First() uint64
	Last() (epoch, seq uint64)
	ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error
	// OpenLatestSnapshot opens the newest snapshot that opens.
	OpenLatestSnapshot() (seq, epoch uint64, r io.ReadCloser, err error)
}

// Factory builds a scratch state machine: never the node's own.
type Factory func() (engine.StateMachine, error)

// OutSeqer is a state machine's optional report of a session's last
// output seq (engine.Engine.SessionOutSeq).
type OutSeqer interface{ SessionOutSeq(session uint64) uint64 }

// Job is a recompute of a request's outputs past the history: nothing of
// the node's mutable state, so it runs on any goroutine.
type Job struct {
	Session uint64
	From    uint64 // first output seq asked
	Upto    uint64 // apply no record above it: min(released, durable) at the start
	Epoch   uint64 // the node's epoch at the start (Finish's caller compares)
	TooOld  Plan   // the history's answer, sent when the journal cannot do better
	// MaxRecords bounds the journal records read (0: MaxRecomputeRecords).
	MaxRecords uint64
}

// Result is what a recompute found, for Replay.Finish.
type Result struct {
	Job Job
	// Outputs are the session's outputs from Job.From on (at most
	// MaxReplayOutputs), in order; their payloads are their own.
	Outputs []Output
	Records uint64 // journal records read
	TooOld  bool   // neither snapshot nor journal reaches back to From
	Err     error  // ErrStopped, or a journal or snapshot that cannot be read
}

// Recompute recomputes job's outputs: it restores a scratch state machine
// from the newest snapshot at or below job.Upto whose state has not yet
// produced output From to the session (or starts from the empty state,
// when the journal begins at seq 1), applies the journal's records after
// it up to job.Upto and collects the session's outputs from From on. It
// reads only records at or below Upto, which the journal has written
// (released never passes durable). stop, when closed (checked every 1024
// records, without blocking), ends the recompute with ErrStopped: a node
// that closes does not wait for a whole recompute. It touches only the
// job, src and the scratch state machine.
func Recompute(job Job, src Journal, newSM Factory, stop <-chan struct{}) *Result {
	r := &Result{Job: job}
	sm, base, err := recomputeBase(job, src, newSM)
	if err != nil {
		r.Err = err
		return r
	}
	if base >= job.Upto {
		return r // nothing released after the base: nothing to send
	}
	maxRecords := job.MaxRecords
	if maxRecords == 0 {
		maxRecords = MaxRecomputeRecords
	}
	c := collector{session: job.Session, from: job.From}
	next := base + 1
	err = src.Scan(func(seq uint64, payload []byte) bool {
		if seq > job.Upto || len(c.out) >= MaxReplayOutputs || r.Records >= maxRecords {
			return false
		}
		r.Records++
		if r.Records%1024 == 0 && stopped(stop) {
			r.Err = ErrStopped
			return false
		}
		if seq < next {
			return true // at or below the base snapshot
		}
		if seq > next {
			r.TooOld = true // the journal no longer holds what follows the base
			return false
		}
		c.applying = seq
		sm.Apply(seq, payload, &c)
		next++
		return true
	})
	if r.Err == nil && err != nil {
		// Damage above what we applied is the live tail being written;
		// below it, an answer we cannot give.
		if next <= job.Upto && len(c.out) < MaxReplayOutputs {
			r.Err = fmt.Errorf("session: replay from the journal: %w", err)
		}
	}
	if r.Err == nil && !r.TooOld && len(c.out) == 0 && next <= job.Upto {
		// The record cap, or a journal ending below the released watermark,
		// before the asked output: beyond what a recompute reaches.
		r.TooOld = true
	}
	r.Outputs = c.out
	return r
}

// stopped reports whether stop is closed, without waiting.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// collector is a recompute's emitter: the session's numbered outputs in
// [from, from+MaxReplayOutputs).
type collector struct {
	session, from uint64
	applying      uint64 // the seq being applied
	out           []Output
}

func (c *collector) Emit(to uint64, payload []byte) {
	if to != c.session || to == engine.MarketData || len(c.out) >= MaxReplayOutputs {
		return
	}
	out, ok := engine.SessionOutSeq(payload)
	if !ok || out < c.from || out >= c.from+MaxReplayOutputs {
		return
	}
	c.out = append(c.out, Output{Seq: c.applying, OutSeq: out, Payload: append([]byte(nil), payload...)})
}

// recomputeBase returns a scratch state machine and the seq it stands at,
// below the asked output: the newest snapshot at or below Upto whose state
// has not yet produced output From to the session, or the empty state
// (seq 0). Recompute checks the journal continues after it.
func recomputeBase(job Job, src Snapshots, newSM Factory) (engine.StateMachine, uint64, error) {
	seqs, err := src.SnapshotSeqs()
	if err != nil {
		return nil, 0, err
	}
	for _, s := range seqs {
		if s > job.Upto {
			continue
		}
		sm, err := newSM()
		if err != nil {
			return nil, 0, err
		}
		q, ok := sm.(OutSeqer)
		if !ok {
			break // cannot tell where the session stood: only the empty state
		}
		sr, err := src.OpenSnapshot(s)
		if err != nil {
			continue // damaged or pruned meanwhile: an older one may do
		}
		err = sm.Restore(sr)
		sr.Close()
		if err != nil {
			continue
		}
		if q.SessionOutSeq(job.Session) < job.From {
			return sm, s, nil
		}
	}
	sm, err := newSM()
	if err != nil {
		return nil, 0, err
	}
	return sm, 0, nil // the journal must then start at seq 1 (Recompute checks)
}

// FillBelowSnapshot recomputes, for a node rebuilding from its disk, the
// outputs of the journal's commands at and below the latest snapshot
// (which the rebuild restores rather than replays) in a scratch state
// machine, applying each command seq with emitter(seq): outputs are
// deterministic, so the history (and the runtime's market-data ring) hold
// what they held before the restart. It starts from the empty state when
// the journal starts at seq 1 (a young journal: all of it, not only what
// follows the older snapshot, so the market-data ring holds the updates a
// primary never released before it restarted, sim seed 625477), else
// from the older kept snapshot when the journal continues right after it
// (the journal keeps that much, journal.Compact), else not at all (those
// outputs are TooOld), and replays at most MaxRebuildRecords commands.
// Call it before the rebuild creates its own state machine.
func FillBelowSnapshot(log Log, snaps Snapshots, newSM Factory, emitter func(seq uint64) engine.Emitter) error {
	snap, _, r, err := log.OpenLatestSnapshot()
	if err != nil {
		return nil // none (or unreadable: the rebuild reports it)
	}
	r.Close()
	_, last := log.Last()
	upto := min(snap, last)
	if upto == 0 || upto < snap {
		return nil
	}
	scratch, base, err := belowSnapshotBase(log.First(), snap, snaps, newSM)
	if err != nil || scratch == nil || upto-base > MaxRebuildRecords {
		return err
	}
	err = log.ReadFrom(base+1, func(_, seq uint64, payload []byte) bool {
		if seq > upto {
			return false
		}
		scratch.Apply(seq, payload, emitter(seq))
		return true
	})
	if err != nil {
		return fmt.Errorf("session: history from the journal: %w", err)
	}
	return nil
}

// belowSnapshotBase is the state FillBelowSnapshot replays from: the
// empty state when the journal (starting at first) starts at seq 1 and
// reaches snap within MaxRebuildRecords, else the newest snapshot below
// snap that the journal continues from, restored in a scratch state
// machine; nil when neither.
func belowSnapshotBase(first, snap uint64, snaps Snapshots, newSM Factory) (engine.StateMachine, uint64, error) {
	if first == 1 && snap <= MaxRebuildRecords {
		// The whole journal, within the bound: every output and update
		// it holds, not only those after the older snapshot.
		sm, err := newSM()
		return sm, 0, err
	}
	seqs, err := snaps.SnapshotSeqs()
	if err != nil {
		return nil, 0, nil
	}
	for _, s := range seqs {
		if s >= snap || first > s+1 {
			continue
		}
		sr, err := snaps.OpenSnapshot(s)
		if err != nil {
			continue // damaged: an older one, or the empty state
		}
		sm, err := newSM()
		if err != nil {
			sr.Close()
			return nil, 0, err
		}
		err = sm.Restore(sr)
		sr.Close()
		if err == nil {
			return sm, s, nil
		}
	}
	return nil, 0, nil // those outputs are TooOld (from seq 1 past the bound: refused anyway)
}
