package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pierrec/lz4/v4"
)

// Snapshot file layout, little endian:
//
//	header  (32 B): magic "SQBSNAP\x01" | seq u64 | epoch u64 | reserved u32 | CRC32C of bytes 0..28
//	body          : one lz4 frame holding the engine's snapshot bytes
//	trailer (32 B): body length u64 | raw length u64 | CRC32C of raw bytes u32 |
//	                CRC32C of every byte of the file before this field u32 | magic "SQBSEND\x01"
//
// The file CRC is checked when the snapshot is opened, before any byte is
// handed out; the raw CRC and length are checked when the reader hits EOF.
const (
	snapshotHeaderBytes  = 32
	snapshotTrailerBytes = 32
	// SnapshotsKept is how many snapshots WriteSnapshot leaves on disk: the
	// newest, and one to fall back to should the newest be damaged.
	SnapshotsKept = 2
)

var (
	snapshotMagic    = [8]byte{'S', 'Q', 'B', 'S', 'N', 'A', 'P', 1}
	snapshotEndMagic = [8]byte{'S', 'Q', 'B', 'S', 'E', 'N', 'D', 1}
)

func snapshotName(seq uint64) string { return fmt.Sprintf("%020d.snap", seq) }

func parseSnapshotName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".snap")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}

// crcWriter forwards writes and keeps a running CRC32C and byte count.
type crcWriter struct {
	w     io.Writer
	crc   uint32
	bytes uint64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	c.bytes += uint64(n)
	return n, err
}

// WriteSnapshot stores the state at seq (taken under epoch): write receives
// a writer that lz4-compresses into a temporary file; the file is fsynced,
// renamed into place and the directory fsynced, so a crash leaves either
// the old set of snapshots or the new one. Then all but the newest
// SnapshotsKept snapshots are removed. It touches no journal state, so it
// may run on a goroutine other than the owner's; run one at a time.
func (j *Journal) WriteSnapshot(seq, epoch uint64, write func(w io.Writer) error) (err error) {
	final := j.path(snapshotName(seq))
	tmp := final + ".tmp"
	f, err := j.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = j.fs.Remove(tmp)
		}
	}()
	buffered := bufio.NewWriterSize(f, 256<<10)
	file := &crcWriter{w: buffered}
	var hdr [snapshotHeaderBytes]byte
	copy(hdr[0:8], snapshotMagic[:])
	binary.LittleEndian.PutUint64(hdr[8:16], seq)
	binary.LittleEndian.PutUint64(hdr[16:24], epoch)
	binary.LittleEndian.PutUint32(hdr[28:32], crc32.Checksum(hdr[0:28], castagnoli))
	if _, err = file.Write(hdr[:]); err != nil {
		return err
	}
	body := &crcWriter{w: file}
	compressor := lz4.NewWriter(body)
	raw := &crcWriter{w: compressor}
	if err = write(raw); err != nil {
		return err
	}
	if err = compressor.Close(); err != nil {
		return err
	}
	var trailer [snapshotTrailerBytes]byte
	binary.LittleEndian.PutUint64(trailer[0:8], body.bytes)
	binary.LittleEndian.PutUint64(trailer[8:16], raw.bytes)
	binary.LittleEndian.PutUint32(trailer[16:20], raw.crc)
	if _, err = file.Write(trailer[0:20]); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(trailer[20:24], file.crc)
	copy(trailer[24:32], snapshotEndMagic[:])
	if _, err = buffered.Write(trailer[20:32]); err != nil {
		return err
	}
	if err = buffered.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = j.fs.Rename(tmp, final); err != nil {
		return err
	}
	if err = j.fs.SyncDir(j.dir); err != nil {
		return err
	}
	return j.pruneSnapshots()
}

// pruneSnapshots removes all but the newest SnapshotsKept snapshots and any
// temporary file a crashed WriteSnapshot left.
func (j *Journal) pruneSnapshots() error {
	names, err := j.fs.ReadDir(j.dir)
	if err != nil {
		return err
	}
	seqs := snapshotSeqs(names)
	removed := false
	for i := SnapshotsKept; i < len(seqs); i++ {
		if err := j.fs.Remove(j.path(snapshotName(seqs[i]))); err != nil {
			return err
		}
		removed = true
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".snap.tmp") {
			if err := j.fs.Remove(j.path(name)); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return j.fs.SyncDir(j.dir)
	}
	return nil
}

