package engine

import "errors"

// Sentinel errors. Decoders wrap none of them: callers compare with ==
// or errors.Is.
var (
	// ErrTruncated is returned by the decoders when the input is shorter
	// than the fixed layout of its kind.
	ErrTruncated = errors.New("engine: truncated input")
	// ErrTrailingBytes is returned by the decoders when the input is longer
	// than the fixed layout of its kind. Every layout has one exact length so
	// that a decoded value re-encodes to the very same bytes.
	ErrTrailingBytes = errors.New("engine: trailing bytes")
	// ErrUnknownKind is returned when an output kind or request op byte is
	// not one this package defines.
	ErrUnknownKind = errors.New("engine: unknown kind or op")
	// ErrBadField is returned when an enumerated field (side, order type,
	// reason, market-data kind, boolean) holds a value outside its range.
	ErrBadField = errors.New("engine: field value out of range")
	// ErrZeroSession is returned by ParseCommand for session 0, which is the
	// market-data address (MarketData) and can never own a command.
	ErrZeroSession = errors.New("engine: session 0 is reserved for market data")
	// ErrBadConfig is returned by New for a Config outside its documented
	// limits.
	ErrBadConfig = errors.New("engine: bad config")
	// ErrConfigMismatch is returned by Restore when the snapshot was taken
	// by an engine with different limits: limits change behaviour (which
	// orders are rejected), so replicas must share them.
	ErrConfigMismatch = errors.New("engine: snapshot config differs from engine config")
	// ErrSnapshotCorrupt is returned by Restore for a snapshot that is
	// malformed, violates a book or dedup invariant, or whose recomputed
	// state hash differs from the one it records. The engine is unchanged.
	ErrSnapshotCorrupt = errors.New("engine: corrupt snapshot")
)
