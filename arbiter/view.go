package arbiter

import "math"

// LeaseView is what a node knows about its own lease: the epoch it was
// granted, when it sent the request that was granted (its own monotonic
// clock, read BEFORE sending), and the duration the witness granted. The
// zero value is "no lease".
type LeaseView struct {
	Epoch      uint64
	SentAtNs   int64
	DurationNs int64
}

// MayLead reports whether a node holding view may act as leader (release
// outputs) at localNowNs: true only when the view holds an epoch and
//
//	SentAtNs <= localNowNs < SentAtNs + DurationNs - marginNs
//
// computed without overflow (the deadline saturates at math.MaxInt64) and
// without underflow (marginNs >= DurationNs leaves no usable lease, so the
// answer is false). Why it is safe: the witness started its lease no
// earlier than the request was sent, so with clocks running at equal rates
// the witness's lease outlasts the view; the margin absorbs rate
// differences up to marginNs/DurationNs. A negative margin would extend the
// view past the lease and a clock reading before SentAtNs means the clock
// went backwards; both answer false because the safe answer is to stop.
func MayLead(view LeaseView, localNowNs, marginNs int64) bool {
	if view.Epoch == 0 || marginNs < 0 || view.DurationNs <= marginNs || localNowNs < view.SentAtNs {
		return false
	}
	return localNowNs < addSaturating(view.SentAtNs, view.DurationNs-marginNs)
}

// addSaturating returns a + b clamped to math.MaxInt64. b must be >= 0,
// which every caller guarantees (durations are validated positive).
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
