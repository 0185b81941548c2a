package gating

import "errors"

var (
	// ErrInvalidConfig is returned by NewGate and NewPublisher when a limit is
	// out of range (negative, zero capacity, or above MaxStandbys).
	ErrInvalidConfig = errors.New("gating: invalid config")

	// ErrTooManyStandbys is returned by Gate.SetInSync when the set has more
	// than MaxStandbys members. Nothing changes.
	ErrTooManyStandbys = errors.New("gating: in-sync set larger than MaxStandbys")

	// ErrDuplicateStandby is returned by Gate.SetInSync when one id appears
	// twice in the set. Nothing changes.
	ErrDuplicateStandby = errors.New("gating: duplicate standby in in-sync set")

	// ErrStaleInSyncVersion is returned by Gate.SetInSync when the version is
	// not greater than the current one: an older membership decision that
	// arrives late must not undo a newer one. Nothing changes.
	ErrStaleInSyncVersion = errors.New("gating: stale in-sync set version")

	// ErrFull is returned by Publisher.Enqueue when the queue holds capacity
	// outputs. Nothing changes; the caller applies back-pressure (stops taking
	// commands) until Release makes room.
	ErrFull = errors.New("gating: publisher queue full")

	// ErrOutOfOrder is returned by Publisher.Enqueue when seq is lower than
	// the last enqueued seq. It means the caller enqueues outputs in an order
	// other than apply order, which is a programmer error. Nothing changes.
	ErrOutOfOrder = errors.New("gating: output enqueued below the last enqueued seq")

	// ErrZeroSeq is returned by Publisher.Enqueue for seq 0: seqs start at 1
	// and a released watermark of 0 means nothing is released. Nothing changes.
	ErrZeroSeq = errors.New("gating: output enqueued with seq 0")
)
