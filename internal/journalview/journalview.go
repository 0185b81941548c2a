// Package journalview reads a node's journal directory without changing
// it (journal.Inspect and journal.Scan open everything read-only) for
// `seqbus journal`: dump the records with their decoded commands, verify
// the journal and name its first problem, describe its files.
package journalview

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
)

// ErrNoJournal: the directory holds no journal file at all.
var ErrNoJournal = errors.New("no journal")

// PickSet turns a --set value (corrupt-<time>) into the files to read;
// without one, the live journal, or the only set in the directory when
// there is no live one. What it chose, when that is not plain, is said
// on note.
func PickSet(note io.Writer, dir, set string) (journal.InspectOptions, error) {
	sets, err := journal.Sets(journal.OSFS{}, dir)
	if err != nil {
		return journal.InspectOptions{}, err
	}
	if len(sets) == 0 {
		return journal.InspectOptions{}, noJournal(dir)
	}
	if set != "" {
		set = "." + strings.TrimPrefix(set, ".")
		for _, s := range sets {
			if s == set {
				return journal.InspectOptions{Set: set}, nil
			}
		}
		return journal.InspectOptions{}, fmt.Errorf("--set: no files ending in %s in %s (sets: %s)", set, dir, SetNames(sets))
	}
	if len(sets) == 1 && sets[0] != "" {
		fmt.Fprintf(note, "no live journal in %s; reading the set aside as %s\n", dir, sets[0])
		return journal.InspectOptions{Set: sets[0]}, nil
	}
	if len(sets) > 1 {
		fmt.Fprintf(note, "%s also holds journals set aside: %s (use --set)\n", dir, SetNames(sets[1:]))
	}
	return journal.InspectOptions{}, nil
}

