package arbiter

import (
	"fmt"
	"math"
)

// NodeID names a node in the cluster. NodeNone (0) is "nobody": it is never
// granted a lease and is what Status and Decision report when no lease is
// live.
type NodeID uint32

// NodeNone is the invalid node ID, meaning "nobody".
const NodeNone NodeID = 0

// DenyReason says why a request was refused. ReasonNone means granted.
type DenyReason uint8

// Deny reasons, in the order Acquire and Renew check them.
const (
	// ReasonNone: the request was granted.
	ReasonNone DenyReason = iota
	// ReasonInvalidNode: the request came from NodeNone.
	ReasonInvalidNode
	// ReasonQuarantine: the arbiter restarted less than one lease duration
	// ago and may not grant to anyone; RemainingNs is the time left.
	ReasonQuarantine
	// ReasonHeld: Acquire from a node while another node holds a live
	// lease; Holder and RemainingNs say who and for how long.
	ReasonHeld
	// ReasonNotHolder: Renew from a node that does not hold the lease.
	ReasonNotHolder
	// ReasonExpired: Renew from the last holder with its epoch, but at or
	// after expiry. The node must Acquire again (and gets a new epoch).
	ReasonExpired
	// ReasonEpochMismatch: Renew from the live holder with an epoch other
	// than the current one (a delayed request from an earlier term).
	ReasonEpochMismatch
	// ReasonEpochExhausted: no epoch is left to grant (the highest epoch is
	// math.MaxUint64, which only a corrupted restore can produce).
	ReasonEpochExhausted
)

var denyReasonNames = [...]string{"granted", "invalid node", "quarantine", "held", "not holder", "expired", "epoch mismatch", "epoch exhausted"}

func (r DenyReason) String() string {
	if int(r) < len(denyReasonNames) {
		return denyReasonNames[r]
	}
	return fmt.Sprintf("DenyReason(%d)", uint8(r))
}

// Decision is the arbiter's answer to Acquire or Renew. The witness runtime
// turns it into a LEASE_GRANT or LEASE_DENY reply, obeying PersistEpoch.
type Decision struct {
	// Granted is true when the requester now holds the lease.
	Granted bool
	// Reason says why the request was refused (ReasonNone when granted).
	Reason DenyReason
	// Holder is the live holder after the decision: the requester on a
	// grant, the other node on a deny, NodeNone when no lease is live.
	Holder NodeID
	// Epoch is the holder's epoch on a grant; on a deny it is the highest
	// epoch the arbiter has issued, so a keeper learns that older epochs
	// are dead.
	Epoch uint64
	// ExpiresAtNs is when the live lease ends on the arbiter's clock (0 when
	// no lease is live). The lease is live while nowNs < ExpiresAtNs.
	ExpiresAtNs int64
	// RemainingNs is ExpiresAtNs - nowNs for a live lease (on a grant this
	// is the full lease duration, which the reply carries as the granted
	// duration); during quarantine it is the quarantine left; else 0.
	RemainingNs int64
	// PersistEpoch is set on every grant of a NEW epoch. Ordering rule: the
	// witness runtime MUST durably persist Epoch (the new highest epoch)
	// BEFORE it sends the grant, and must not send the grant if the write
	// fails. Otherwise a crash after sending would restore an older highest
	// epoch and the same epoch could be granted to two holders, which no
	// fence can tell apart. An unsent grant is harmless: the lease simply
	// goes unused and expires. Extensions of a live lease keep the epoch
	// and leave PersistEpoch false.
	PersistEpoch bool
}

// Status is the answer to Query: who leads, at which epoch, for how long.
type Status struct {
	// Holder is the live holder, or NodeNone when no lease is live.
	Holder NodeID
	// Epoch is the highest epoch issued (the holder's epoch while a lease
	// is live); 0 if none was ever issued.
	Epoch uint64
	// ExpiresAtNs and RemainingNs describe the live lease (0 when none).
	ExpiresAtNs int64
	RemainingNs int64
	// QuarantineRemainingNs is the time left before the arbiter grants
	// again after a Restore (0 when not quarantined).
	QuarantineRemainingNs int64
}

// Arbiter is the witness's lease core: at most one live lease, a fencing
// epoch that grows by one with every new grant, and a quarantine after a
// restart. It does no I/O and reads no clock; every method takes the
// witness's monotonic time in nanoseconds. It is not safe for concurrent
// use.
//
// Time that goes backwards (a caller bug; a monotonic clock cannot) is
// clamped to the latest time seen rather than trusted, so a lease can never
// shrink and the arbiter keeps answering.
type Arbiter struct {
	leaseDurationNs int64
	// holder and expiresAtNs describe the last grant; it is live while
	// holder != NodeNone && nowNs < expiresAtNs.
	holder      NodeID
	expiresAtNs int64
	// epochHighest is the highest epoch issued (or restored).
	epochHighest uint64
	// quarantined is true from Restore until quarantineUntilNs.
	quarantined       bool
	quarantineUntilNs int64
	// lastNowNs is the latest time seen, for clamping.
	lastNowNs int64
}

// NewArbiter returns an arbiter with no lease and epoch 0, granting leases
// of cfg.LeaseDurationNs. A witness that has persisted state must call
// Restore before answering anything.
func NewArbiter(cfg Config) (*Arbiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Arbiter{leaseDurationNs: cfg.LeaseDurationNs, lastNowNs: math.MinInt64}, nil
}