// snapshotSeqs returns the seqs of the snapshot files in names, newest first.
func snapshotSeqs(names []string) []uint64 {
	var seqs []uint64
	for _, name := range names {
		if seq, ok := parseSnapshotName(name); ok {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] > seqs[b] })
	return seqs
}

// OpenLatestSnapshot opens the newest snapshot whose checksum verifies and
// returns its seq, its epoch and a reader of the decompressed state; the
// caller must Close it. A damaged newest snapshot is passed over for the
// previous one; if every snapshot is damaged the error is ErrCorrupt, and
// with none at all ErrNoSnapshot. The reader returns ErrCorrupt instead of
// io.EOF if the decompressed bytes do not match their recorded length and
// CRC. Safe from any goroutine.
func (j *Journal) OpenLatestSnapshot() (seq, epoch uint64, r io.ReadCloser, err error) {
	seq, epoch, r, _, err = j.OpenLatestSnapshotSkipping()
	return seq, epoch, r, err
}

// OpenLatestSnapshotSkipping is OpenLatestSnapshot that also returns
// the newer snapshots it skipped because they did not verify, each as
// the error that names its file (newest first); when none verifies, err
// is the newest one's and skipped holds them all.
func (j *Journal) OpenLatestSnapshotSkipping() (seq, epoch uint64, r io.ReadCloser, skipped []error, err error) {
	names, err := j.fs.ReadDir(j.dir)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	seqs := snapshotSeqs(names)
	if len(seqs) == 0 {
		return 0, 0, nil, nil, ErrNoSnapshot
	}
	for _, s := range seqs {
		sr, err := j.openSnapshot(snapshotName(s))
		if err == nil {
			return sr.seq, sr.epoch, sr, skipped, nil
		}
		skipped = append(skipped, err)
	}
	return 0, 0, nil, skipped, skipped[0]
}

// SnapshotReader reads a verified snapshot's decompressed state.
type SnapshotReader struct {
	file       File
	name       string
	seq, epoch uint64
	rawBytes   uint64
	rawCRC     uint32
	lz         *lz4.Reader
	got        crcWriter
	done       bool
}

var _ io.ReadCloser = (*SnapshotReader)(nil)

func (j *Journal) openSnapshot(name string) (sr *SnapshotReader, err error) {
	f, err := j.fs.OpenFile(j.path(name), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()
	corrupt := func(off int64, reason string) error {
		return &CorruptError{File: name, Offset: off, Reason: reason}
	}
	sizeBytes, err := f.Size()
	if err != nil {
		return nil, err
	}
	if sizeBytes < snapshotHeaderBytes+snapshotTrailerBytes {
		return nil, corrupt(0, "file too short")
	}
	var hdr [snapshotHeaderBytes]byte
	var trailer [snapshotTrailerBytes]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, err
	}
	trailerOff := sizeBytes - snapshotTrailerBytes
	if _, err := f.ReadAt(trailer[:], trailerOff); err != nil {
		return nil, err
	}
	switch {
	case [8]byte(hdr[0:8]) != snapshotMagic || binary.LittleEndian.Uint32(hdr[28:32]) != crc32.Checksum(hdr[0:28], castagnoli):
		return nil, corrupt(0, "bad header")
	case [8]byte(trailer[24:32]) != snapshotEndMagic:
		return nil, corrupt(trailerOff, "bad trailer")
	case binary.LittleEndian.Uint64(trailer[0:8]) != uint64(trailerOff-snapshotHeaderBytes):
		return nil, corrupt(trailerOff, "body length does not match the file")
	}
	// One streaming pass over the file before handing out a single byte.
	crc := uint32(0)
	buf := make([]byte, 256<<10)
	for off, end := int64(0), trailerOff+20; off < end; {
		n := int(min(int64(len(buf)), end-off))
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return nil, err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += int64(n)
	}
	if crc != binary.LittleEndian.Uint32(trailer[20:24]) {
		return nil, corrupt(0, "file checksum mismatch")
	}
	sr = &SnapshotReader{
		file:     f,
		name:     name,
		seq:      binary.LittleEndian.Uint64(hdr[8:16]),
		epoch:    binary.LittleEndian.Uint64(hdr[16:24]),
		rawBytes: binary.LittleEndian.Uint64(trailer[8:16]),
		rawCRC:   binary.LittleEndian.Uint32(trailer[16:20]),
	}
	sr.lz = lz4.NewReader(io.NewSectionReader(f, snapshotHeaderBytes, trailerOff-snapshotHeaderBytes))
	return sr, nil
}

