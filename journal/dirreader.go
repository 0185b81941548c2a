package journal

import "io"

// DirReader reads a journal directory without changing anything (every
// access goes through ReadOnly), from any goroutine, while the owner of
// the directory's Journal appends to it: its snapshots and the records of
// its live set. Session replay's recompute (package session) reads through
// it: DirReader is its session.Journal.
type DirReader struct {
	FS  FS
	Dir string
}

// SnapshotSeqs lists the seqs of the snapshot files, newest first
// (SnapshotSeqs).
func (d DirReader) SnapshotSeqs() ([]uint64, error) { return SnapshotSeqs(d.FS, d.Dir) }

// OpenSnapshot opens the snapshot at seq for reading (OpenSnapshotReadOnly,
// without its epoch); the caller closes it.
func (d DirReader) OpenSnapshot(seq uint64) (io.ReadCloser, error) {
	_, r, err := OpenSnapshotReadOnly(d.FS, d.Dir, seq)
	return r, err
}

// Scan hands fn the seq and payload of every record of the live set's
// valid prefix, in order, until fn returns false (Scan).
func (d DirReader) Scan(fn func(seq uint64, payload []byte) bool) error {
	return Scan(d.FS, d.Dir, InspectOptions{}, func(r Record) bool { return fn(r.Seq, r.Payload) })
}
