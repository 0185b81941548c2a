package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
)

// SyncPolicy says when appended records must be fsynced.
type SyncPolicy uint8

const (
	// SyncGroup (the default) fsyncs once for everything appended within
	// Options.GroupWindowNs, or as soon as Options.GroupRecords records wait.
	SyncGroup SyncPolicy = iota
	// SyncAlways asks for an fsync after every append (SyncDue is true as
	// soon as anything is unsynced).
	SyncAlways
	// SyncNone never asks for an fsync, and Durable() follows the appended
	// seq as soon as the write returns. It is NOT crash safe: a power loss
	// can drop records Durable() reported. Use it only where another
	// replica's copy is the durability (or for benchmarks). It makes no
	// durability syscall at all, not even at a segment roll: after a power
	// loss an older segment may then be torn too, which recovery reports
	// as corruption (a node sets the journal aside and catches up from
	// the primary); a process crash loses nothing written.
	SyncNone
)

// ParseSyncPolicy reads a policy by its String name: none, group or
// always.
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	for _, p := range []SyncPolicy{SyncNone, SyncGroup, SyncAlways} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown fsync policy %q (none, group, always)", s)
}

func (p SyncPolicy) String() string {
	switch p {
	case SyncGroup:
		return "group"
	case SyncAlways:
		return "always"
	case SyncNone:
		return "none"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

// Defaults and limits.
const (
	DefaultSegmentBytes       = 64 << 20
	DefaultMaxPayloadBytes    = 1 << 20
	DefaultGroupWindowNs      = 200_000
	DefaultGroupRecords       = 256
	DefaultIndexIntervalBytes = 64 << 10
	// MinSegmentBytes keeps a segment large enough to be worth a file.
	MinSegmentBytes = 4 << 10
	// maxPayloadBytesLimit is what the 32-bit length field can say.
	maxPayloadBytesLimit = 1<<32 - 1
)

// Options configure a Journal. Zero fields take the defaults above.
type Options struct {
	// SegmentBytes is the size at which a segment is rolled; each segment
	// file is preallocated to it. A record never spans two segments, so
	// SegmentBytes must hold the largest record.
	SegmentBytes int64
	// MaxPayloadBytes bounds one record's payload; larger ones get
	// ErrTooLarge. Zero means DefaultMaxPayloadBytes, or less if that does
	// not fit SegmentBytes.
	MaxPayloadBytes int
	Policy          SyncPolicy
	// GroupWindowNs and GroupRecords tune SyncGroup (see SyncDue).
	GroupWindowNs int64
	GroupRecords  int
	// IndexIntervalBytes is the spacing of the sparse in-memory index:
	// ReadFrom scans at most this many bytes before reaching its seq.
	// Memory: 16 B per interval of log.
	IndexIntervalBytes int64
	// WriteBufferBytes > 0 turns on write batching: Append encodes into a
	// buffer of this size and the owner calls Flush after each batch of
	// appends (or the buffer fills), so a batch costs one write, not one
	// per record. A record counts as appended (for Sync, and durable under
	// SyncNone) only once flushed, so nothing unwritten is ever reported
	// durable. 0 writes every record at once.
	WriteBufferBytes int
	// PrepareAhead creates and preallocates the next segment file
	// (SpareSegmentName) on a goroutine of its own while the current one
	// fills, so a roll on the owner renames a ready file instead of
	// creating one and waiting for its fallocate (hundreds of µs for 64
	// MiB, more on a busy disk). The directory then holds one more
	// SegmentBytes file. False (the simulator's single goroutine, tools):
	// the roll creates the segment itself.
	PrepareAhead bool
}

// SpareSegmentName is the next segment prepared ahead
// (Options.PrepareAhead), renamed to its segment's name at the roll that
// takes it. Open ignores it as a segment: it holds no record until
// renamed. A journal opened with PrepareAhead truncates a leftover one
// and preallocates it again.
const SpareSegmentName = "next.seg.tmp"

func (o Options) withDefaults() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = int(min(DefaultMaxPayloadBytes, max(o.SegmentBytes-recordHeaderBytes, 0)))
	}
	if o.GroupWindowNs == 0 {
		o.GroupWindowNs = DefaultGroupWindowNs
	}
	if o.GroupRecords == 0 {
		o.GroupRecords = DefaultGroupRecords
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	switch {
	case o.SegmentBytes < MinSegmentBytes:
		return o, fmt.Errorf("%w: SegmentBytes %d < %d", ErrInvalidOptions, o.SegmentBytes, MinSegmentBytes)
	case o.MaxPayloadBytes < 0 || o.MaxPayloadBytes > maxPayloadBytesLimit:
		return o, fmt.Errorf("%w: MaxPayloadBytes %d", ErrInvalidOptions, o.MaxPayloadBytes)
	case int64(o.MaxPayloadBytes)+recordHeaderBytes > o.SegmentBytes:
		return o, fmt.Errorf("%w: a %d-byte payload does not fit a %d-byte segment", ErrInvalidOptions, o.MaxPayloadBytes, o.SegmentBytes)
	case o.Policy > SyncNone:
		return o, fmt.Errorf("%w: %v", ErrInvalidOptions, o.Policy)
	case o.GroupWindowNs < 0 || o.GroupRecords < 0 || o.IndexIntervalBytes < 0:
		return o, fmt.Errorf("%w: negative group window, group records or index interval", ErrInvalidOptions)
	}
	return o, nil
}

// Journal is an append-only segmented log. See doc.go for the goroutine
// contract; in short: one owner goroutine calls everything, and one other
// goroutine may call Sync, SyncDue, SyncDeadlineNs and Durable.
type Journal struct {
	fs   FS
	dir  string
	opts Options

	// Owner-goroutine state. The syncer never touches it.
	segs         []*segment // ascending; the last one is being written
	curFile      File       // open file of the last segment; nil when segs is empty
	lastSeq      uint64
	lastEpoch    uint64
	highestEpoch uint64
	hasBase      bool // lastSeq is meaningful: records exist or ResetTo ran
	closed       bool
	writeBuf     []byte
	reader       chunkReader
	// Write batching (WriteBufferBytes > 0): encoded records not yet
	// written, the file offset they start at, their last seq and count,
	// and the nowNs of the first.
	pend      []byte
	pendOff   int64
	pendSeq   uint64
	pendCount int
	pendNs    int64

	// syncMu serialises fsyncs with everything that swaps, truncates or
	// closes the file being written (roll, TruncateAfter, ResetTo, Close).
	// The appender takes it only at those rare points, never per record.
	// Lock order: syncMu before mu.
	syncMu    sync.Mutex
	syncedSeq uint64 // highest seq fsynced; guarded by syncMu

	// mu guards the fields below; held only for a few loads and stores,
	// never across I/O.
	mu             sync.Mutex
	syncFile       File   // the file Sync must fsync
	appendedSeq    uint64 // highest seq written to syncFile
	dirDirty       bool   // a segment was created since the last SyncDir
	pendingRecords int    // appended since the last Sync started
	pendingSinceNs int64  // nowNs of the oldest of those
	syncClosed     bool

	durable atomic.Uint64
	failure atomic.Pointer[failedError]

	// spareDone is closed when the preparer (Options.PrepareAhead) has
	// set spare; nil while none is under way or ready. Owner goroutine.
	spareDone chan struct{}
	spare     spareSegment
	// spareFailed is the latest preparation's error as SpareError saw
	// it (nil once one succeeded), spareFailedNs when it was seen or
	// last retried. Owner goroutine.
	spareFailed   error
	spareFailedNs int64
	// removing is the latest compaction's file removal off the owner
	// (compactBehindAsync); nil once collected. Owner goroutine.
	removing *removal
}

// spareSegment is a segment file prepared ahead, with its index's
// memory, or the error that stopped its preparation.
type spareSegment struct {
	f   File
	seg *segment
	err error
}

// segment is the in-memory view of one segment file.
type segment struct {
	name         string
	firstSeq     uint64
	lastSeq      uint64 // firstSeq-1 while empty
	endOffset    int64  // where the next record goes
	index        []indexEntry
	nextIndexOff int64
}

type indexEntry struct {
	seq    uint64
	offset int64
}

func segmentName(firstSeq uint64) string { return fmt.Sprintf("%020d.seg", firstSeq) }

func newSegment(firstSeq uint64, opts Options) *segment {
	s := &segment{index: make([]indexEntry, 0, indexCapacity(opts))}
	s.start(firstSeq)
	return s
}

// indexCapacity is a segment index's size for SegmentBytes of records.
func indexCapacity(opts Options) int {
	if opts.IndexIntervalBytes > 0 {
		return 2 + int(opts.SegmentBytes/opts.IndexIntervalBytes)
	}
	return 2
}

// start makes s the empty segment whose first record is firstSeq.
func (s *segment) start(firstSeq uint64) {
	s.name, s.firstSeq, s.lastSeq = segmentName(firstSeq), firstSeq, firstSeq-1
}

func (s *segment) empty() bool { return s.lastSeq < s.firstSeq }

// noteRecord indexes a record just written or recovered at offset. The
// index capacity covers SegmentBytes, so this never allocates for a
// segment this process created.
func (s *segment) noteRecord(seq uint64, offset, recordBytes, intervalBytes int64) {
	if offset >= s.nextIndexOff {
		s.index = append(s.index, indexEntry{seq: seq, offset: offset})
		s.nextIndexOff = offset + max(intervalBytes, 1)
	}
	s.lastSeq = seq
	s.endOffset = offset + recordBytes
}

func (j *Journal) path(name string) string { return filepath.Join(j.dir, name) }

// fail records the first fatal error and returns the sticky ErrFailed.
func (j *Journal) fail(err error) error {
	j.failure.CompareAndSwap(nil, &failedError{cause: err})
	return j.failure.Load()
}

func (j *Journal) failed() error {
	if f := j.failure.Load(); f != nil {
		return f
	}
	return nil
}

// Append writes one record. It refuses an epoch older than the highest the
// journal holds (*StaleEpochError) and any seq but last+1 (*SeqGapError),
// except that an empty journal accepts any first seq >= 1. nowNs times
// the group-commit window. Append never fsyncs, except once per segment
// roll for the segment being closed. Owner goroutine only.
func (j *Journal) Append(epoch, seq uint64, payload []byte, nowNs int64) error {
	if j.closed {
		return ErrClosed
	}
	if err := j.failed(); err != nil {
		return err
	}
	if len(payload) > j.opts.MaxPayloadBytes {
		return ErrTooLarge
	}
	if epoch < j.highestEpoch {
		return &StaleEpochError{Epoch: epoch, HighestEpoch: j.highestEpoch}
	}
	if seq == 0 || (j.hasBase && seq != j.lastSeq+1) {
		return &SeqGapError{Seq: seq, Want: j.lastSeq + 1}
	}
	recordBytes := int64(recordHeaderBytes + len(payload))
	if len(j.segs) == 0 || j.segs[len(j.segs)-1].endOffset+recordBytes > j.opts.SegmentBytes {
		if err := j.Flush(); err != nil {
			return err
		}
		if err := j.roll(seq); err != nil {
			return err
		}
	}
	seg := j.segs[len(j.segs)-1]
	if j.opts.WriteBufferBytes > 0 {
		if j.pendCount == 0 {
			j.pendOff, j.pendNs = seg.endOffset, nowNs
			if cap(j.pend) == 0 {
				j.pend = make([]byte, 0, j.opts.WriteBufferBytes+recordHeaderBytes+j.opts.MaxPayloadBytes)
			}
		}
		start := len(j.pend)
		j.pend = append(j.pend, make([]byte, recordBytes)...)
		encodeRecord(j.pend[start:], epoch, seq, payload)
		seg.noteRecord(seq, seg.endOffset, recordBytes, j.opts.IndexIntervalBytes)
		j.lastSeq, j.lastEpoch, j.hasBase = seq, epoch, true
		j.highestEpoch = max(j.highestEpoch, epoch)
		j.pendSeq = seq
		j.pendCount++
		if len(j.pend) >= j.opts.WriteBufferBytes {
			return j.Flush()
		}
		return nil
	}
	n := encodeRecord(j.writeBuf, epoch, seq, payload)
	if _, err := j.curFile.WriteAt(j.writeBuf[:n], seg.endOffset); err != nil {
		return j.fail(err)
	}
	seg.noteRecord(seq, seg.endOffset, recordBytes, j.opts.IndexIntervalBytes)
	j.lastSeq, j.lastEpoch, j.hasBase = seq, epoch, true
	j.highestEpoch = max(j.highestEpoch, epoch)
	j.published(seq, 1, nowNs)
	return nil
}

// Flush writes the records Append buffered (WriteBufferBytes > 0) with one
// write, and only then counts them as appended: Sync may fsync them, and
// under SyncNone they are durable. A no-op when nothing is buffered. A
// write error fails the journal. Owner goroutine.
func (j *Journal) Flush() error {
	if j.pendCount == 0 {
		return nil
	}
	if err := j.failed(); err != nil {
		return err
	}
	if _, err := j.curFile.WriteAt(j.pend, j.pendOff); err != nil {
		return j.fail(err)
	}
	seq, count, ns := j.pendSeq, j.pendCount, j.pendNs
	j.pend, j.pendCount = j.pend[:0], 0
	j.published(seq, count, ns)
	return nil
}

// published makes written records up to seq visible to Sync (and durable
// under SyncNone).
func (j *Journal) published(seq uint64, count int, firstNs int64) {
	j.mu.Lock()
	j.appendedSeq = seq
	if j.pendingRecords == 0 {
		j.pendingSinceNs = firstNs
	}
	j.pendingRecords += count
	if j.opts.Policy == SyncNone {
		j.durable.Store(seq)
	}
	j.mu.Unlock()
}

// roll starts a new segment whose first record is firstSeq. The closing
// segment is fsynced first so that only the last segment can ever have a
// torn tail, which is what lets recovery call damage anywhere else
// corruption rather than a crash. Under SyncNone it is not (see SyncNone):
// the appender, a node's agent, then never waits for a disk. The new
// segment is the spare prepared ahead when one is ready
// (Options.PrepareAhead): a rename, not a create and a fallocate.
func (j *Journal) roll(firstSeq uint64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.curFile != nil && j.opts.Policy != SyncNone {
		if err := j.curFile.Sync(); err != nil {
			return j.fail(err)
		}
	}
	seg, f, err := j.takeSpare(firstSeq)
	if err != nil {
		return err
	}
	if f == nil {
		seg = newSegment(firstSeq, j.opts)
		if f, err = j.createSegment(seg.name); err != nil {
			return err
		}
	}
	j.mu.Lock()
	j.syncFile = f
	j.dirDirty = true
	j.mu.Unlock()
	if j.curFile != nil {
		_ = j.curFile.Close() // fsynced (or SyncNone): a close error loses nothing
	}
	j.curFile = f
	j.segs = append(j.segs, seg)
	j.prepareSpare()
	return nil
}

// createSegment creates the segment file name, preallocated.
func (j *Journal) createSegment(name string) (File, error) {
	f, err := j.fs.OpenFile(j.path(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: create segment: %w", err)
	}
	if err := f.Preallocate(j.opts.SegmentBytes); err != nil {
		_ = f.Close()
		_ = j.fs.Remove(j.path(name))
		return nil, fmt.Errorf("journal: preallocate segment: %w", err)
	}
	return f, nil
}

// prepareSpare starts preparing the next segment (Options.PrepareAhead)
// unless one is under way or ready. Owner goroutine.
func (j *Journal) prepareSpare() {
	if !j.opts.PrepareAhead || j.spareDone != nil {
		return
	}
	done := make(chan struct{})
	j.spareDone = done
	fsys, path, opts := j.fs, j.path(SpareSegmentName), j.opts
	go func() {
		defer close(done)
		sp := spareSegment{seg: &segment{index: make([]indexEntry, 0, indexCapacity(opts))}}
		// O_TRUNC: a spare an earlier process left may be part
		// preallocated; it holds no record either way.
		sp.f, sp.err = fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if sp.err == nil {
			if sp.err = sp.f.Preallocate(opts.SegmentBytes); sp.err != nil {
				// Whatever the failed fallocate took is given back: the
				// roll's own create may need it.
				_ = sp.f.Close()
				_ = fsys.Remove(path)
				sp.f = nil
			}
		}
		if sp.err != nil {
			sp.err = fmt.Errorf("journal: prepare the next segment (%d bytes): %w", opts.SegmentBytes, sp.err)
		}
		j.spare = sp
	}()
}

// takeSpare renames the spare, if one is ready, to the segment starting
// at firstSeq and returns it; (nil, nil, nil) when none is ready or its
// preparation failed (the roll creates the segment itself, and a new
// spare is prepared after it). Owner goroutine.
func (j *Journal) takeSpare(firstSeq uint64) (*segment, File, error) {
	if j.spareDone == nil {
		return nil, nil, nil
	}
	select {
	case <-j.spareDone:
	default:
		return nil, nil, nil // still preparing: this roll does not wait
	}
	sp := j.spare
	j.spareDone, j.spare = nil, spareSegment{}
	if sp.err != nil {
		return nil, nil, nil
	}
	sp.seg.start(firstSeq)
	if err := j.fs.Rename(j.path(SpareSegmentName), j.path(sp.seg.name)); err != nil {
		_ = sp.f.Close()
		return nil, nil, fmt.Errorf("journal: create segment: %w", err)
	}
	return sp.seg, sp.f, nil
}

// SpareRetryNs is how long after a failed preparation of the next
// segment SpareError prepares it again.
const SpareRetryNs int64 = 1_000_000_000

// SpareError reports why the next segment could not be prepared ahead
// (Options.PrepareAhead): nil when it is ready, being prepared, or not
// asked for. While it fails, the roll at the end of the current segment
// creates its segment itself, and on a full disk that roll fails the
// journal: room is how many bytes of records the current segment still
// takes before it. A failed preparation is started again, off the
// owner, at the first call SpareRetryNs after it failed, and the error
// stands until one succeeds. Owner goroutine; a channel poll, no I/O.
func (j *Journal) SpareError(nowNs int64) (room int64, err error) {
	if k := len(j.segs); k > 0 {
		room = max(j.opts.SegmentBytes-j.segs[k-1].endOffset, 0)
	}
	if j.spareDone == nil {
		return room, j.spareFailed
	}
	select {
	case <-j.spareDone:
	default:
		return room, j.spareFailed // under way
	}
	if j.spare.err == nil {
		j.spareFailed = nil
		return room, nil
	}
	switch {
	case j.spareFailed == nil:
		j.spareFailed, j.spareFailedNs = j.spare.err, nowNs
	case nowNs-j.spareFailedNs >= SpareRetryNs:
		j.spareFailed, j.spareFailedNs = j.spare.err, nowNs
		j.spareDone, j.spare = nil, spareSegment{}
		j.prepareSpare()
	}
	return room, j.spareFailed
}

// dropSpare waits for a preparation under way and removes the spare, so
// a closed journal leaves only segments and snapshots. Owner goroutine.
func (j *Journal) dropSpare() {
	if j.spareDone == nil {
		return
	}
	<-j.spareDone
	if j.spare.f != nil {
		_ = j.spare.f.Close()
		_ = j.fs.Remove(j.path(SpareSegmentName))
	}
	j.spareDone, j.spare = nil, spareSegment{}
}

// Sync fsyncs everything appended so far and then advances Durable(). It
// may run on a goroutine other than the owner's, concurrently with Append:
// it holds mu only to read what to sync and to publish the result, and
// fsyncs outside it, so the appender is never blocked by the fsync (except
// at a segment roll, which waits for an fsync in flight). Records
// appended while the fsync runs are left for the next Sync. After an
// fsync error every later call returns ErrFailed.
func (j *Journal) Sync() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	_, err := j.syncLocked()
	return err
}

// SyncResult says what a SyncOnce did.
type SyncResult uint8

const (
	// SyncedNothing: everything appended was synced already (or the call
	// failed).
	SyncedNothing SyncResult = iota
	// Synced: an fsync ran and Durable() rose to what was appended.
	Synced
	// SyncBusy: TrySync only, another goroutine's Sync was under way;
	// nothing was done (what it does not cover waits for the next Sync).
	SyncBusy
)

// SyncOnce is Sync that says whether an fsync ran, so a caller can time
// the ones that did (storage.Committer).
func (j *Journal) SyncOnce() (SyncResult, error) {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	return j.syncLocked()
}

// TrySync is SyncOnce unless a Sync is under way on another goroutine:
// then it returns SyncBusy at once rather than wait for that fsync. The
// owner calls it to sync inline without ever queueing behind the fsync
// thread.
func (j *Journal) TrySync() (SyncResult, error) {
	if !j.syncMu.TryLock() {
		return SyncBusy, nil
	}
	defer j.syncMu.Unlock()
	return j.syncLocked()
}

// syncLocked is Sync's body; syncMu held.
func (j *Journal) syncLocked() (SyncResult, error) {
	if err := j.failed(); err != nil {
		return SyncedNothing, err
	}
	j.mu.Lock()
	if j.syncClosed {
		j.mu.Unlock()
		return SyncedNothing, ErrClosed
	}
	f, target, dirDirty := j.syncFile, j.appendedSeq, j.dirDirty
	j.dirDirty = false
	j.pendingRecords, j.pendingSinceNs = 0, 0
	j.mu.Unlock()
	if target == j.syncedSeq && !dirDirty {
		return SyncedNothing, nil
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return SyncedNothing, j.fail(err)
		}
	}
	if dirDirty {
		if err := j.fs.SyncDir(j.dir); err != nil {
			return SyncedNothing, j.fail(err)
		}
	}
	// Only a holder of syncMu changes appendedSeq downwards (TruncateAfter,
	// ResetTo), so target is still a prefix of the log. Under SyncNone
	// Durable() is already at or past target.
	j.syncedSeq = target
	if j.opts.Policy != SyncNone {
		j.durable.Store(target)
	}
	return Synced, nil
}

