package verdict

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// history writes a journal of one order per id of session 7 (seq = order
// of application), skipping the ids in skip, with a snapshot at snapAt,
// and compacts it; it returns the journal's first seq.
func history(t *testing.T, fs journal.FS, dir string, last, snapAt uint64, skip ...uint64) uint64 {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.DedupWindow = 256
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.Open(fs, dir, journal.Options{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	seq := uint64(0)
	for id := uint64(1); id <= last; id++ {
		if slices.Contains(skip, id) {
			continue
		}
		seq++
		cmd := engine.AppendRequest(nil, 7, id, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: int64(1 + id%50), Qty: 1})
		if err := j.Append(1, seq, cmd, 0); err != nil {
			t.Fatal(err)
		}
		eng.Apply(seq, cmd, nil)
		if seq == snapAt {
			var buf bytes.Buffer
			if err := eng.Snapshot(&buf); err != nil {
				t.Fatal(err)
			}
			if err := j.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := j.WriteSnapshot(seq, 1, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Compact(); err != nil {
		t.Fatal(err)
	}
	return j.First()
}

func ids(from, to uint64, except ...uint64) map[uint64]bool {
	m := map[uint64]bool{}
	for id := from; id <= to; id++ {
		if !slices.Contains(except, id) {
			m[id] = true
		}
	}
	return m
}

// TestCompactedHistoryIsNotLost (issue 15 item 11): acked orders below the
// journal's first record are checked against the snapshot's dedup table
// and reported as covered by it, not lost.
func TestCompactedHistoryIsNotLost(t *testing.T) {
	fs := journal.NewMemFS()
	first := history(t, fs, "/n1", 2000, 1500)
	if first <= 1300 || first > 1501 {
		t.Fatalf("journal compacted to first seq %d; the test needs it in 1301..1501", first)
	}
	rep, err := Check(fs, "/n1", 7, ids(1, 2000))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range rep.Lines("node1") {
		t.Log(l)
	}
	if len(rep.Lost) != 0 {
		t.Fatalf("%d lost (first %d) in a history that holds every order", len(rep.Lost), rep.Lost[0])
	}
	if rep.SnapshotSeq != 1500 || rep.JournalFirst != first ||
		rep.InJournal.From != first || rep.InJournal.To != 2000 ||
		rep.InSnapshotTable != (IDRange{From: 1245, To: first - 1, Count: first - 1245}) ||
		rep.BelowWindow != (IDRange{From: 1, To: 1244, Count: 1244}) || rep.SessionHighest != 1500 {
		t.Fatalf("report %+v", rep)
	}
	if lines := strings.Join(rep.Lines("node1"), "\n"); !strings.Contains(lines, "snapshot at seq 1500") || !strings.Contains(lines, "ids 1245..") {
		t.Fatalf("lines do not say which check covered which range:\n%s", lines)
	}
}

// TestMissingOrdersAreStillLost: an acked order in the dedup table's
// window but never applied, and one never applied at all, are lost.
func TestMissingOrdersAreStillLost(t *testing.T) {
	fs := journal.NewMemFS()
	// id 1300 never applied (seqs shift by one after it).
	first := history(t, fs, "/n1", 2001, 1500, 1300)
	if first <= 1300 {
		t.Fatalf("journal first %d", first)
	}
	acked := ids(1, 2001)
	acked[2500] = true // acked, never applied anywhere
	rep, err := Check(fs, "/n1", 7, acked)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Lost, []uint64{1300, 2500}) {
		t.Fatalf("lost %v, want [1300 2500]; report %+v", rep.Lost, rep)
	}
	// Without the snapshot nothing below the journal is covered.
	fs2 := journal.NewMemFS()
	history(t, fs2, "/n2", 2000, 0)
	rep, err = Check(fs2, "/n2", 7, ids(1, 2000))
	if err != nil {
		t.Fatal(err)
	}
	if rep.JournalFirst != 1 || len(rep.Lost) != 0 || rep.Older != 0 {
		t.Fatalf("an uncompacted journal: %+v", rep)
	}
	if lines := rep.Lines("node2"); len(lines) != 2 || !strings.Contains(lines[1], "no acked order is older") {
		t.Fatalf("lines %q", lines)
	}
}
