package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Inspection: reading a journal directory the way an operator does after
// an incident (Kafka's kafka-dump-log, Aeron's ArchiveTool). Open recovers:
// it cuts a torn tail, removes an empty last segment and fsyncs, so running
// it on a directory to look at it could destroy the evidence. Everything
// here goes through ReadOnly, which refuses every call that could change
// the directory, so an inspection leaves every byte and every mtime as it
// found them; it checks what Open checks, in the same order, and reports
// instead of repairing.

// ErrReadOnly is returned by a ReadOnly file system for every call that
// would change it.
var ErrReadOnly = errors.New("journal: read-only inspection")

// ReadOnly wraps fsys so that only reads get through: OpenFile succeeds
// only without write, create, truncate or append flags, files refuse
// Write, WriteAt, Sync, Truncate and Preallocate, and Remove, Rename,
// MkdirAll and SyncDir fail. All with ErrReadOnly.
func ReadOnly(fsys FS) FS { return readOnlyFS{fsys} }

type readOnlyFS struct{ fs FS }

const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND | os.O_EXCL

func (r readOnlyFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	if flag&writeFlags != 0 {
		return nil, fmt.Errorf("%w: open %s for writing", ErrReadOnly, name)
	}
	f, err := r.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{f}, nil
}

func (readOnlyFS) Remove(string) error                    { return ErrReadOnly }
func (readOnlyFS) Rename(string, string) error            { return ErrReadOnly }
func (r readOnlyFS) ReadDir(dir string) ([]string, error) { return r.fs.ReadDir(dir) }
func (readOnlyFS) MkdirAll(string, os.FileMode) error     { return ErrReadOnly }
func (readOnlyFS) SyncDir(string) error                   { return ErrReadOnly }

type readOnlyFile struct{ f File }

func (readOnlyFile) Write([]byte) (int, error)          { return 0, ErrReadOnly }
func (readOnlyFile) WriteAt([]byte, int64) (int, error) { return 0, ErrReadOnly }
func (r readOnlyFile) ReadAt(p []byte, off int64) (int, error) {
	return r.f.ReadAt(p, off)
}
func (readOnlyFile) Sync() error             { return ErrReadOnly }
func (readOnlyFile) Truncate(int64) error    { return ErrReadOnly }
func (readOnlyFile) Preallocate(int64) error { return ErrReadOnly }
func (r readOnlyFile) Size() (int64, error)  { return r.f.Size() }
func (r readOnlyFile) Close() error          { return r.f.Close() }

// AsideMarker starts the suffix a node adds to every file of a journal it
// found corrupt and set aside (".corrupt-<unix seconds>"); the files stay
// in the directory for a post-mortem and Open ignores them.
const AsideMarker = ".corrupt-"

// Problem kinds, in the order Inspect can find them.
const (
	ProblemGap           = "gap"            // a segment does not start where the previous ended
	ProblemChecksum      = "checksum"       // a record fails its length or CRC32C
	ProblemSeq           = "seq"            // a record's seq is not the previous + 1
	ProblemEpoch         = "epoch"          // a record's epoch is below an earlier record's
	ProblemTrailing      = "trailing"       // non-zero bytes after the last record of a rolled segment
	ProblemEmptySegment  = "empty-segment"  // a rolled segment holds no record
	ProblemTornTail      = "torn-tail"      // bytes after the last valid record of the last segment
	ProblemSnapshot      = "snapshot"       // a snapshot fails its checksums
	ProblemSnapshotChain = "snapshot-chain" // the log starts after seq 1 and no valid snapshot covers the start
)

// Problem is one thing an inspection found wrong, with where.
type Problem struct {
	Kind   string // one of the Problem* kinds
	File   string // base name of the file
	Offset int64  // byte offset in File of the first bad record or range
	Seq    uint64 // seq expected there (0 for snapshots)
	Reason string
}

func (p *Problem) Error() string {
	return fmt.Sprintf("%s: %s at offset %d (expected seq %d): %s", p.Kind, p.File, p.Offset, p.Seq, p.Reason)
}

// Is makes errors.Is(p, ErrCorrupt) hold.
func (p *Problem) Is(target error) bool { return target == ErrCorrupt }

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	Name       string
	FirstSeq   uint64 // from the file name
	LastSeq    uint64 // of the last valid record read (FirstSeq-1 when none)
	Records    uint64
	FirstEpoch uint64
	LastEpoch  uint64
	UsedBytes  int64 // bytes of valid records from the start
	FileBytes  int64 // file size (segments are preallocated)
}

// SnapshotInfo describes one snapshot file.
type SnapshotInfo struct {
	Name      string
	Seq       uint64 // from the file name
	Epoch     uint64 // from the header; 0 when it does not verify
	FileBytes int64
	RawBytes  uint64 // decompressed state length, when it verifies
	Valid     bool   // every checksum verified, decompressed to the end
}