// Restore is called once, after a restart, with the highest epoch the
// witness had persisted. The arbiter cannot know who held the lease nor when
// it ends, only that it ends within one lease duration; so it grants nothing
// to anyone (the old holder included) until nowNs + LeaseDurationNs, and
// then grants highestEpoch+1, +2, .... Calling it on a running arbiter is
// also safe: the live lease is dropped and covered by the quarantine, which
// outlasts it.
func (a *Arbiter) Restore(highestEpoch uint64, nowNs int64) {
	nowNs = a.observe(nowNs)
	a.epochHighest = max(a.epochHighest, highestEpoch)
	a.holder = NodeNone
	a.expiresAtNs = 0
	a.quarantined = true
	a.quarantineUntilNs = addSaturating(nowNs, a.leaseDurationNs)
}

// Acquire asks for the lease for node. With no live lease (and no
// quarantine) it grants a new epoch (highest + 1) to node; if node already
// holds the live lease it extends it under the same epoch; otherwise it
// refuses and says who holds it and for how long.
func (a *Arbiter) Acquire(node NodeID, nowNs int64) Decision {
	nowNs = a.observe(nowNs)
	if node == NodeNone {
		return a.deny(ReasonInvalidNode, nowNs)
	}
	if a.inQuarantine(nowNs) {
		return a.deny(ReasonQuarantine, nowNs)
	}
	if a.live(nowNs) {
		if a.holder != node {
			return a.deny(ReasonHeld, nowNs)
		}
		return a.extend(nowNs)
	}
	if a.epochHighest == math.MaxUint64 {
		return a.deny(ReasonEpochExhausted, nowNs)
	}
	a.epochHighest++
	a.holder = node
	a.expiresAtNs = addSaturating(nowNs, a.leaseDurationNs)
	d := a.granted(nowNs)
	d.PersistEpoch = true
	return d
}

// Renew extends the lease of node, only if node is the live holder, epoch
// is its current epoch, and nowNs is strictly before expiry. A lease that
// has expired cannot be renewed (even if nobody took it since): the node
// must Acquire and gets a new epoch.
func (a *Arbiter) Renew(node NodeID, epoch uint64, nowNs int64) Decision {
	nowNs = a.observe(nowNs)
	switch {
	case node == NodeNone:
		return a.deny(ReasonInvalidNode, nowNs)
	case a.inQuarantine(nowNs):
		return a.deny(ReasonQuarantine, nowNs)
	case !a.live(nowNs):
		if a.holder == node && epoch == a.epochHighest {
			return a.deny(ReasonExpired, nowNs)
		}
		return a.deny(ReasonNotHolder, nowNs)
	case a.holder != node:
		return a.deny(ReasonNotHolder, nowNs)
	case epoch != a.epochHighest:
		return a.deny(ReasonEpochMismatch, nowNs)
	}
	return a.extend(nowNs)
}

// Query reports who holds the lease at nowNs.
func (a *Arbiter) Query(nowNs int64) Status {
	nowNs = a.observe(nowNs)
	s := Status{Epoch: a.epochHighest}
	if a.inQuarantine(nowNs) {
		s.QuarantineRemainingNs = a.quarantineUntilNs - nowNs
	}
	if a.live(nowNs) {
		s.Holder = a.holder
		s.ExpiresAtNs = a.expiresAtNs
		s.RemainingNs = a.expiresAtNs - nowNs
	}
	return s
}

// extend restarts the live lease's duration from nowNs. max keeps a lease
// from ever shrinking, which clamped time already guarantees; it is cheap
// insurance for the invariant every node's view depends on.
func (a *Arbiter) extend(nowNs int64) Decision {
	a.expiresAtNs = max(a.expiresAtNs, addSaturating(nowNs, a.leaseDurationNs))
	return a.granted(nowNs)
}

func (a *Arbiter) granted(nowNs int64) Decision {
	return Decision{
		Granted:     true,
		Holder:      a.holder,
		Epoch:       a.epochHighest,
		ExpiresAtNs: a.expiresAtNs,
		RemainingNs: a.expiresAtNs - nowNs,
	}
}

func (a *Arbiter) deny(reason DenyReason, nowNs int64) Decision {
	d := Decision{Reason: reason, Epoch: a.epochHighest}
	switch {
	case a.live(nowNs):
		d.Holder = a.holder
		d.ExpiresAtNs = a.expiresAtNs
		d.RemainingNs = a.expiresAtNs - nowNs
	case a.inQuarantine(nowNs):
		d.RemainingNs = a.quarantineUntilNs - nowNs
	}
	return d
}

func (a *Arbiter) live(nowNs int64) bool {
	return a.holder != NodeNone && nowNs < a.expiresAtNs
}

func (a *Arbiter) inQuarantine(nowNs int64) bool {
	if a.quarantined && nowNs >= a.quarantineUntilNs {
		a.quarantined = false
	}
	return a.quarantined
}

func (a *Arbiter) observe(nowNs int64) int64 {
	if nowNs < a.lastNowNs {
		return a.lastNowNs
	}
	a.lastNowNs = nowNs
	return nowNs
}
