// Package journal is seqbus's append-only, segmented, checksummed log of
// sequenced commands, with fsync policies, a durable watermark, torn-tail
// recovery and lz4-compressed snapshots.
//
// # Layout
//
// A journal is a directory of segment files named after their first seq
// (%020d.seg, so names sort in log order) and snapshot files named after
// their seq (%020d.snap). Each segment is preallocated to
// Options.SegmentBytes and holds whole records:
//
//	length u32 | CRC32C u32 | epoch u64 | seq u64 | payload
//
// (see record.go). Seqs are contiguous across segments and epochs never
// decrease. A segment is rolled when the next record does not fit; the
// closing segment is fsynced at that moment, so only the last segment can
// ever end in a torn write.
//
// # Usage contract
//
//  1. Open recovers the directory and returns a Recovery report. A
//     *CorruptError (errors.Is ErrCorrupt) means damage that is not a torn
//     tail: the node must refetch the log or a snapshot from its peer.
//  2. One owner goroutine calls Append, ReadFrom, Last, First, TruncateAfter,
//     ResetTo, RaiseEpoch, Compact and Close. Nothing in the package reads a
//     clock (Append takes nowNs for the group-commit timer), and only
//     these start goroutines, each waited for by Close: SnapshotWriter (one
//     per snapshot write and one per compaction's removal, unless Inline)
//     and Options.PrepareAhead (one per roll).
//  3. At most one other goroutine (the syncer) may call Sync, SyncDue and
//     SyncDeadlineNs concurrently with the owner; Durable may be called from
//     anywhere. A mutex guards only the handful of fields the two share and
//     is never held across I/O, so an fsync never blocks Append. The only
//     exception: rolling a segment, TruncateAfter and ResetTo wait for an
//     fsync in flight.
//  4. The syncer loop is: if SyncDue(nowNs) { Sync() }, sleeping until
//     SyncDeadlineNs when nothing is due. A single-goroutine runtime may do
//     the same inline after each Append.
//  5. Durable() is the highest seq on stable storage and moves only after
//     the fsync returned. Release nothing above it (gating). Under
//     SyncNone it follows the appended seq and is NOT crash safe.
//  6. After an I/O error on a write or fsync every call returns ErrFailed:
//     the page cache may have dropped the data, so reopen and recover.
//  7. A deposed primary calls TruncateAfter(seq) to drop its unreplicated
//     suffix; a standby that installed a snapshot at seq (written with
//     WriteSnapshot, or fetched and durable) calls ResetTo(seq).
//  8. WriteSnapshot may run on a third goroutine (it touches only its own
//     files); Compact then removes the segments the newest valid snapshot
//     covers. SnapshotWriter does both for the owner: Cut queues an
//     encoded snapshot (at most two wait for the disk; a third Cut waits
//     for the oldest and says how long), Start begins the oldest's write
//     on its own goroutine (or writes inline: SnapshotWriterOptions.Inline,
//     for a single-goroutine runtime such as the simulator) after writing
//     the owner's buffer, and (under group and always) syncs the journal
//     before the snapshot, so no crash the policy covers leaves a snapshot
//     past the journal's end (its records' outputs would be in no
//     history), Poll and
//     Finish collect finished writes and compact behind each successful
//     one (below), Abandon waits for the write under way and
//     forgets the rest. Each of these returns the SnapshotWrites it
//     finished (seq, epoch, data, error, duration, compaction) for the
//     caller to publish; a failed write compacts nothing. The retention
//     decision (reading the directory and verifying the newest snapshot)
//     runs on the write's goroutine; the owner drops the compacted
//     segments from its view, and their files are removed and the
//     directory synced on another goroutine (inline: on the owner), so
//     the owner does no file I/O for a snapshot. Anything else that
//     removes segments, and Close, first waits for such a removal.
//  9. With Options.PrepareAhead the next segment is created and
//     preallocated (SpareSegmentName) on a goroutine of its own while the
//     current one fills, and a roll renames it: the owner waits for no
//     fallocate. Under group and always a roll still fsyncs the segment
//     it closes, on the owner (only the last segment may be torn).
//
// # Recovery rules
//
// Every record of every segment is verified. Zero bytes after the last
// valid record mark a clean end. In the last segment, an invalid record is
// treated as a torn final write: it and everything after it is cut (zeroed
// and fsynced) and reported in Recovery. It is treated as corruption
// instead when any valid record with a later seq follows it, because then
// the damage is in the middle of the log and skipping it would silently
// lose acknowledged records. Anywhere else (a rolled segment, a missing
// segment, a seq out of order) damage is always ErrCorrupt.
//
// Disks may write back unsynced pages out of order; a crash can then leave
// a hole before a later unsynced record, which recovery reports as
// ErrCorrupt although nothing durable was lost. That errs on the safe side:
// the node refetches instead of guessing. MemFS models in-order write-back
// with a torn last write.
//
// # Files
//
// All file access goes through FS and File, so the deterministic simulator
// can run the journal on MemFS and crash it with a seed. OSFS is the real
// file system: fdatasync and fallocate on Linux, f.Sync and a sparse
// extension elsewhere.
package journal
