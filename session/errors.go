package session

import "errors"

// ErrStopped is a Recompute's Result.Err when its stop channel was
// closed (the node is closing). Finish answers Refused without counting
// a failure.
var ErrStopped = errors.New("session: replay recompute stopped (closing)")
