package arbiter

import (
	"fmt"
	"time"
)

// Defaults. Each is configuration (Config), not protocol; the reasons below
// are why these values suit a venue on one LAN with 2-core boxes whose
// scheduler tick is 4 ms.
const (
	// DefaultLeaseDurationNs is 1 s. Failover detection takes about one
	// lease, so shorter is faster; but a lease must outlive ordinary hiccups
	// (GC pauses, a 4 ms scheduler tick, a lost datagram or three) or the
	// venue fails over spuriously. 1 s is 250 scheduler ticks and leaves
	// room for three renewals and a dozen retries before the view ends.
	DefaultLeaseDurationNs = int64(time.Second)

	// DefaultRenewIntervalNs is 250 ms: renewals sent at 250, 500 and 750 ms
	// all land before the view ends at 850 ms (lease minus margin), so two
	// consecutive lost renewals cost nothing. Four datagrams a second per
	// node is no load for the witness.
	DefaultRenewIntervalNs = int64(250 * time.Millisecond)

	// DefaultMarginNs is 150 ms, cut from the end of every lease view. It
	// covers clock-rate difference between node and witness (15 % of the
	// lease, where crystals differ by ~100 ppm), a release already in flight
	// when the view ends, and a pause between MayLead and the send.
	DefaultMarginNs = int64(150 * time.Millisecond)

	// DefaultRetryNs is 50 ms: the wait before resending an unanswered or
	// refused request. A LAN round trip is well under a millisecond, so 50
	// ms means "lost", and it allows about twelve retries between a failed
	// renewal at 250 ms and the end of the view, without flooding the
	// witness when a standby is waiting for a lease to lapse.
	DefaultRetryNs = int64(50 * time.Millisecond)
)

// Config is shared by the arbiter (which uses LeaseDurationNs) and the
// keeper (which uses all of it). All durations are on a monotonic clock.
type Config struct {
	// LeaseDurationNs is how long a grant lasts at the witness, from the
	// moment the witness processes the request. Must be > 0.
	LeaseDurationNs int64
	// RenewIntervalNs is how often a holding keeper renews, counted from
	// the send time of the request that produced its current view. Must be
	// > 0.
	RenewIntervalNs int64
	// MarginNs is cut from the end of the lease view: a node may lead only
	// strictly before SentAt + Duration - Margin. Must be >= 0 and below
	// LeaseDurationNs.
	MarginNs int64
	// RetryNs is the wait before resending an unanswered or refused
	// request. Must be > 0.
	RetryNs int64
}

// DefaultConfig returns the defaults above.
func DefaultConfig() Config {
	return Config{
		LeaseDurationNs: DefaultLeaseDurationNs,
		RenewIntervalNs: DefaultRenewIntervalNs,
		MarginNs:        DefaultMarginNs,
		RetryNs:         DefaultRetryNs,
	}
}

// Validate returns an error wrapping ErrInvalidConfig when a field is out of
// range. Besides the per-field ranges it requires that one renewal and one
// retry fit inside the usable part of the lease (RenewIntervalNs + RetryNs <
// LeaseDurationNs - MarginNs); otherwise a single lost datagram would end
// every lease.
func (c Config) Validate() error {
	switch {
	case c.LeaseDurationNs <= 0:
		return fmt.Errorf("%w: LeaseDurationNs %d must be > 0", ErrInvalidConfig, c.LeaseDurationNs)
	case c.RenewIntervalNs <= 0:
		return fmt.Errorf("%w: RenewIntervalNs %d must be > 0", ErrInvalidConfig, c.RenewIntervalNs)
	case c.RetryNs <= 0:
		return fmt.Errorf("%w: RetryNs %d must be > 0", ErrInvalidConfig, c.RetryNs)
	case c.MarginNs < 0 || c.MarginNs >= c.LeaseDurationNs:
		return fmt.Errorf("%w: MarginNs %d must be in [0, LeaseDurationNs %d)", ErrInvalidConfig, c.MarginNs, c.LeaseDurationNs)
	}
	usableNs := c.LeaseDurationNs - c.MarginNs
	if c.RenewIntervalNs >= usableNs || c.RetryNs >= usableNs-c.RenewIntervalNs {
		return fmt.Errorf("%w: RenewIntervalNs %d + RetryNs %d must be < LeaseDurationNs - MarginNs = %d",
			ErrInvalidConfig, c.RenewIntervalNs, c.RetryNs, usableNs)
	}
	return nil
}
