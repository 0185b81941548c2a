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

// Deny reasons, in the order Acquire and Renew check them (except
// ReasonNotInSync, checked just before ReasonEpochExhausted; the values
// are fixed because counters are indexed by them). The last two only ever
// appear in Decision.InSyncReason.
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
	// ReasonNotInSync: Acquire of a free lease by a node that may not be
	// promoted: leases were granted before, and the node is neither in the
	// in-sync set nor the previous holder, so it may lack output the
	// previous holder released.
	ReasonNotInSync
	// ReasonInSyncVersion: only in Decision.InSyncReason. A renew's
	// proposal named a base version other than the current one (a stale
	// proposal); the renew itself was granted and the set is unchanged.
	ReasonInSyncVersion
	// ReasonInSyncInvalid: only in Decision.InSyncReason. A renew's
	// proposal had more than MaxInSyncMembers members, a duplicate,
	// NodeNone or the holder itself; the renew was granted, the set is
	// unchanged.
	ReasonInSyncInvalid
	// ReasonForeignHistory: the request named another history than the
	// one the arbiter pinned for the cluster (ForeignHistory): the node's
	// directory holds another cluster's records, or a copy of them.
	ReasonForeignHistory
)

var denyReasonNames = [...]string{
	"granted", "invalid node", "quarantine", "held", "not holder", "expired", "epoch mismatch", "epoch exhausted",
	"not in sync", "in-sync version", "in-sync invalid", "foreign history",
}

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
	// Persist is set whenever the epoch OR the in-sync set changed (a new
	// epoch, or an accepted proposal). The same ordering rule applies to
	// the whole PersistentState(): durable before the grant is sent, no
	// grant if the write fails. A set that was granted but not persisted
	// could, after a crash, let a node be promoted that the primary no
	// longer waited for. PersistEpoch implies Persist.
	Persist bool
	// InSyncVersion and Members are the in-sync set in force after the
	// decision (on a deny too, so a standby learns whether it may be
	// promoted). The runtime puts them in every grant, deny and info.
	InSyncVersion uint64
	Members       InSyncSet
	// History is the history id the arbiter has pinned for the cluster
	// (0: none yet), on every decision; the runtime puts it in replies.
	History uint64
	// Run, on a refusal to the last holder, is how many of the newest
	// epochs (Epoch-Run+1 through Epoch) were all granted to it; 0 when
	// the refusal goes to another node or nothing is known. A keeper that
	// holds Epoch learns from it that every epoch after the one it leads
	// was its own (replica.PrimaryLease), though the grants of those in
	// between never reached it.
	Run uint64
	// InSyncReason is ReasonNone unless a renew carried a proposal that was
	// refused (ReasonInSyncVersion or ReasonInSyncInvalid). A refused
	// proposal does not refuse the renew: the lease is what keeps the
	// primary leading, and the set it learns from InSyncVersion and
	// Members is the truth it must gate on.
	InSyncReason DenyReason
}

// PersistentState returns the record to write when Persist is set: the
// epoch, the in-sync version and set, and the holder (Persist is only ever
// set on a grant, so Holder is the last holder).
func (d *Decision) PersistentState() PersistentState {
	return PersistentState{Epoch: d.Epoch, InSyncVersion: d.InSyncVersion, LastHolder: d.Holder, Members: d.Members, History: d.History}
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
	// LastHolder is the holder of Epoch (NodeNone if none is known), who
	// may take the lease back after it lapses.
	LastHolder NodeID
	// InSyncVersion and Members are the in-sync set in force.
	InSyncVersion uint64
	Members       InSyncSet
}