// Description is what Inspect found in one set of journal files.
type Description struct {
	Dir string
	// Set is the file-name suffix of the set inspected: "" for the live
	// journal, AsideMarker+"<time>" for a set a node put aside.
	Set string
	// Sets lists every set in Dir.
	Sets      []string
	Segments  []SegmentInfo
	Snapshots []SnapshotInfo // newest first
	// TempFiles are leftovers of a WriteSnapshot that crashed.
	TempFiles []string
	// FirstSeq..LastSeq is the valid prefix of the log: every record from
	// the first segment up to the first problem. 0, 0 when empty.
	FirstSeq, LastSeq uint64
	Records           uint64
	HighestEpoch      uint64
	// DurableSeq is the durable mark Open would start from: the last seq
	// of the valid prefix, or with no record at all the newest valid
	// snapshot's (a standby that installed a snapshot and has appended
	// nothing since). Open refuses a journal with Problems (ErrCorrupt).
	DurableSeq uint64
	// LatestSnapshot is the seq of the newest valid snapshot (0: none).
	LatestSnapshot uint64
	// EmptyLastSegment: the last segment holds no record (a crash right
	// after a roll); Open would remove it.
	EmptyLastSegment bool
	// TornTail is set when the last segment has bytes after its last
	// valid record and no valid record after them: a torn final write,
	// which Open would cut.
	TornTail *Problem
	// Problems are the damage found, in log order, then the snapshots.
	// Open would refuse the journal for any of them.
	Problems []Problem
}

// FirstProblem returns the first problem, the torn tail if there is no
// other (when allowTornTail is false), or nil.
func (d *Description) FirstProblem(allowTornTail bool) *Problem {
	if len(d.Problems) > 0 {
		return &d.Problems[0]
	}
	if !allowTornTail {
		return d.TornTail
	}
	return nil
}

// InspectOptions select what to inspect.
type InspectOptions struct {
	// Set selects the files: "" is the live journal; a suffix such as
	// ".corrupt-1764580000" selects a set a node put aside.
	Set string
}

// Record is one record as an inspection reads it.
type Record struct {
	Epoch, Seq uint64
	// Payload is valid only during the callback.
	Payload []byte
	File    string
	Offset  int64
}

// Sets returns the sets of journal files in dir: "" for the live journal
// (when it has any file) and each AsideMarker suffix found, sorted.
func Sets(fsys FS, dir string) ([]string, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, name := range names {
		set := ""
		if i := strings.Index(name, AsideMarker); i >= 0 {
			name, set = name[:i], name[i:]
		}
		if isJournalFile(name) {
			seen[set] = true
		}
	}
	sets := make([]string, 0, len(seen))
	for s := range seen {
		sets = append(sets, s)
	}
	sort.Strings(sets)
	return sets, nil
}

func isJournalFile(name string) bool {
	if _, ok := parseSegmentName(name); ok {
		return true
	}
	if _, ok := parseSnapshotName(name); ok {
		return true
	}
	return strings.HasSuffix(name, ".snap.tmp")
}

// setFiles lists the segments (ascending), snapshots (newest first) and
// temporary files of one set.
type setFiles struct {
	segs  []segRef
	snaps []segRef
	temps []string
}

type segRef struct {
	file string // name on disk, with the set's suffix
	base string // name without it
	seq  uint64
}

func listSet(fsys FS, dir, set string) (setFiles, error) {
	var sf setFiles
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return sf, err
	}
	for _, file := range names {
		base, ok := strings.CutSuffix(file, set)
		if !ok || (set == "" && strings.Contains(file, AsideMarker)) {
			continue
		}
		if seq, ok := parseSegmentName(base); ok {
			sf.segs = append(sf.segs, segRef{file, base, seq})
		} else if seq, ok := parseSnapshotName(base); ok {
			sf.snaps = append(sf.snaps, segRef{file, base, seq})
		} else if strings.HasSuffix(base, ".snap.tmp") {
			sf.temps = append(sf.temps, file)
		}
	}
	sort.Slice(sf.segs, func(a, b int) bool { return sf.segs[a].seq < sf.segs[b].seq })
	sort.Slice(sf.snaps, func(a, b int) bool { return sf.snaps[a].seq > sf.snaps[b].seq })
	return sf, nil
}

