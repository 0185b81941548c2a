package journal

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Recovery reports what Open found and what it cut.
type Recovery struct {
	Segments     int    // segment files kept
	RecordsKept  uint64 // valid records in the log after recovery
	FirstSeq     uint64 // 0 when the log is empty
	LastSeq      uint64 // 0 when the log is empty
	HighestEpoch uint64 // epoch of the last record (epochs never decrease)
	// BytesCut counts the bytes discarded from the tail of the last
	// segment: from CutOffset to the last non-zero byte. 0 means the log
	// ended cleanly.
	BytesCut  int64
	CutFile   string // segment that was cut, "" when BytesCut is 0
	CutOffset int64
	// RemovedEmpty is set when the last segment held no valid record and
	// was removed (a crash right after a roll).
	RemovedEmpty bool
}

// parseSegmentName returns the first seq encoded in a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil && seq > 0
}

// Open opens (creating if needed) the journal in dir and recovers it: it
// verifies every record of every segment, cuts a torn or corrupt tail off
// the last segment (zeroing it durably) and fsyncs what it keeps, so
// Durable() starts at the last recovered seq. Damage anywhere else, a
// missing range between segments, or valid records found after the cut
// point is *CorruptError: nothing is skipped silently.
func Open(fsys FS, dir string, opts Options) (*Journal, Recovery, error) {
	var rec Recovery
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, rec, err
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, rec, err
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, rec, err
	}
	j := &Journal{
		fs:       fsys,
		dir:      dir,
		opts:     opts,
		writeBuf: make([]byte, recordHeaderBytes+opts.MaxPayloadBytes),
	}
	for _, name := range names {
		if first, ok := parseSegmentName(name); ok {
			j.segs = append(j.segs, newSegment(first, opts))
		}
	}
	sort.Slice(j.segs, func(a, b int) bool { return j.segs[a].firstSeq < j.segs[b].firstSeq })
	if err := j.recoverSegments(&rec); err != nil {
		j.closeQuietly()
		return nil, rec, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		j.closeQuietly()
		return nil, rec, err
	}
	rec.Segments = len(j.segs)
	if len(j.segs) > 0 {
		rec.FirstSeq = j.segs[0].firstSeq
		rec.LastSeq = j.lastSeq
		rec.RecordsKept = rec.LastSeq - rec.FirstSeq + 1
		rec.HighestEpoch = j.highestEpoch
	}
	j.syncFile, j.appendedSeq, j.syncedSeq = j.curFile, j.lastSeq, j.lastSeq
	j.durable.Store(j.lastSeq)
	j.prepareSpare() // Options.PrepareAhead: the first roll's segment
	return j, rec, nil
}

func (j *Journal) closeQuietly() {
	if j.curFile != nil {
		_ = j.curFile.Close()
		j.curFile = nil
	}
}

