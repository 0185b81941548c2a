package etcdarb

import "errors"

// Sentinel errors. Match them with errors.Is; they are returned wrapped,
// with detail.
var (
	// ErrConfig is returned by New when a Config field is out of its
	// documented range (no endpoints, NodeNone, a lease that is not
	// positive, a prefix that is not an absolute key path).
	ErrConfig = errors.New("etcdarb: invalid configuration")

	// ErrUnreachable is returned by New when no endpoint answered within
	// DialTimeoutNs. The message names the endpoints tried.
	ErrUnreachable = errors.New("etcdarb: etcd unreachable")

	// ErrCorruptValue is returned by Query, and counted in
	// Stats.CorruptValues by the worker, when a key under the prefix holds
	// a value this package never writes (not a node ID, an in-sync set
	// that is unsorted, duplicated, too large or contains the last holder,
	// a leader key without a lease). Nothing is granted on such a value:
	// it means another writer shares the key space, and guessing would
	// risk two leaders.
	ErrCorruptValue = errors.New("etcdarb: corrupt value in etcd")

	// ErrClosed is returned by Query after Close.
	ErrClosed = errors.New("etcdarb: client closed")
)