// Arbiter is the witness's lease core: at most one live lease, a fencing
// epoch that grows by one with every new grant, a quarantine after a
// restart, and the in-sync set (Kafka's ISR): the standbys the primary
// waits for before it releases output, hence the only nodes besides the
// previous holder that have everything released and may be promoted. It does no I/O and reads no clock; every method takes the
// witness's monotonic time in nanoseconds. It is not safe for concurrent
// use.
//
// Time that goes backwards (a caller bug; a monotonic clock cannot) is
// clamped to the latest time seen rather than trusted, so a lease can never
// shrink and the arbiter keeps answering.
type Arbiter struct {
	leaseDurationNs int64
	// holder and expiresAtNs describe the last grant; it is live while
	// holder != NodeNone && nowNs < expiresAtNs. Restore clears holder
	// (the quarantine covers the lease it may have had).
	holder      NodeID
	expiresAtNs int64
	// termPrev and termLapsedNs: LastTerm.
	termPrev     NodeID
	termLapsedNs int64
	// epochHighest is the highest epoch issued (or restored).
	epochHighest uint64
	// lastHolder is the holder of epochHighest, kept across lapses and
	// restores: it had everything it released, so it may take the lease
	// back. hadHolder is lastHolder != NodeNone: a lease was granted (or
	// restored), so the fresh-cluster rule no longer applies.
	lastHolder NodeID
	hadHolder  bool
	// inSyncVersion and members are the in-sync set; members never holds
	// lastHolder.
	inSyncVersion uint64
	members       InSyncSet
	// termRequestID is the request ID of the ACQUIRE that started the
	// live holder's term (0: unknown, as after a Restore or through
	// Acquire). A repeat of exactly that request is the same process
	// asking again, never a restart.
	termRequestID uint64
	// quarantined is true from Restore until quarantineUntilNs.
	quarantined       bool
	quarantineUntilNs int64
	// lastNowNs is the latest time seen, for clamping.
	lastNowNs int64
	// runFrom is the first epoch of the last holder's run: every epoch
	// from it to epochHighest was granted to lastHolder (0: none known;
	// after a Restore only the restored epoch). A refusal to the last
	// holder says how long the run is (Decision.Run).
	runFrom uint64
	// undo is the last holder before the latest new term, kept from that
	// grant until its holder declines it (Decline) or renews it, or the
	// arbiter restores: the grant Decline may undo.
	undo struct {
		ok         bool
		lastHolder NodeID
	}
	// history is the cluster's history id (0: none yet), pinned by the
	// first granted request that named one (PinHistory) and persisted.
	history uint64
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

// Restore is called once, after a restart, with the state the witness had
// persisted. The arbiter cannot know whether the last holder's lease is
// still live, only that it ends within one lease duration; so until nowNs
// + LeaseDurationNs it grants nothing to anyone but a RENEW of
// state.Epoch by state.LastHolder (see Renew: only the process that was
// granted that epoch renews it, so it is the only node that can be
// leading), and then grants state.Epoch+1, +2, ... under the rules of
// Acquire, with the restored in-sync set and last holder. A record with
// LastHolder NodeNone (nothing granted, or an epoch-only record from before
// the in-sync set) lets anyone acquire after the quarantine. Calling it on
// a running arbiter is also safe: the live lease is dropped and covered by
// the quarantine; a record older than the arbiter's own state (by epoch,
// then version) never lowers it. An invalid record (see
// PersistentState.Validate) is refused with ErrInvalidState and changes
// nothing.
func (a *Arbiter) Restore(state PersistentState, nowNs int64) error {
	if err := state.Validate(); err != nil {
		return err
	}
	nowNs = a.observe(nowNs)
	if state.Epoch > a.epochHighest || (state.Epoch == a.epochHighest && state.InSyncVersion >= a.inSyncVersion) {
		a.epochHighest = state.Epoch
		a.inSyncVersion = state.InSyncVersion
		a.members = state.Members
		a.lastHolder = state.LastHolder
		a.hadHolder = state.LastHolder != NodeNone
		a.history = state.History
		a.runFrom = 0
		if a.hadHolder {
			a.runFrom = state.Epoch // only the restored epoch is known to be its
		}
	}
	a.holder = NodeNone
	a.expiresAtNs = 0
	a.termRequestID = 0
	a.undo.ok = false
	a.quarantined = true
	a.quarantineUntilNs = addSaturating(nowNs, a.leaseDurationNs)
	return nil
}

// Acquire asks for the lease for node. If node already holds the live
// lease it starts a new term (a new epoch: a running keeper renews, and
// acquires only when its process has no epoch in mind; see
// AcquireRequest). With no live lease (and no quarantine) it grants a new
// epoch (highest + 1) to node only if node may
// be promoted: no lease was ever granted (a fresh cluster), node is in the
// in-sync set, or node is the previous holder (it had everything it
// released). Otherwise it refuses with ReasonNotInSync; with an empty set
// only the previous holder may take the lease, because the primary ran
// alone and nobody else has what it released. On a grant node leaves the
// set (a primary is not its own standby), the previous holder does not
// join it (it must catch up and be proposed again), and the version grows
// by one. While another node holds a live lease it refuses and says who
// holds it and for how long.
func (a *Arbiter) Acquire(node NodeID, nowNs int64) Decision {
	return a.AcquireRequest(node, 0, nowNs)
}

// AcquireRequest is Acquire for the request requestID (0: unknown, which
// is Acquire). An ACQUIRE from the live holder starts a new term, except
// a repeat of the very request that started the live term (the same
// process retrying before the grant reached it, with the same ID): that
// is answered with the live term's grant, unextended and with nothing
// to persist. An older request ID from the live holder is refused with
// ReasonHeld (a delayed datagram of this term's process, or a restarted
// process whose IDs did not grow, which then waits the lease out). Either
// way the retried request never costs a new epoch.
func (a *Arbiter) AcquireRequest(node NodeID, requestID uint64, nowNs int64) Decision {
	nowNs = a.observe(nowNs)
	if node == NodeNone {
		return a.deny(node, ReasonInvalidNode, nowNs)
	}
	if a.inQuarantine(nowNs) {
		return a.deny(node, ReasonQuarantine, nowNs)
	}
	if a.live(nowNs) && a.holder != node {
		return a.deny(node, ReasonHeld, nowNs)
	}
	if a.live(nowNs) && requestID != 0 && a.termRequestID != 0 {
		switch {
		case requestID == a.termRequestID:
			return a.granted(nowNs)
		case requestID < a.termRequestID:
			return a.deny(node, ReasonHeld, nowNs)
		}
	}
	// An ACQUIRE from the live holder itself (a new request) starts a new
	// term rather than extending the old one: a running keeper renews its
	// epoch (even after its view lapsed) and acquires only when it has no
	// epoch in mind, most often because its process restarted, and a
	// restarted process must never lead an epoch it may already have used
	// (it could sequence seq 1.. again under an epoch whose seqs others
	// hold: sim bugs A and C).
	if a.hadHolder && node != a.lastHolder && !a.members.Contains(node) {
		return a.deny(node, ReasonNotInSync, nowNs)
	}
	if a.epochHighest == math.MaxUint64 {
		return a.deny(node, ReasonEpochExhausted, nowNs)
	}
	a.undo.ok, a.undo.lastHolder = a.hadHolder && a.lastHolder != node, a.lastHolder
	if !a.hadHolder || a.lastHolder != node || a.runFrom == 0 {
		a.runFrom = a.epochHighest + 1 // a new run starts with this grant
	}
	prevHolder, prevExpiresAtNs := NodeNone, int64(0)
	if a.hadHolder {
		prevHolder, prevExpiresAtNs = a.lastHolder, a.expiresAtNs
	}
	a.epochHighest++
	a.termRequestID = requestID
	a.holder = node
	a.lastHolder = node
	a.hadHolder = true
	a.members.remove(node)
	// The version grows with every new term even when the set is
	// unchanged (the previous holder taking its lease back), so a proposal
	// based on the previous term's set can never apply to this one.
	a.inSyncVersion++
	a.expiresAtNs = addSaturating(nowNs, a.leaseDurationNs)
	a.termPrev, a.termLapsedNs = prevHolder, 0
	switch {
	case prevHolder != NodeNone && prevExpiresAtNs == 0:
		a.termLapsedNs = -1 // restored: its lease's end is not known
	case prevHolder != NodeNone:
		a.termLapsedNs = max(nowNs-prevExpiresAtNs, 0)
	}
	d := a.granted(nowNs)
	d.PersistEpoch = true
	d.Persist = true
	return d
}

// LastTerm describes the lease the last new epoch followed: its holder
// (NodeNone when there was none) and how long before that grant it had
// ended. For the operator: a failover's new primary took over lapsedNs
// after the old lease ran out. After a restore the holder is the
// restored last holder, and lapsedNs is -1: when its lease ended is not
// known (the record keeps no time).
func (a *Arbiter) LastTerm() (prev NodeID, lapsedNs int64) { return a.termPrev, a.termLapsedNs }

// Renew extends the lease of node, only if node is the live holder, epoch
// is its current epoch, and nowNs is strictly before expiry. A lease that
// has expired cannot be renewed (even if nobody took it since): the node
// must Acquire and gets a new epoch.
//
// During the restart quarantine the last holder's renew of the restored
// epoch is granted at once, with that epoch, and ends the quarantine: the
// epoch was granted to that node alone and nothing has been granted
// since, and only the running process that was granted an epoch renews
// it (a restarted one acquires and gets a new epoch), so it is the only
// node that can be leading. Everyone else still waits the quarantine out.
func (a *Arbiter) Renew(node NodeID, epoch uint64, nowNs int64) Decision {
	nowNs = a.observe(nowNs)
	switch {
	case node == NodeNone:
		return a.deny(node, ReasonInvalidNode, nowNs)
	case a.inQuarantine(nowNs) && a.hadHolder && node == a.lastHolder && epoch == a.epochHighest && epoch != 0:
		a.quarantined = false
		a.holder = node
		a.expiresAtNs = nowNs
		return a.extend(nowNs)
	case a.inQuarantine(nowNs):
		return a.deny(node, ReasonQuarantine, nowNs)
	case !a.live(nowNs):
		if a.holder == node && epoch == a.epochHighest {
			return a.deny(node, ReasonExpired, nowNs)
		}
		return a.deny(node, ReasonNotHolder, nowNs)
	case a.holder != node:
		return a.deny(node, ReasonNotHolder, nowNs)
	case epoch != a.epochHighest:
		return a.deny(node, ReasonEpochMismatch, nowNs)
	}
	return a.extend(nowNs)
}

// Release ends the live lease of node at epoch now, before it would have
// run out: the holder gave it up (arbiter.Keeper.Release), having stopped
// leading before it asked, so the next Acquire may grant epoch+1 at once,
// under the usual rules (an in-sync member, or node itself again). It
// reports whether a lease ended; a release from anyone but the live
// holder, of another epoch, or during the restart quarantine changes
// nothing. Nothing is persisted: the epoch and the in-sync set are
// unchanged, and after a restart the quarantine covers the lease either
// way.
func (a *Arbiter) Release(node NodeID, epoch uint64, nowNs int64) bool {
	nowNs = a.observe(nowNs)
	if node == NodeNone || a.inQuarantine(nowNs) || !a.live(nowNs) || a.holder != node || epoch != a.epochHighest {
		return false
	}
	a.holder = NodeNone
	a.expiresAtNs = nowNs
	a.termRequestID = 0
	return true
}

// Decline undoes the grant of epoch to node, which refused to lead
// under it (a Declined release: its directory is new, replica.MayLeadTerm):
// the last holder is again the one before that grant, who still has
// everything released (node released nothing under epoch, and nothing
// was granted since), so it may take the lease back without an
// operator. The lease itself ends by Release, which the caller calls
// first. The in-sync set is unchanged: node left it with the grant and
// does not come back (it holds nothing). Decline reports whether the
// grant was undone; a decline of anything but the latest term, by anyone
// but its holder, after the holder renewed it (it may have led: a node
// declines on the pass the grant arrives, before any renew), after a
// restart (the grant's predecessor is not kept on disk), of a term that
// followed the same node's, or of the first term changes nothing. Nothing is persisted: after a restart the record names node,
// which only makes the arbiter stricter.
func (a *Arbiter) Decline(node NodeID, epoch uint64, nowNs int64) bool {
	a.observe(nowNs)
	if node == NodeNone || !a.undo.ok || a.lastHolder != node || epoch != a.epochHighest {
		return false
	}
	a.lastHolder = a.undo.lastHolder
	a.runFrom = 0 // the newest epoch is not the restored holder's
	a.undo.ok = false
	return true
}

// RenewWithInSync is Renew carrying the holder's proposal for the in-sync
// set: members (any order) replaces the set if baseVersion is the current
// version (compare-and-set), and then the version grows by one and the
// decision asks to Persist. The primary decides who has caught up; it may
// drop any member and add any node except itself. The proposal is
// considered only when the renew is granted, and a refused proposal does
// not refuse the renew: the decision is the renew's, with InSyncReason
// ReasonInSyncVersion (stale base) or ReasonInSyncInvalid (more than
// MaxInSyncMembers, a duplicate, NodeNone or the holder), and the set
// unchanged. Either way the decision carries the version and members in
// force, which the primary must adopt. A proposal equal to the current set
// changes nothing (no new version, nothing to persist). It does not
// allocate; members is only read.
func (a *Arbiter) RenewWithInSync(node NodeID, epoch, baseVersion uint64, members []NodeID, nowNs int64) Decision {
	d := a.Renew(node, epoch, nowNs)
	if !d.Granted {
		return d
	}
	proposed, ok := MakeInSyncSet(members, node)
	switch {
	case baseVersion != a.inSyncVersion:
		d.InSyncReason = ReasonInSyncVersion
	case !ok:
		d.InSyncReason = ReasonInSyncInvalid
	case proposed != a.members:
		a.members = proposed
		a.inSyncVersion++
		d.InSyncVersion = a.inSyncVersion
		d.Members = a.members
		d.Persist = true
	}
	return d
}

// ForeignHistory reports whether a request naming history (a node's
// directory's history id; 0: none yet) is of another history than the
// one pinned for the cluster: the runtime refuses it (DenyForeign)
// before deciding anything else. Epoch numbers are no identity: two
// clusters started apart lead the same epochs, and a node restarted on
// a copy of another cluster's directory is taken for an in-sync member
// by its node ID alone. A node with no id yet (a new directory) is not
// judged: replica.MayLeadTerm keeps it from leading a later term.
func (a *Arbiter) ForeignHistory(history uint64) bool {
	return history != 0 && a.history != 0 && history != a.history
}

// DenyForeign refuses node's request with ReasonForeignHistory. Nothing
// changes.
func (a *Arbiter) DenyForeign(node NodeID, nowNs int64) Decision {
	return a.deny(node, ReasonForeignHistory, a.observe(nowNs))
}

// PinHistory pins history as the cluster's after the granted decision d
// for a request naming it, if none is pinned yet (a fresh cluster, or a
// record from before history ids): d then asks to Persist, so the pin is
// durable before the grant leaves. The first holder of a fresh cluster
// asks with no id (its directory is new) and makes one as it leads: its
// next renew pins it. d carries the pinned id either way.
func (a *Arbiter) PinHistory(d *Decision, history uint64) {
	if d.Granted && a.history == 0 && history != 0 {
		a.history = history
		d.Persist = true
	}
	d.History = a.history
}

// History is the pinned history id (0: none yet).
func (a *Arbiter) History() uint64 { return a.history }

// Query reports who holds the lease at nowNs.
func (a *Arbiter) Query(nowNs int64) Status {
	nowNs = a.observe(nowNs)
	s := Status{Epoch: a.epochHighest, LastHolder: a.lastHolder, InSyncVersion: a.inSyncVersion, Members: a.members}
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
	a.undo.ok = false // a holder that renews may lead: its grant is no longer undone
	return a.granted(nowNs)
}

func (a *Arbiter) granted(nowNs int64) Decision {
	return Decision{
		Granted:       true,
		Holder:        a.holder,
		Epoch:         a.epochHighest,
		ExpiresAtNs:   a.expiresAtNs,
		RemainingNs:   a.expiresAtNs - nowNs,
		InSyncVersion: a.inSyncVersion,
		Members:       a.members,
		History:       a.history,
	}
}

func (a *Arbiter) deny(node NodeID, reason DenyReason, nowNs int64) Decision {
	d := Decision{Reason: reason, Epoch: a.epochHighest, InSyncVersion: a.inSyncVersion, Members: a.members, History: a.history}
	if a.hadHolder && node == a.lastHolder && a.runFrom != 0 && a.runFrom <= a.epochHighest {
		d.Run = a.epochHighest - a.runFrom + 1
	}
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
