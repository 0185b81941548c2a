package bench

import "errors"

// Sentinel errors. Functions wrap them with detail (line numbers, values),
// so test with errors.Is.
var (
	// ErrNoHeader is returned by ReadHGRM when the input has no
	// percentile-distribution header line ("Value Percentile TotalCount
	// 1/(1-Percentile)"), for example an empty file or a file of another kind.
	ErrNoHeader = errors.New("bench: no percentile distribution header")
	// ErrMalformed is returned by ReadHGRM for a row or footer it cannot
	// read: a field that is not a number, a percentile outside 0..1, a
	// negative value or count, or rows that go backwards.
	ErrMalformed = errors.New("bench: malformed percentile distribution")
	// ErrTooLarge is returned by ReadHGRM when a line is longer than
	// HGRMLineBytesMax or the file has more than HGRMRowsMax rows: the input
	// is not a percentile distribution a histogram could have produced.
	ErrTooLarge = errors.New("bench: percentile distribution too large")
	// ErrConfig is returned for a configuration or argument that cannot be
	// used (PingPong's config, an empty Compare, a plot path without a known
	// extension).
	ErrConfig = errors.New("bench: bad configuration")
	// ErrLost is returned by PingPong when at least one round trip got no
	// reply within its ReplyTimeout; the result still holds what was measured.
	ErrLost = errors.New("bench: round trips lost")
)