// Inspect reads one set of journal files in dir without changing
// anything (every access goes through ReadOnly) and reports what Open
// would find: the segments and their ranges, the snapshots, the valid
// prefix, the torn tail it would cut and the damage it would refuse. It
// reads every record and decompresses every snapshot. An error is
// returned only when the directory or a file cannot be read; damage is
// in the Description.
func Inspect(fsys FS, dir string, opts InspectOptions) (*Description, error) {
	fsys = ReadOnly(fsys)
	d := &Description{Dir: dir, Set: opts.Set}
	var err error
	if d.Sets, err = Sets(fsys, dir); err != nil {
		return nil, err
	}
	sf, err := listSet(fsys, dir, opts.Set)
	if err != nil {
		return nil, err
	}
	d.TempFiles = sf.temps
	if err := walkSegments(fsys, dir, sf.segs, d, nil); err != nil {
		return nil, err
	}
	if err := inspectSnapshots(fsys, dir, sf.snaps, d); err != nil {
		return nil, err
	}
	d.DurableSeq = d.LastSeq
	if d.Records == 0 {
		d.DurableSeq = d.LatestSnapshot
	}
	return d, nil
}

// Scan calls fn for every record of the valid prefix of one set, in order,
// until fn returns false. It stops at the first damage and returns it as a
// *Problem (errors.Is ErrCorrupt), after every record before it was
// handed to fn; a torn tail ends the prefix without an error. Read-only,
// like Inspect; snapshots are not read.
func Scan(fsys FS, dir string, opts InspectOptions, fn func(Record) bool) error {
	fsys = ReadOnly(fsys)
	sf, err := listSet(fsys, dir, opts.Set)
	if err != nil {
		return err
	}
	d := &Description{Dir: dir, Set: opts.Set}
	if err := walkSegments(fsys, dir, sf.segs, d, fn); err != nil {
		return err
	}
	if len(d.Problems) > 0 {
		return &d.Problems[0]
	}
	return nil
}

// walkSegments checks the segments as recoverSegments does, without
// writing: each record's length, CRC, seq and epoch; rolled segments
// intact up to their end and zero after; the last one's tail. fn, when
// set, gets every record of the valid prefix; it stops the walk (without
// a problem) by returning false.
func walkSegments(fsys FS, dir string, segs []segRef, d *Description, fn func(Record) bool) error {
	// A Journal value only for its reader and scanTail: it holds no file
	// open for writing and none of its writing methods is called.
	j := &Journal{fs: fsys, dir: dir}
	inPrefix := true
	var prevLast, epochFence uint64
	for i, ref := range segs {
		last := i == len(segs)-1
		if i > 0 && ref.seq != prevLast+1 {
			d.Problems = append(d.Problems, Problem{Kind: ProblemGap, File: ref.file, Seq: prevLast + 1,
				Reason: fmt.Sprintf("segment starts at seq %d, previous ended at %d", ref.seq, prevLast)})
			inPrefix = false
		}
		info, more, err := walkSegment(j, ref, last, &epochFence, d, &inPrefix, fn)
		if err != nil {
			return err
		}
		d.Segments = append(d.Segments, info)
		prevLast = info.LastSeq
		if !more {
			return nil
		}
	}
	if n := len(d.Segments); n > 0 && d.Segments[n-1].Records == 0 && len(d.Problems) == 0 {
		d.EmptyLastSegment = true
	}
	return nil
}

func walkSegment(j *Journal, ref segRef, last bool, epochFence *uint64, d *Description,
	inPrefix *bool, fn func(Record) bool) (info SegmentInfo, more bool, err error) {
	info = SegmentInfo{Name: ref.file, FirstSeq: ref.seq, LastSeq: ref.seq - 1}
	f, err := j.fs.OpenFile(filepath.Join(j.dir, ref.file), os.O_RDONLY, 0)
	if err != nil {
		return info, false, err
	}
	defer f.Close()
	if info.FileBytes, err = f.Size(); err != nil {
		return info, false, err
	}
	r := &j.reader
	r.reset(f, info.FileBytes)
	off, expect := int64(0), ref.seq
	var kind, reason string
	for {
		hdr, err := r.bytesAt(off, recordHeaderBytes)
		if err == errBeyondEnd {
			if _, nonZero, err := r.nextNonZero(off); err != nil {
				return info, false, err
			} else if nonZero {
				kind, reason = ProblemChecksum, "short record at end of file"
			}
			break
		}
		if err != nil {
			return info, false, err
		}
		if allZero(hdr) {
			break
		}
		h, rec, ok, err := r.recordAt(off)
		if err != nil {
			return info, false, err
		}
		switch {
		case !ok:
			kind, reason = ProblemChecksum, "record fails length or checksum"
		case h.seq != expect:
			kind, reason = ProblemSeq, fmt.Sprintf("record has seq %d", h.seq)
		case h.epoch < *epochFence:
			kind, reason = ProblemEpoch, fmt.Sprintf("record epoch %d below %d", h.epoch, *epochFence)
		}
		if reason != "" {
			break
		}
		if info.Records == 0 {
			info.FirstEpoch = h.epoch
		}
		info.Records++
		info.LastSeq, info.LastEpoch = h.seq, h.epoch
		*epochFence = max(*epochFence, h.epoch)
		if *inPrefix {
			if d.Records == 0 {
				d.FirstSeq = h.seq
			}
			d.Records++
			d.LastSeq, d.HighestEpoch = h.seq, *epochFence
			if fn != nil && !fn(Record{Epoch: h.epoch, Seq: h.seq, Payload: rec[recordHeaderBytes:], File: ref.file, Offset: off}) {
				info.UsedBytes = off + int64(len(rec))
				return info, false, nil
			}
		}
		off += int64(len(rec))
		expect++
	}
	info.UsedBytes = off
	if reason == "" {
		kind, reason = ProblemTrailing, "non-zero bytes after the end of the log"
	}
	p := Problem{Kind: kind, File: ref.file, Offset: off, Seq: expect, Reason: reason}
	return info, true, j.segmentEnd(&info, last, p, d, inPrefix)
}

