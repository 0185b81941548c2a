package wire

import "errors"

// Sentinel errors returned (wrapped) by Parse and the decoders. Use
// errors.Is to classify a drop; each maps to one drop counter.
var (
	// ErrShort is returned when the buffer is shorter than a header.
	ErrShort = errors.New("wire: buffer shorter than a frame header")
	// ErrMagic is returned when the first two bytes are not the seqbus magic.
	ErrMagic = errors.New("wire: bad magic")
	// ErrVersion is returned for a version this code does not speak.
	ErrVersion = errors.New("wire: unknown version")
	// ErrType is returned for an unknown frame type, or when a decoder is
	// called on a frame of another type.
	ErrType = errors.New("wire: unknown or unexpected frame type")
	// ErrFlags is returned when flag or reserved bits this version does not
	// define are set.
	ErrFlags = errors.New("wire: unknown flags or reserved bits set")
	// ErrLength is returned when a length field lies: the payload length
	// exceeds the buffer or the frame limit, a message length runs past the
	// payload, or a fixed-size payload has the wrong size.
	ErrLength = errors.New("wire: length field does not match the data")
	// ErrCount is returned when the count field is impossible: more items
	// than the payload can hold or the type allows, or zero where at least
	// one is required.
	ErrCount = errors.New("wire: count does not match the payload")
	// ErrChecksum is returned when the CRC32C does not match.
	ErrChecksum = errors.New("wire: bad checksum")
	// ErrSeq is returned for sequence numbers that cannot be valid: zero
	// where seqs start at 1, ranges with from > to, or a batch whose last
	// seq would overflow.
	ErrSeq = errors.New("wire: invalid sequence number or range")
	// ErrTooLarge is returned by encoders when a message or frame cannot
	// fit the configured datagram size.
	ErrTooLarge = errors.New("wire: message or frame too large")
)