// recoverSegments scans the segments in order. Every segment but the last
// was fsynced when it was rolled, so it must be intact up to its end and
// zero after it. The last may end in a torn write, which is cut.
func (j *Journal) recoverSegments(rec *Recovery) error {
	for i, s := range j.segs {
		last := i == len(j.segs)-1
		if i > 0 && s.firstSeq != j.lastSeq+1 {
			return &CorruptError{File: s.name, Offset: 0, Seq: j.lastSeq + 1,
				Reason: fmt.Sprintf("segment starts at seq %d, previous ended at %d", s.firstSeq, j.lastSeq)}
		}
		f, err := j.fs.OpenFile(j.path(s.name), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		if err := j.scanSegment(s, f, last, rec); err != nil {
			_ = f.Close()
			return err
		}
		if !last {
			if err := f.Close(); err != nil {
				return err
			}
			continue
		}
		j.curFile = f
	}
	if len(j.segs) == 0 {
		return nil
	}
	if s := j.segs[len(j.segs)-1]; s.empty() {
		// A crash right after a roll: the new segment never got a record.
		_ = j.curFile.Close()
		j.curFile = nil
		if err := j.fs.Remove(j.path(s.name)); err != nil {
			return err
		}
		rec.RemovedEmpty = true
		j.segs = j.segs[:len(j.segs)-1]
		if len(j.segs) == 0 {
			j.lastSeq, j.lastEpoch, j.hasBase = 0, 0, false
			return nil
		}
		prev := j.segs[len(j.segs)-1]
		f, err := j.fs.OpenFile(j.path(prev.name), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		j.curFile = f
	}
	// What was read may have been only in the page cache of a process that
	// died: make it durable before Durable() claims it.
	return j.curFile.Sync()
}

// scanSegment verifies s record by record, fills its index and advances
// the journal's last seq and epoch.
func (j *Journal) scanSegment(s *segment, f File, last bool, rec *Recovery) error {
	sizeBytes, err := f.Size()
	if err != nil {
		return err
	}
	r := &j.reader
	r.reset(f, sizeBytes)
	off, expect := int64(0), s.firstSeq
	var reason string
	for {
		hdr, err := r.bytesAt(off, recordHeaderBytes)
		if err == errBeyondEnd {
			// Fewer than a header's bytes remain: the end, if they are zero.
			if _, nonZero, err := r.nextNonZero(off); err != nil {
				return err
			} else if nonZero {
				reason = "short record at end of file"
			}
			break
		}
		if err != nil {
			return err
		}
		if allZero(hdr) {
			break
		}
		h, record, ok, err := r.recordAt(off)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			reason = "record fails length or checksum"
		case h.seq != expect:
			reason = fmt.Sprintf("record has seq %d", h.seq)
		case h.epoch < j.highestEpoch:
			reason = fmt.Sprintf("record epoch %d below %d", h.epoch, j.highestEpoch)
		}
		if reason != "" {
			break
		}
		s.noteRecord(h.seq, off, int64(len(record)), j.opts.IndexIntervalBytes)
		j.lastSeq, j.lastEpoch, j.hasBase = h.seq, h.epoch, true
		j.highestEpoch = max(j.highestEpoch, h.epoch)
		off += int64(len(record))
		expect++
	}
	s.endOffset = off
	if reason == "" {
		reason = "non-zero bytes after the end of the log"
	}
	if !last {
		// A rolled segment was fsynced whole: anything but zeros after
		// its last record is damage, and so is an empty segment.
		if _, nonZero, err := r.nextNonZero(off); err != nil {
			return err
		} else if nonZero || s.empty() {
			return &CorruptError{File: s.name, Offset: off, Seq: expect, Reason: reason}
		}
		return nil
	}
	lastNonZero, found, err := j.scanTail(off, expect)
	if err != nil {
		return err
	}
	if found {
		return &CorruptError{File: s.name, Offset: off, Seq: expect, Reason: reason + ", with valid records after it"}
	}
	if lastNonZero < off {
		return nil
	}
	rec.BytesCut = lastNonZero + 1 - off
	rec.CutFile = s.name
	rec.CutOffset = off
	return j.zeroFrom(f, off)
}

// scanTail looks at the bytes of the last segment from off on, where the
// valid log ends. It returns the offset of the last non-zero byte (off-1
// when all are zero) and whether a valid record with seq >= expect lies
// there. Such a record means the damage at off is not a torn final write
// but corruption in the middle of the log.
//
// A valid record's seq field (bytes 16..24 of its header) is non-zero, so
// only starts within 23 bytes before a non-zero byte are candidates; the
// scan skips zero runs a word at a time and tests each offset at most once.
func (j *Journal) scanTail(off int64, expect uint64) (lastNonZero int64, found bool, err error) {
	r := &j.reader
	lastNonZero = off - 1
	pos := off
	next := off + 1 // off itself is known not to start a valid record
	maxSeqAhead := uint64(r.sizeBytes/recordHeaderBytes) + 1
	for {
		q, ok, err := r.nextNonZero(pos)
		if err != nil || !ok {
			return lastNonZero, false, err
		}
		lastNonZero = q
		for c := max(next, q-recordHeaderBytes+1); c <= q; c++ {
			hdr, err := r.bytesAt(c, recordHeaderBytes)
			if err == errBeyondEnd {
				break
			}
			if err != nil {
				return lastNonZero, false, err
			}
			// Cheap plausibility first, so a random length never makes
			// us read a large range.
			if seq := decodeHeader(hdr).seq; seq < expect || seq-expect > maxSeqAhead {
				continue
			}
			h, _, valid, err := r.recordAt(c)
			if err != nil {
				return lastNonZero, false, err
			}
			if valid && h.seq >= expect {
				return lastNonZero, true, nil
			}
		}
		next = max(next, q+1)
		pos = q + 1
	}
}