// Seq returns the seq the snapshot was taken at.
func (r *SnapshotReader) Seq() uint64 { return r.seq }

// Epoch returns the epoch the snapshot was taken under.
func (r *SnapshotReader) Epoch() uint64 { return r.epoch }

// Read implements io.Reader over the decompressed state.
func (r *SnapshotReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	n, err := r.lz.Read(p)
	r.got.crc = crc32.Update(r.got.crc, castagnoli, p[:n])
	r.got.bytes += uint64(n)
	switch {
	case err == io.EOF:
		if r.got.bytes != r.rawBytes || r.got.crc != r.rawCRC {
			return n, &CorruptError{File: r.name, Reason: "decompressed state does not match its checksum"}
		}
		r.done = true
		return n, io.EOF
	case err != nil:
		return n, fmt.Errorf("%w: %v", &CorruptError{File: r.name, Reason: "lz4 stream"}, err)
	case r.got.bytes > r.rawBytes:
		return n, &CorruptError{File: r.name, Reason: "decompressed state longer than recorded"}
	}
	return n, nil
}

// Close releases the file.
func (r *SnapshotReader) Close() error { return r.file.Close() }

// latestSnapshotSeq returns the seq of the newest snapshot that verifies.
func (j *Journal) latestSnapshotSeq() (uint64, error) {
	seq, _, r, err := j.OpenLatestSnapshot()
	if err != nil {
		return 0, err
	}
	return seq, r.Close()
}

// Compact removes the segments whose records all lie at or below the
// oldest kept snapshot's seq (of the SnapshotsKept, the one the newest
// valid snapshot falls back to; with a single snapshot, the empty state
// before seq 1, so nothing is removed), oldest first (a crash part-way leaves a
// contiguous log). So the journal always continues from an older state
// than the newest: recovery restores the newest and skips what lies
// below it, while a recompute of past outputs (session replay) can start
// from the older one, one snapshot interval further back. The segment
// being written is never removed. It returns how many segments it
// removed; with no snapshot it removes nothing. Owner goroutine.
func (j *Journal) Compact() (removed int, err error) {
	if j.closed {
		return 0, ErrClosed
	}
	seq, ok, err := j.compactionSeq()
	if err != nil || !ok {
		return 0, err
	}
	return j.CompactBehind(seq)
}

// compactionSeq is Compact's retention decision: the seq of the snapshot
// below the newest that verifies, behind which segments may go; ok is
// false with fewer than two snapshots. It reads the directory and the
// newest snapshot whole (its checksum), and touches no journal state:
// safe from any goroutine, so a SnapshotWriter decides on the write's own.
func (j *Journal) compactionSeq() (seq uint64, ok bool, err error) {
	snapSeq, err := j.latestSnapshotSeq()
	if errors.Is(err, ErrNoSnapshot) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	names, err := j.fs.ReadDir(j.dir)
	if err != nil {
		return 0, false, err
	}
	for _, s := range snapshotSeqs(names) {
		if s < snapSeq {
			return s, true, nil // newest first: the next older kept one
		}
	}
	// One snapshot: the older state is the empty one, which the journal
	// reaches only from its start.
	return 0, false, nil
}

// CompactBehind removes the segments whose records all lie at or below
// seq, oldest first; the segment being written is never removed. Compact
// applies the retention policy and calls it; tools that must shape a
// journal (a test's compacted history) call it directly. The caller must
// hold a valid snapshot at or above seq, or recovery will find a journal
// that starts past its state. Owner goroutine.
func (j *Journal) CompactBehind(seq uint64) (removed int, err error) {
	if j.closed {
		return 0, ErrClosed
	}
	if err := j.waitRemoval(); err != nil {
		return 0, err
	}
	for len(j.segs) > 1 && j.segs[0].lastSeq <= seq {
		if err := j.fs.Remove(j.path(j.segs[0].name)); err != nil {
			return removed, err
		}
		j.segs = j.segs[1:]
		removed++
	}
	if removed > 0 {
		return removed, j.fs.SyncDir(j.dir)
	}
	return 0, nil
}

