package journal

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry
// the details and report themselves as the matching sentinel.
var (
	// ErrStaleEpoch is returned by Append when the record's epoch is lower
	// than the highest epoch the journal holds (the epoch fence). The
	// concrete error is a *StaleEpochError carrying both epochs.
	ErrStaleEpoch = errors.New("journal: stale epoch")

	// ErrSeqGap is returned by Append when the record's seq is not last+1
	// (or is 0). The concrete error is a *SeqGapError.
	ErrSeqGap = errors.New("journal: sequence gap")

	// ErrCorrupt is returned by Open, ReadFrom and the snapshot readers when
	// stored bytes fail their checksum anywhere other than the torn tail of
	// the last segment. The concrete error is a *CorruptError saying where.
	// The caller is expected to refetch the damaged range from a peer.
	ErrCorrupt = errors.New("journal: corrupt data")

	// ErrTooLarge is returned by Append when the payload exceeds
	// Options.MaxPayloadBytes.
	ErrTooLarge = errors.New("journal: payload too large")

	// ErrCompacted is returned by ReadFrom and TruncateAfter when the
	// requested seq lies below the first record the journal still holds.
	ErrCompacted = errors.New("journal: seq compacted away")

	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("journal: closed")

	// ErrFailed wraps the first write, fsync or truncate error. After such an
	// error the on-disk state is unknown (an fsync error may have dropped
	// dirty pages, see "fsyncgate"), so the journal refuses all further
	// writes and syncs; the process must reopen it and recover.
	ErrFailed = errors.New("journal: failed, reopen required")

	// ErrNoSnapshot is returned by OpenLatestSnapshot when no snapshot exists.
	ErrNoSnapshot = errors.New("journal: no snapshot")

	// ErrInvalidOptions is returned by Open for inconsistent Options.
	ErrInvalidOptions = errors.New("journal: invalid options")
)

// StaleEpochError is the detail of ErrStaleEpoch.
type StaleEpochError struct {
	Epoch        uint64 // epoch of the refused record
	HighestEpoch uint64 // highest epoch the journal holds
}

func (e *StaleEpochError) Error() string {
	return fmt.Sprintf("journal: stale epoch %d < highest %d", e.Epoch, e.HighestEpoch)
}

// Is makes errors.Is(err, ErrStaleEpoch) hold.
func (e *StaleEpochError) Is(target error) bool { return target == ErrStaleEpoch }

// SeqGapError is the detail of ErrSeqGap.
type SeqGapError struct {
	Seq  uint64 // seq of the refused record
	Want uint64 // the only seq Append would accept
}

func (e *SeqGapError) Error() string {
	return fmt.Sprintf("journal: seq %d is not the next seq %d", e.Seq, e.Want)
}

// Is makes errors.Is(err, ErrSeqGap) hold.
func (e *SeqGapError) Is(target error) bool { return target == ErrSeqGap }

// CorruptError is the detail of ErrCorrupt.
type CorruptError struct {
	File   string // base name of the damaged file
	Offset int64  // byte offset of the first bad byte range found
	Seq    uint64 // seq expected at Offset (0 for snapshots)
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: corrupt %s at offset %d (expected seq %d): %s", e.File, e.Offset, e.Seq, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

type failedError struct{ cause error }

func (e *failedError) Error() string        { return "journal: failed, reopen required: " + e.cause.Error() }
func (e *failedError) Is(target error) bool { return target == ErrFailed }
func (e *failedError) Unwrap() error        { return e.cause }