// SyncDue reports whether the policy wants Sync called now: for group,
// when the oldest unsynced append is GroupWindowNs old or GroupRecords
// records wait; for always, when anything is unsynced; for none, never.
// Safe from any goroutine.
func (j *Journal) SyncDue(nowNs int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.pendingRecords == 0 {
		return false
	}
	switch j.opts.Policy {
	case SyncAlways:
		return true
	case SyncGroup:
		return j.pendingRecords >= j.opts.GroupRecords || nowNs-j.pendingSinceNs >= j.opts.GroupWindowNs
	}
	return false
}

// SyncDeadlineNs returns when SyncDue will next become true by time alone,
// so a sync goroutine can sleep until then; ok is false when nothing is
// pending or the policy is none. Safe from any goroutine.
func (j *Journal) SyncDeadlineNs() (deadlineNs int64, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.pendingRecords == 0 {
		return 0, false
	}
	switch j.opts.Policy {
	case SyncAlways:
		return j.pendingSinceNs, true
	case SyncGroup:
		return j.pendingSinceNs + j.opts.GroupWindowNs, true
	}
	return 0, false
}

// Durable returns the highest seq known to be on stable storage: every
// record at or below it survives a crash (except under SyncNone). It moves
// forward only after the fsync returns; TruncateAfter and ResetTo set it.
// Safe from any goroutine.
func (j *Journal) Durable() uint64 { return j.durable.Load() }