// removal is a compaction's file removal under way off the owner
// goroutine (compactBehindAsync): segs, dropped from the journal's view,
// are removed oldest first, then the directory is synced. The goroutine
// sets left (the ones it did not remove) and err, then closes done.
type removal struct {
	segs []*segment
	left []*segment
	err  error
	done chan struct{}
}

// compactBehindAsync is CompactBehind with the file I/O (an unlink of a
// preallocated segment and a directory fsync: a millisecond or more on
// the owner, a node's agent) on a goroutine of its own. The owner only
// drops the segments from its view, so every read of the journal sees
// the compacted log at once. While an earlier removal is still under way
// nothing is compacted (the next snapshot's compaction takes these
// segments too). A removal that failed puts the segments it left back in
// the view, oldest first, and its error is returned by the next call.
// Owner goroutine.
func (j *Journal) compactBehindAsync(seq uint64) (removed int, err error) {
	if j.closed {
		return 0, ErrClosed
	}
	if r := j.removing; r != nil {
		select {
		case <-r.done:
		default:
			return 0, nil // still removing the last compaction's
		}
	}
	if err := j.waitRemoval(); err != nil {
		return 0, err
	}
	k := 0
	for k < len(j.segs)-1 && j.segs[k].lastSeq <= seq {
		k++
	}
	if k == 0 {
		return 0, nil
	}
	r := &removal{segs: slices.Clone(j.segs[:k]), done: make(chan struct{})}
	j.segs = j.segs[k:]
	j.removing = r
	fsys, dir := j.fs, j.dir
	go func() {
		defer close(r.done)
		for i, s := range r.segs {
			if r.err = fsys.Remove(filepath.Join(dir, s.name)); r.err != nil {
				r.left = r.segs[i:]
				return
			}
		}
		r.err = fsys.SyncDir(dir)
	}()
	return k, nil
}

// waitRemoval waits for a removal under way and returns its error; the
// segments a failed one left are back in the journal's view. Owner
// goroutine: before anything that removes segments itself or closes.
func (j *Journal) waitRemoval() error {
	r := j.removing
	if r == nil {
		return nil
	}
	<-r.done
	j.removing = nil
	if len(r.left) > 0 {
		j.segs = append(slices.Clone(r.left), j.segs...)
	}
	if r.err != nil {
		return fmt.Errorf("journal: compaction: %w", r.err)
	}
	return nil
}

// removalError is a finished removal's error (nil while one is under
// way or none failed), collected as waitRemoval does. Owner goroutine.
func (j *Journal) removalError() error {
	if r := j.removing; r != nil {
		select {
		case <-r.done:
			return j.waitRemoval()
		default:
		}
	}
	return nil
}

// DropSnapshotsAbove durably removes every snapshot taken after seq. A node
// that learns its history forked at seq (a deposed primary's unreplicated
// suffix) must not restore state that includes the discarded commands.
func (j *Journal) DropSnapshotsAbove(seq uint64) error {
	names, err := j.fs.ReadDir(j.dir)
	if err != nil {
		return err
	}
	removed := false
	for _, s := range snapshotSeqs(names) {
		if s > seq {
			if err := j.fs.Remove(j.path(snapshotName(s))); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		return j.fs.SyncDir(j.dir)
	}
	return nil
}

// EpochAt returns the epoch of the record at seq, or ok false when the
// journal does not hold it. Owner goroutine.
func (j *Journal) EpochAt(seq uint64) (epoch uint64, ok bool) {
	if seq == 0 || seq < j.First() || seq > j.lastSeq {
		return 0, false
	}
	_ = j.ReadFrom(seq, func(e, s uint64, _ []byte) bool {
		if s == seq {
			epoch, ok = e, true
		}
		return false
	})
	return epoch, ok
}
