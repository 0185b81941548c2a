package arbiter

import (
	"errors"
	"fmt"
)

// The seam between a node and whatever grants its lease. A node runs a
// Keeper and one Backend: the UDP witness (package witness) or an etcd
// cluster (package etcdarb). Both speak the types below, so the node's
// lease logic, and every backend, depends on this package only, never on
// another backend.

// ReplyKind says what an arbiter answered.
type ReplyKind uint8

const (
	// ReplyNone is the zero value: no reply.
	ReplyNone ReplyKind = iota
	// ReplyGrant grants the lease: Epoch, DurationNs, the in-sync set.
	ReplyGrant
	// ReplyDeny refuses it: Holder, Epoch, RemainingNs, the in-sync set.
	ReplyDeny
	// ReplyInfo answers a query (UDP witness only): Holder, Epoch,
	// RemainingNs, the in-sync set. It is not for a keeper.
	ReplyInfo
)

var replyKindNames = [...]string{"none", "grant", "deny", "info"}

func (k ReplyKind) String() string {
	if int(k) < len(replyKindNames) {
		return replyKindNames[k]
	}
	return fmt.Sprintf("ReplyKind(%d)", uint8(k))
}

// Reply is an arbiter's answer to a keeper's request (or to a query), in
// core types, whichever backend produced it.
type Reply struct {
	Kind ReplyKind
	// Witness is the node ID the UDP witness stamped (informational; 0
	// from other backends).
	Witness uint32
	// RequestID is the echoed request ID.
	RequestID uint64
	// Epoch is the granted epoch (grant), or the highest epoch issued
	// (deny, info).
	Epoch uint64
	// Holder is the live holder (deny, info; NodeNone if none).
	Holder NodeID
	// DurationNs is the granted duration (grant only; > 0).
	DurationNs int64
	// RemainingNs is the live lease's time left, or with no holder the
	// arbiter's restart quarantine left (deny, info; 0 when unknown).
	RemainingNs int64
	// InSyncVersion and Members are the in-sync set in force at the
	// arbiter when it decided (grant, deny, info). A resend answered from
	// a cache repeats an older set, so a node adopts a set only with a
	// version above the one it has.
	InSyncVersion uint64
	Members       InSyncSet
	// Run (deny to the last holder): how many of the newest epochs were
	// all granted to the node (Decision.Run); 0 when unknown.
	Run uint64
	// History is the cluster's history id the arbiter pinned (0: none
	// yet, or a backend that pins none): a node whose directory holds
	// another refuses to lead or acknowledge (replica.Identity).
	History uint64
}

// Granted reports whether r is a grant.
func (r *Reply) Granted() bool { return r.Kind == ReplyGrant }

// Deliver passes a grant or deny to the keeper (OnGrant or OnDeny with the
// echoed request ID) and returns what the keeper returned: whether it used
// the reply. An info (or no reply) is not for a keeper and returns false.
func (r *Reply) Deliver(k *Keeper) bool {
	switch r.Kind {
	case ReplyGrant:
		return k.OnGrant(r.RequestID, r.Epoch, r.DurationNs)
	case ReplyDeny:
		if !k.OnDeny(r.RequestID, r.Holder, r.Epoch, r.RemainingNs) {
			return false
		}
		k.lastDeny.run = r.Run
		return true
	}
	return false
}

// ErrProposal is returned by NewInSyncProposal (and so by every backend's
// ProposeInSync) for a proposal no primary can make: base version 0 or
// more than MaxInSyncMembers members.
var ErrProposal = errors.New("arbiter: invalid in-sync proposal")

// InSyncProposal is a primary's proposed in-sync set, sent with a renew:
// the set replaces the arbiter's if BaseVersion is the version in force
// (compare-and-set, judged like Arbiter.RenewWithInSync). The zero value
// proposes nothing.
type InSyncProposal struct {
	// BaseVersion is the version the proposal replaces; 0 means no
	// proposal (every granted version is at least 1).
	BaseVersion uint64
	// Members[:N] is the proposed set, any order, at most
	// MaxInSyncMembers, never the proposer.
	N       int
	Members [MaxInSyncMembers]NodeID
	// Epoch is the keeper's epoch when the proposal was made: only a
	// renew of that epoch carries it (Take).
	Epoch uint64
}

// Take hands the proposal held in *p to req, the keeper's next request:
// a renew of the epoch it was made under takes it and empties *p; a
// renew of another epoch drops it (a primary that made it required its
// additions for that epoch only, replica.InSync.StartTerm, so no
// arbiter may accept it under another); an acquire leaves it for the
// next renew and takes nothing.
func (p *InSyncProposal) Take(req Request) InSyncProposal {
	if req.Kind != RequestRenew {
		return InSyncProposal{}
	}
	q := *p
	*p = InSyncProposal{}
	if q.Epoch != req.Epoch {
		return InSyncProposal{}
	}
	return q
}

// NewInSyncProposal checks and copies a proposal: baseVersion 0 or more
// than MaxInSyncMembers members is refused with ErrProposal; the arbiter
// judges the rest (duplicates, NodeNone, the proposer itself). It does not
// allocate.
func NewInSyncProposal(baseVersion uint64, members []NodeID) (InSyncProposal, error) {
	if baseVersion == 0 || len(members) > MaxInSyncMembers {
		return InSyncProposal{}, fmt.Errorf("%w: on version %d with %d members", ErrProposal, baseVersion, len(members))
	}
	p := InSyncProposal{BaseVersion: baseVersion, N: len(members)}
	copy(p.Members[:], members)
	return p, nil
}

// Backend is a node's side of whatever grants its lease, wrapping the
// node's Keeper. The node calls it under its own lock, from the goroutine
// that owns the keeper; no method may block.
type Backend interface {
	// Tick asks the keeper for a due request (Keeper.Tick(nowNs); nowNs
	// is read just before the call) and sends it without blocking. A
	// backend whose replies arrive asynchronously delivers those that
	// arrived since the last Tick to the keeper (Reply.Deliver), then
	// passes each to deliver, in the order they arrived. A backend whose
	// replies arrive on the node's own socket (the UDP witness) delivers
	// none here.
	Tick(nowNs int64, deliver func(r Reply))
	// ProposeInSync attaches an in-sync proposal to the next renew Tick
	// produces: it replaces an earlier proposal not yet sent, an acquire
	// does not consume it, it is sent once, and only on a renew of the
	// keeper's epoch when it was made (InSyncProposal.Take). An invalid proposal is refused
	// with an error matching ErrProposal, keeping any earlier one.
	ProposeInSync(baseVersion uint64, members []NodeID) error
	// Release sends a keeper's release request (Keeper.Release) without
	// blocking: the arbiter ends the lease when it arrives. It gets no
	// reply; a release that is lost or fails costs only the wait for the
	// lease to run out. Close finishes a release under way first, within
	// the backend's own request timeout. A Declined release (Link.Release)
	// also undoes the grant where the arbiter's rules allow it
	// (Arbiter.Decline); a backend that cannot undo it ends the lease as
	// for any release, which is safe: the previous holder then waits for
	// an operator (seqbus witness override).
	Release(req Request)
	// Close releases the backend's resources; a lease not released is
	// left to expire.
	Close() error
}