// Last returns the epoch and seq of the last record appended (after
// ResetTo(seq), before any append: epoch 0 and seq). Owner goroutine.
func (j *Journal) Last() (epoch, seq uint64) { return j.lastEpoch, j.lastSeq }

// First returns the lowest seq the journal holds, or 0 when it holds none.
// Owner goroutine.
func (j *Journal) First() uint64 {
	for _, s := range j.segs {
		if !s.empty() {
			return s.firstSeq
		}
	}
	return 0
}

// HighestEpoch returns the epoch fence: Append refuses anything older.
// Owner goroutine.
func (j *Journal) HighestEpoch() uint64 { return j.highestEpoch }

// RaiseEpoch raises the epoch fence without writing a record, for a node
// that learned of a newer epoch (for example from a snapshot it installed
// after ResetTo). The fence is persisted only by the next record appended;
// after a reopen it is the highest epoch found in the log. Owner goroutine.
func (j *Journal) RaiseEpoch(epoch uint64) { j.highestEpoch = max(j.highestEpoch, epoch) }

// ReadFrom calls fn for each record with seq >= from, in order, until fn
// returns false or the last appended record. payload is valid only during
// the call. Every record is re-verified; damage is ErrCorrupt. A from
// below First() is ErrCompacted; one above the last seq reads nothing.
// Owner goroutine (it shares the reader buffer with recovery).
func (j *Journal) ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error {
	if j.closed {
		return ErrClosed
	}
	if err := j.Flush(); err != nil {
		return err
	}
	first := j.First()
	if first == 0 || from > j.lastSeq {
		return nil
	}
	if from < first {
		return ErrCompacted
	}
	i := sort.Search(len(j.segs), func(i int) bool { return j.segs[i].lastSeq >= from })
	for ; i < len(j.segs); i++ {
		more, err := j.readSegment(j.segs[i], from, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// openSegment returns a readable handle on s and whether the caller must
// close it.
func (j *Journal) openSegment(s *segment) (File, bool, error) {
	if s == j.segs[len(j.segs)-1] && j.curFile != nil {
		return j.curFile, false, nil
	}
	f, err := j.fs.OpenFile(j.path(s.name), os.O_RDONLY, 0)
	if err != nil {
		return nil, false, err
	}
	return f, true, nil
}

func (j *Journal) readSegment(s *segment, from uint64, fn func(epoch, seq uint64, payload []byte) bool) (bool, error) {
	if s.empty() {
		return true, nil
	}
	f, mustClose, err := j.openSegment(s)
	if err != nil {
		return false, err
	}
	if mustClose {
		defer f.Close()
	}
	k := sort.Search(len(s.index), func(k int) bool { return s.index[k].seq > from }) - 1
	off, expect := s.index[max(k, 0)].offset, s.index[max(k, 0)].seq
	j.reader.reset(f, s.endOffset)
	for off < s.endOffset {
		h, rec, ok, err := j.reader.recordAt(off)
		if err != nil {
			return false, err
		}
		if !ok || h.seq != expect {
			return false, &CorruptError{File: s.name, Offset: off, Seq: expect, Reason: "record fails verification on read"}
		}
		if h.seq >= from && !fn(h.epoch, h.seq, rec[recordHeaderBytes:]) {
			return false, nil
		}
		off += int64(len(rec))
		expect++
	}
	return true, nil
}

// locate returns the offset, length and epoch of record seq in s.
func (j *Journal) locate(s *segment, f File, seq uint64) (offset int64, recordBytes int64, epoch uint64, err error) {
	k := sort.Search(len(s.index), func(k int) bool { return s.index[k].seq > seq }) - 1
	off, expect := s.index[max(k, 0)].offset, s.index[max(k, 0)].seq
	j.reader.reset(f, s.endOffset)
	for off < s.endOffset {
		h, rec, ok, err := j.reader.recordAt(off)
		if err != nil {
			return 0, 0, 0, err
		}
		if !ok || h.seq != expect {
			return 0, 0, 0, &CorruptError{File: s.name, Offset: off, Seq: expect, Reason: "record fails verification on read"}
		}
		if h.seq == seq {
			return off, int64(len(rec)), h.epoch, nil
		}
		off += int64(len(rec))
		expect++
	}
	return 0, 0, 0, &CorruptError{File: s.name, Offset: off, Seq: seq, Reason: "seq not found in its segment"}
}

// TruncateAfter durably discards every record above seq, for a deposed
// primary dropping its unreplicated suffix. The fence (HighestEpoch) is
// kept. Afterwards every record up to seq is fsynced (earlier segments were
// fsynced when rolled, the cut one is fsynced here), so Durable() is seq. seq below First()-1 is
// ErrCompacted; seq >= the last seq is a no-op. Any I/O error leaves the
// journal failed (ErrFailed). Owner goroutine.
func (j *Journal) TruncateAfter(seq uint64) error {
	if j.closed {
		return ErrClosed
	}
	if err := j.failed(); err != nil {
		return err
	}
	if err := j.Flush(); err != nil {
		return err
	}
	if !j.hasBase || seq >= j.lastSeq {
		return nil
	}
	if err := j.waitRemoval(); err != nil {
		return err
	}
	first := j.First()
	if first == 0 || seq+1 < first {
		return ErrCompacted
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	// Newest first, so that a crash part-way leaves a contiguous log.
	for len(j.segs) > 0 && j.segs[len(j.segs)-1].firstSeq > seq {
		s := j.segs[len(j.segs)-1]
		if j.curFile != nil {
			_ = j.curFile.Close()
			j.curFile = nil
		}
		if err := j.fs.Remove(j.path(s.name)); err != nil {
			return j.fail(err)
		}
		j.segs = j.segs[:len(j.segs)-1]
	}
	var lastEpoch uint64
	if len(j.segs) > 0 {
		s := j.segs[len(j.segs)-1]
		if j.curFile == nil {
			f, err := j.fs.OpenFile(j.path(s.name), os.O_RDWR, 0)
			if err != nil {
				return j.fail(err)
			}
			j.curFile = f
		}
		off, recordBytes, epoch, err := j.locate(s, j.curFile, seq)
		if err != nil {
			return j.fail(err)
		}
		lastEpoch = epoch
		if cut := off + recordBytes; cut < s.endOffset {
			if err := j.zeroFrom(j.curFile, cut); err != nil {
				return j.fail(err)
			}
			s.endOffset, s.lastSeq = cut, seq
			k := sort.Search(len(s.index), func(k int) bool { return s.index[k].seq > seq })
			s.index = s.index[:k]
			s.nextIndexOff = s.index[k-1].offset + max(j.opts.IndexIntervalBytes, 1)
		}
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return j.fail(err)
	}
	j.lastSeq, j.lastEpoch = seq, lastEpoch
	j.mu.Lock()
	j.syncFile, j.appendedSeq, j.dirDirty = j.curFile, seq, false
	j.pendingRecords, j.pendingSinceNs = 0, 0
	j.durable.Store(seq)
	j.mu.Unlock()
	j.syncedSeq = seq
	return nil
}

// zeroFrom durably discards f's bytes from offset on, leaving zeros up to
// SegmentBytes, so that no stale record can reappear after the cut.
func (j *Journal) zeroFrom(f File, offset int64) error {
	if err := f.Truncate(offset); err != nil {
		return err
	}
	if err := f.Preallocate(j.opts.SegmentBytes); err != nil {
		return err
	}
	return f.Sync()
}

// ResetTo durably empties the journal so that the next Append must be
// seq+1, for a standby that installed a snapshot at seq. Durable() becomes
// seq: call it only once that snapshot is durable. The fence is kept
// (see RaiseEpoch). After a crash before the next append the journal
// reopens empty. Owner goroutine.
func (j *Journal) ResetTo(seq uint64) error {
	if j.closed {
		return ErrClosed
	}
	if err := j.failed(); err != nil {
		return err
	}
	j.pend, j.pendCount = j.pend[:0], 0 // about to be removed anyway
	if err := j.waitRemoval(); err != nil {
		return err
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.curFile != nil {
		_ = j.curFile.Close()
		j.curFile = nil
	}
	for len(j.segs) > 0 {
		s := j.segs[len(j.segs)-1]
		if err := j.fs.Remove(j.path(s.name)); err != nil {
			return j.fail(err)
		}
		j.segs = j.segs[:len(j.segs)-1]
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return j.fail(err)
	}
	j.lastSeq, j.lastEpoch, j.hasBase = seq, 0, true
	j.mu.Lock()
	j.syncFile, j.appendedSeq, j.dirDirty = nil, seq, false
	j.pendingRecords, j.pendingSinceNs = 0, 0
	j.durable.Store(seq)
	j.mu.Unlock()
	j.syncedSeq = seq
	return nil
}

// Close fsyncs what is pending (whatever the policy: a clean shutdown loses
// nothing) and closes the journal. Owner goroutine; a concurrent Sync
// either completes first or returns ErrClosed.
func (j *Journal) Close() error {
	if j.closed {
		return ErrClosed
	}
	err := j.Flush()
	if err == nil {
		err = j.Sync()
	}
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	if rerr := j.waitRemoval(); err == nil {
		err = rerr
	}
	j.dropSpare()
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.closed = true
	j.mu.Lock()
	j.syncClosed, j.syncFile = true, nil
	j.mu.Unlock()
	if j.curFile != nil {
		if cerr := j.curFile.Close(); err == nil {
			err = cerr
		}
		j.curFile = nil
	}
	return err
}