// SetNames names journal sets as a user gives them ("live", corrupt-<time>).
func SetNames(sets []string) string {
	var names []string
	for _, s := range sets {
		if s == "" {
			names = append(names, "live")
		} else {
			names = append(names, strings.TrimPrefix(s, "."))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// DumpRecord is one line of `journal dump --format json`.
type DumpRecord struct {
	Seq     uint64             `json:"seq"`
	Epoch   uint64             `json:"epoch"`
	Session uint64             `json:"session"`
	OrderID uint64             `json:"client_order_id"`
	Command engine.CommandView `json:"command"`
	File    string             `json:"file"`
	Offset  int64              `json:"offset"`
	Bytes   int                `json:"payload_bytes"`
}

// Dump writes the records from..to (to 0: to the end) as JSON lines
// (format "json") or text, and stops at the first damage with an error
// naming it (the records before it written).
func Dump(out io.Writer, dir string, opts journal.InspectOptions, from, to uint64, format string) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	var werr error
	err := journal.Scan(journal.OSFS{}, dir, opts, func(r journal.Record) bool {
		if r.Seq < from {
			return true
		}
		if to != 0 && r.Seq > to {
			return false
		}
		v := engine.DescribeCommand(r.Payload)
		if format == "text" {
			_, werr = fmt.Fprintf(w, "seq %d epoch %d %s\n", r.Seq, r.Epoch, v)
		} else {
			werr = enc.Encode(DumpRecord{Seq: r.Seq, Epoch: r.Epoch, Session: v.Session, OrderID: v.ClientOrderID,
				Command: v, File: r.File, Offset: r.Offset, Bytes: len(r.Payload)})
		}
		return werr == nil
	})
	if ferr := w.Flush(); werr == nil {
		werr = ferr
	}
	if werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("stopped at the first damage (records before it printed): %w", err)
	}
	return nil
}

// Verify checks the journal (CRCs, seq continuity, epochs, snapshots,
// the tail) and writes an OK line, or returns the first problem with its
// file and offset; a torn tail passes when allowTorn.
func Verify(out io.Writer, dir string, opts journal.InspectOptions, allowTorn bool) error {
	d, err := journal.Inspect(journal.OSFS{}, dir, opts)
	if err != nil {
		return err
	}
	if p := d.FirstProblem(allowTorn); p != nil {
		more := ""
		if n := len(d.Problems); n > 1 {
			more = fmt.Sprintf(" (and %d more problems; see describe)", n-1)
		}
		return fmt.Errorf("FAIL %s: %s in %s at offset %d (expected seq %d): %s; valid up to seq %d%s",
			filepath.Join(dir, p.File), p.Kind, p.File, p.Offset, p.Seq, p.Reason, d.LastSeq, more)
	}
	if short := historyShort(dir, d); short != "" {
		return fmt.Errorf("FAIL %s: %s", dir, short)
	}
	fmt.Fprintf(out, "OK %s: %d records, seq %d..%d, highest epoch %d, %d segments, %d snapshots (newest valid at %d)\n",
		dir, d.Records, d.FirstSeq, d.LastSeq, d.HighestEpoch, len(d.Segments), len(d.Snapshots), d.LatestSnapshot)
	if d.TornTail != nil {
		fmt.Fprintf(out, "torn tail allowed: %s at offset %d: %s\n", d.TornTail.File, d.TornTail.Offset, d.TornTail.Reason)
	}
	return nil
}

// Describe writes the journal's segments, snapshots, marks and
// problems, as text or (format "json") as journal.Description.
func Describe(out io.Writer, dir string, opts journal.InspectOptions, format string) error {
	d, err := journal.Inspect(journal.OSFS{}, dir, opts)
	if err != nil {
		return err
	}
	if format == "json" {
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(b, '\n'))
		return err
	}
	set := "live"
	if d.Set != "" {
		set = "set aside as " + strings.TrimPrefix(d.Set, ".")
	}
	fmt.Fprintf(out, "journal %s (%s; sets here: %s)\n", dir, set, SetNames(d.Sets))
	fmt.Fprintf(out, "records %d  seq %d..%d  highest epoch %d  durable mark (on open) %d\n",
		d.Records, d.FirstSeq, d.LastSeq, d.HighestEpoch, d.DurableSeq)
	if st, err := readNodeDurable(dir); err == nil {
		fmt.Fprintf(out, "status.json says durable %d\n", st)
	}
	fmt.Fprintf(out, "\n%-40s %12s %12s %8s %11s %12s %12s\n", "segment", "first seq", "last seq", "records", "epochs", "used bytes", "file bytes")
	for _, s := range d.Segments {
		fmt.Fprintf(out, "%-40s %12d %12d %8d %5d..%-5d %12d %12d\n",
			s.Name, s.FirstSeq, s.LastSeq, s.Records, s.FirstEpoch, s.LastEpoch, s.UsedBytes, s.FileBytes)
	}
	if len(d.Snapshots) > 0 {
		fmt.Fprintf(out, "\n%-40s %12s %8s %12s %12s %s\n", "snapshot", "seq", "epoch", "file bytes", "state bytes", "valid")
		for _, s := range d.Snapshots {
			fmt.Fprintf(out, "%-40s %12d %8d %12d %12d %v\n", s.Name, s.Seq, s.Epoch, s.FileBytes, s.RawBytes, s.Valid)
		}
	} else {
		fmt.Fprintln(out, "\nno snapshots")
	}
	for _, t := range d.TempFiles {
		fmt.Fprintf(out, "leftover of a crashed snapshot write: %s\n", t)
	}
	switch {
	case d.EmptyLastSegment && len(d.Segments) == 1:
		fmt.Fprintln(out, "the only segment holds no record")
	case d.EmptyLastSegment:
		fmt.Fprintln(out, "the last segment holds no record (a crash after a roll); Open would remove it")
	}
	if d.TornTail != nil {
		fmt.Fprintf(out, "torn tail: %s at offset %d: %s\n", d.TornTail.File, d.TornTail.Offset, d.TornTail.Reason)
	}
	for _, p := range d.Problems {
		fmt.Fprintf(out, "PROBLEM %s: %s at offset %d (expected seq %d): %s\n", p.Kind, p.File, p.Offset, p.Seq, p.Reason)
	}
	if short := historyShort(dir, d); short != "" {
		fmt.Fprintf(out, "PROBLEM %s\n", short)
	}
	return nil
}

// historyShort says, for the live journal in dir, whether its history
// (the journal's records and its newest valid snapshot) ends below the
// durable seq the node's status.json last reported: records that were
// durable are gone, though every record left is valid (a node starting
// on it refetches: storage.CheckDurableClaim). "" when it does not, or
// when there is no status to compare with.
func historyShort(dir string, d *journal.Description) string {
	if d.Set != "" {
		return "" // a set-aside journal: the status is the live one's
	}
	claimed, err := readNodeDurable(dir)
	have := max(d.LastSeq, d.LatestSnapshot)
	if err != nil || claimed <= have {
		return ""
	}
	return fmt.Sprintf("history ends at seq %d, below the durable seq %d that status.json reported: records that were durable are gone", have, claimed)
}

// readNodeDurable reads the durable mark the node last reported.
func readNodeDurable(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		return 0, err
	}
	var s struct {
		Durable *uint64 `json:"durable"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Durable == nil {
		return 0, errors.New("no durable mark in status.json")
	}
	return *s.Durable, nil
}

// noJournal: read on, an empty directory would pass for an empty journal
// (a mistyped path, or a node that never started).
func noJournal(dir string) error {
	return fmt.Errorf("%w: no segment or snapshot files in %s (is it a node's --dir?)", ErrNoJournal, dir)
}

// RequireJournal reports an error unless dir holds a journal file.
func RequireJournal(dir string) error {
	sets, err := journal.Sets(journal.OSFS{}, dir)
	if err != nil {
		return err
	}
	if len(sets) == 0 {
		return noJournal(dir)
	}
	return nil
}