// segmentEnd classifies what follows a segment's last valid record (at
// p.Offset; p says why the walk stopped there): in a rolled segment, any
// non-zero byte is a problem that ends the valid prefix, as is a segment
// with no record; in the last, valid records after it are, and anything
// else non-zero is a torn tail Open would cut.
func (j *Journal) segmentEnd(info *SegmentInfo, last bool, p Problem, d *Description, inPrefix *bool) error {
	off, expect := p.Offset, p.Seq
	if !last {
		_, nonZero, err := j.reader.nextNonZero(off)
		if err != nil {
			return err
		}
		switch {
		case nonZero:
			d.Problems = append(d.Problems, p)
			*inPrefix = false
		case info.Records == 0:
			d.Problems = append(d.Problems, Problem{Kind: ProblemEmptySegment, File: p.File, Offset: 0, Seq: expect, Reason: "rolled segment holds no record"})
			*inPrefix = false
		}
		return nil
	}
	lastNonZero, found, err := j.scanTail(off, expect)
	if err != nil {
		return err
	}
	switch {
	case found:
		p.Reason += ", with valid records after it"
		d.Problems = append(d.Problems, p)
		*inPrefix = false
	case lastNonZero >= off:
		d.TornTail = &Problem{Kind: ProblemTornTail, File: p.File, Offset: off, Seq: expect,
			Reason: fmt.Sprintf("%s: %d bytes after the last valid record, no valid record after them; Open would cut them", p.Reason, lastNonZero+1-off)}
	}
	return nil
}

// inspectSnapshots verifies every snapshot whole (header, file CRC, lz4
// stream, decompressed length and CRC) and the chain: a log that starts
// after seq 1 needs a valid snapshot at or after the seq before its
// start, or nothing can rebuild the state.
func inspectSnapshots(fsys FS, dir string, snaps []segRef, d *Description) error {
	j := &Journal{fs: fsys, dir: dir}
	for _, ref := range snaps {
		info := SnapshotInfo{Name: ref.file, Seq: ref.seq}
		f, err := fsys.OpenFile(filepath.Join(dir, ref.file), os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		info.FileBytes, err = f.Size()
		_ = f.Close()
		if err != nil {
			return err
		}
		sr, err := j.openSnapshot(ref.file)
		var n int64
		if err == nil {
			n, err = io.Copy(io.Discard, sr)
			_ = sr.Close()
			if err == nil && sr.seq != ref.seq {
				err = &CorruptError{File: ref.file, Reason: fmt.Sprintf("header says seq %d, name says %d", sr.seq, ref.seq)}
			}
		}
		var ce *CorruptError
		switch {
		case err == nil:
			info.Valid, info.Epoch, info.RawBytes = true, sr.epoch, uint64(n)
			if d.LatestSnapshot == 0 {
				d.LatestSnapshot = ref.seq
			}
		case errors.As(err, &ce):
			d.Problems = append(d.Problems, Problem{Kind: ProblemSnapshot, File: ref.file, Offset: ce.Offset, Reason: ce.Reason})
		default:
			return err
		}
		d.Snapshots = append(d.Snapshots, info)
	}
	if len(d.Segments) > 0 {
		first := d.Segments[0]
		if first.FirstSeq > 1 && (d.LatestSnapshot == 0 || d.LatestSnapshot < first.FirstSeq-1) {
			d.Problems = append(d.Problems, Problem{Kind: ProblemSnapshotChain, File: first.Name, Seq: first.FirstSeq,
				Reason: fmt.Sprintf("log starts at seq %d but no valid snapshot is at or after seq %d", first.FirstSeq, first.FirstSeq-1)})
		}
	}
	return nil
}

// SnapshotSeqs lists the seqs of the snapshot files in dir (live set),
// newest first, without opening them. Read-only.
func SnapshotSeqs(fsys FS, dir string) ([]uint64, error) {
	names, err := ReadOnly(fsys).ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return snapshotSeqs(names), nil
}
