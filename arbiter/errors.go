package arbiter

import (
	"errors"
	"strconv"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrStaleEpoch is matched (through errors.Is) by the *Stale error that
	// Fence.Accept returns when an epoch is older than the highest one the
	// fence has accepted: the sender was deposed and must not be obeyed.
	ErrStaleEpoch = errors.New("arbiter: stale epoch")

	// ErrInvalidConfig is returned (wrapped, with detail) by NewArbiter and
	// NewKeeper when a Config field is out of its documented range, or when
	// a keeper is given NodeNone as its identity.
	ErrInvalidConfig = errors.New("arbiter: invalid config")

	// ErrInvalidState is returned (wrapped, with detail) by
	// PersistentState.Validate and Restore when a persisted record breaks
	// the in-sync set's invariants. Restore then changes nothing.
	ErrInvalidState = errors.New("arbiter: invalid persistent state")

	// ErrOverride is returned (wrapped, with detail) by OverrideInSync
	// and RewriteEpoch when an operator's override would change nothing
	// or break a rule (an epoch that does not grow, an invalid set).
	ErrOverride = errors.New("arbiter: override refused")
)

// Stale is the error Fence.Accept returns for an epoch older than the
// highest accepted. It carries both numbers so the caller can log who was
// refused and why; errors.As extracts it, errors.Is(err, ErrStaleEpoch)
// matches it.
type Stale struct {
	// Epoch is the refused epoch.
	Epoch uint64
	// Highest is the highest epoch the fence had accepted when it refused.
	Highest uint64
}

// Error implements error. strconv rather than fmt keeps the message cheap:
// a deposed primary may keep sending old-epoch frames for a while.
func (e *Stale) Error() string {
	b := make([]byte, 0, 64)
	b = append(b, "arbiter: stale epoch "...)
	b = strconv.AppendUint(b, e.Epoch, 10)
	b = append(b, " (highest accepted "...)
	b = strconv.AppendUint(b, e.Highest, 10)
	b = append(b, ')')
	return string(b)
}

// Is makes errors.Is(err, ErrStaleEpoch) true for every *Stale.
func (e *Stale) Is(target error) bool { return target == ErrStaleEpoch }
