// Package verdict checks that every order a client saw acknowledged is in
// a node's history, when that history is partly compacted: the journal
// holds only the records after the node's snapshots, so an acked order
// older than the journal's first record is looked up in the newest
// snapshot's dedup table instead (its state hash verified on restore).
// The report says which check covered which range, and how strong each
// is: the journal and the dedup table check each order one by one; an
// order older than the table's window is covered only by the session's
// high-water mark (the engine applies a session's ids in increasing order,
// so the mark proves the session got past it, not that this very id was
// applied).
package verdict

import (
	"errors"
	"fmt"
	"slices"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// IDRange is an inclusive range of client order ids and how many acked
// orders it holds (ids in between may be unacked or another check's).
type IDRange struct {
	From, To, Count uint64
}

func (r *IDRange) add(id uint64) {
	if r.Count == 0 || id < r.From {
		r.From = id
	}
	if r.Count == 0 || id > r.To {
		r.To = id
	}
	r.Count++
}

func (r IDRange) String() string {
	if r.Count == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (ids %d..%d)", r.Count, r.From, r.To)
}

// Report is the outcome of Check.
type Report struct {
	Acked uint64
	// The journal's records, seqs JournalFirst..JournalLast (0..0: empty),
	// and the acked orders found in them.
	JournalFirst, JournalLast uint64
	InJournal                 IDRange
	// Older counts the acked orders not in the journal, checked below.
	Older uint64
	// The newest snapshot (SnapshotSeq 0: none): acked orders not in the
	// journal found in its dedup table, and those older than its window,
	// covered by the session's highest applied id, SessionHighest.
	SnapshotSeq     uint64
	InSnapshotTable IDRange
	BelowWindow     IDRange
	SessionHighest  uint64
	// Lost are acked orders neither check found, ascending.
	Lost []uint64
}

// Check reads the journal and newest snapshot in dir and looks up every
// acked client order id of session.
func Check(fs journal.FS, dir string, session uint64, acked map[uint64]bool) (Report, error) {
	rep := Report{Acked: uint64(len(acked))}
	j, _, err := journal.Open(fs, dir, journal.Options{})
	if err != nil {
		return rep, err
	}
	defer j.Close()
	inJournal := map[uint64]bool{}
	if first := j.First(); first != 0 {
		_, rep.JournalLast = j.Last()
		rep.JournalFirst = first
		err = j.ReadFrom(first, func(_, _ uint64, p []byte) bool {
			if h, err := engine.ParseCommand(p); err == nil && h.Session == session && acked[h.ClientOrderID] {
				inJournal[h.ClientOrderID] = true
			}
			return true
		})
		if err != nil {
			return rep, fmt.Errorf("verdict: read journal: %w", err)
		}
	}
	var rest []uint64
	for id := range acked {
		if inJournal[id] {
			rep.InJournal.add(id)
		} else {
			rest = append(rest, id)
		}
	}
	slices.Sort(rest)
	rep.Older = uint64(len(rest))
	if len(rest) == 0 {
		return rep, nil
	}
	if rep.JournalFirst == 1 {
		rep.Lost = rest // the journal is the whole history
		return rep, nil
	}
	eng, err := newestSnapshot(j, &rep)
	if err != nil {
		return rep, err
	}
	// A snapshot that does not reach the journal leaves a hole in the
	// history: what was applied there is in neither.
	if eng == nil || (rep.JournalFirst != 0 && rep.SnapshotSeq+1 < rep.JournalFirst) {
		rep.Lost = rest
		return rep, nil
	}
	for _, id := range rest {
		state, hi := eng.DedupLookup(session, id)
		rep.SessionHighest = hi
		switch state {
		case engine.DedupApplied:
			rep.InSnapshotTable.add(id)
		case engine.DedupBelowWindow:
			rep.BelowWindow.add(id)
		default:
			rep.Lost = append(rep.Lost, id)
		}
	}
	return rep, nil
}

// newestSnapshot restores the newest valid snapshot (nil when there is
// none).
func newestSnapshot(j *journal.Journal, rep *Report) (*engine.Engine, error) {
	seq, _, r, err := j.OpenLatestSnapshot()
	if errors.Is(err, journal.ErrNoSnapshot) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verdict: open snapshot: %w", err)
	}
	defer r.Close()
	eng, err := engine.LoadSnapshot(r)
	if err != nil {
		return nil, fmt.Errorf("verdict: snapshot %d: %w", seq, err)
	}
	rep.SnapshotSeq = seq
	return eng, nil
}

// Lines describes the report, one check per line, for a summary.
func (r *Report) Lines(node string) []string {
	lines := []string{}
	if r.JournalFirst == 0 {
		lines = append(lines, fmt.Sprintf("%s's journal is empty", node))
	} else {
		lines = append(lines, fmt.Sprintf("%s's journal, seqs %d..%d, checked one by one: %s", node, r.JournalFirst, r.JournalLast, r.InJournal))
	}
	switch {
	case r.Older == 0:
		lines = append(lines, "no acked order is older than the journal")
	case r.SnapshotSeq != 0:
		lines = append(lines, fmt.Sprintf("older orders, against %s's snapshot at seq %d (state hash verified): %s in its dedup table, checked one by one; %s older than the table's window, covered by the session's highest applied id %d only",
			node, r.SnapshotSeq, r.InSnapshotTable, r.BelowWindow, r.SessionHighest))
	case r.JournalFirst == 1:
		lines = append(lines, fmt.Sprintf("%d acked orders are not in the journal, which holds the whole history", r.Older))
	default:
		lines = append(lines, fmt.Sprintf("%d acked orders are older than the journal, and no snapshot of %s covers them", r.Older, node))
	}
	return lines
}
