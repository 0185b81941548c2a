package replica

import "github.com/seqbus/seqbus/arbiter"

// Lease is the read-only view of the lease keeper the decisions need
// (*arbiter.Keeper implements it). Decisions query it; they never change
// it.
type Lease interface {
	// MayLead reports whether the lease, as the keeper sees it, may be
	// used at nowNs.
	MayLead(nowNs int64) bool
	// Epoch is the epoch of the keeper's lease view.
	Epoch() uint64
	// LastDeny is the latest refusal: the holder it named, the newest
	// epoch it named.
	LastDeny() (holder arbiter.NodeID, epoch uint64, remainingNs int64)
	// LastDenyRun is how many of the newest epochs, up to the one the
	// latest refusal named, the arbiter said were all granted to this
	// node (0: unknown).
	LastDenyRun() uint64
}

var _ Lease = (*arbiter.Keeper)(nil)

// Leadership is what the lease asks of a node, decided between batches
// and carried out by the runtime in the order of its fields' comments.
type Leadership uint8

const (
	// Stay: nothing changes.
	Stay Leadership = iota
	// Promote: a standby was granted a newer epoch (Decision.Epoch): it
	// makes what it applied durable, then leads from applied+1 and
	// announces NEW_EPOCH.
	Promote
	// NewTerm: a primary was granted a newer epoch of its own (its lease
	// lapsed at the witness and was granted to it again): a new term of
	// the same process, announced, never a step-down; nobody led in
	// between, so queued outputs are kept.
	NewTerm
	// StepDown: a refusal names a newer epoch (Decision.Epoch) held by
	// another node: stop sequencing and releasing, drop queued outputs,
	// follow as a standby.
	StepDown
	// LeaseLost: the lease is not held (lapsed or not yet renewed):
	// releases stop and queued outputs are dropped (clients resend);
	// the node still leads its epoch and may hold the lease again.
	LeaseLost
	// LeaseRegained: the lease is held again; releases resume.
	LeaseRegained
)

var leadershipNames = [...]string{"stay", "promote", "new-term", "step-down", "lease-lost", "lease-regained"}

func (l Leadership) String() string {
	if int(l) < len(leadershipNames) {
		return leadershipNames[l]
	}
	return "leadership?"
}

// Decision is a leadership change and the epoch it concerns.
type Decision struct {
	Do    Leadership
	Epoch uint64
}

// PrimaryLease decides what a primary of self leading epoch does with the
// lease as k sees it at nowNs; held is whether its gate holds the lease
// now. It changes nothing.
func PrimaryLease(k Lease, self arbiter.NodeID, epoch uint64, held bool, nowNs int64) Decision {
	mayLead := k.MayLead(nowNs)
	if k.Epoch() > epoch && mayLead {
		return Decision{Do: NewTerm, Epoch: k.Epoch()}
	}
	// A refusal that names a newer epoch deposes us, unless that epoch is
	// provably our own and nobody else's: the refusal names us as its
	// holder (a grant that has not reached the keeper yet), or it names
	// no live holder and the newest epoch issued is the one right after
	// ours, which our keeper was granted (a grant that reached it only
	// after its lease had run out: a primary paused past it), or every
	// epoch after ours was granted to us, as the refusal says (new terms
	// of ours whose grants were lost). Either way
	// nobody else can have led since our epoch, and MayLead is false
	// meanwhile, so nothing is released; the next grant is a new term of
	// ours or a refusal naming another holder. Where epochs were issued
	// in between that we never held, we step down.
	if holder, denied, _ := k.LastDeny(); denied > epoch && holder != self && !ownNextEpoch(k, epoch, holder, denied) {
		return Decision{Do: StepDown, Epoch: denied}
	}
	switch now := mayLead && k.Epoch() == epoch; {
	case now == held:
		return Decision{Do: Stay, Epoch: epoch}
	case now:
		return Decision{Do: LeaseRegained, Epoch: epoch}
	default:
		return Decision{Do: LeaseLost, Epoch: epoch}
	}
}

// ownNextEpoch reports whether a refusal naming holder and epoch denied
// leaves only epochs of this node's own after epoch, with no live holder:
// the newest, denied, was granted to our keeper, and it is either the one
// right after ours or the arbiter says every epoch from epoch+1 to it was
// granted to this node (LastDenyRun: grants lost on the way, seed
// 2323172). Nobody else has led after epoch.
func ownNextEpoch(k Lease, epoch uint64, holder arbiter.NodeID, denied uint64) bool {
	return holder == arbiter.NodeNone && k.Epoch() == denied && (denied == epoch+1 || k.LastDenyRun() >= denied-epoch)
}

// StandbyLease decides whether a standby following epoch promotes.
func StandbyLease(k Lease, epoch uint64, nowNs int64) Decision {
	if k.MayLead(nowNs) && k.Epoch() > epoch {
		return Decision{Do: Promote, Epoch: k.Epoch()}
	}
	return Decision{Do: Stay, Epoch: epoch}
}

// MayRelease is the query a primary asks before it accepts a command or
// releases an output: its gate holds the lease and the lease still holds
// at nowNs (a primary resumed after a pause must not release acks that
// queued while its lease ran out). It changes nothing: when the lease has
// lapsed, the runtime carries out PrimaryLease's LeaseLost after the
// batch. k nil is a static primary (no witness), which always may.
func MayRelease(k Lease, held bool, nowNs int64) bool {
	if k == nil {
		return true
	}
	return held && k.MayLead(nowNs)
}

// FirstTermInSyncVersion is the in-sync version of an arbiter's first
// term: every grant and every change of the set raises the version from
// 0 (a new witness or etcd prefix; an operator's seqbus witness override
// --epoch, which starts the history over, also leaves 0).
const FirstTermInSyncVersion = 1

// MayLeadTerm is whether a node granted the lease of epoch with the
// in-sync set at inSyncVersion, of members members, may lead: always,
// unless its directory is new (it has never led nor caught up with a
// primary, and acknowledged nothing: storage.Storage.NewDirectory) and
// some node may hold a history. None can in the arbiter's first term,
// nor in the second when the set is still empty: the first term's holder
// granted again before it ever added a standby (a grant lost for a whole
// lease, a holder that failed before its first pass; the simulator found
// a new cluster halted for good by a witness crash right after its first
// grant). Nor while the version still equals the epoch with the set
// empty: the version grows with every term and every change of the set,
// the epoch with every term, from the same 0, so no change of the set
// was ever accepted, no standby was ever in sync, and with the set empty
// only the first holder was ever granted again; this is it, granted term
// after term (grants lost or late for whole leases: the simulator found
// a new cluster's only holder declining its fourth term, seed 2872666).
// A witness whose epoch an operator rewrote starts the version at 0
// below the epoch, and an etcd arbiter's epochs are revisions, so there
// the rule falls back to the first two terms. A new node any other term
// is granted was taken for a member, or the holder of a term that added
// one, only because its directory was replaced or wiped since: leading
// would start the history over and un-happen everything released
// before, so it declines. (A holder that only ever ran alone, released
// and then lost its directory took the only copy with it: its next term
// starts over, as it did before the rule.)
func MayLeadTerm(newDirectory bool, inSyncVersion, epoch uint64, members int) bool {
	switch {
	case !newDirectory || inSyncVersion == FirstTermInSyncVersion:
		return true
	case members != 0:
		return false
	}
	return inSyncVersion == FirstTermInSyncVersion+1 || (inSyncVersion == epoch && epoch > FirstTermInSyncVersion)
}

// Decline is why a node granted the lease gives it back unled
// (DeclineLead); the arbiter may undo such a grant (arbiter.Decline).
type Decline uint8

const (
	// LeadGranted: nothing refuses; the node leads.
	LeadGranted Decline = iota
	// DeclineNewDirectory: MayLeadTerm refuses.
	DeclineNewDirectory
	// DeclineForeign: the directory holds another history
	// (Identity.Foreign). Such a node asks for no lease once it knows,
	// but a request that left before may still be granted.
	DeclineForeign
)

// DeclineLead is whether a node granted the lease of epoch must give it
// back unled, and why: its directory holds another history, or
// MayLeadTerm refuses its new directory the term.
func DeclineLead(foreign, newDirectory bool, inSyncVersion, epoch uint64, members int) Decline {
	switch {
	case foreign:
		return DeclineForeign
	case !MayLeadTerm(newDirectory, inSyncVersion, epoch, members):
		return DeclineNewDirectory
	}
	return LeadGranted
}

// WantLead is whether a node asks the arbiter for the lease: only with
// its whole state at hand and a disk that works. A node whose journal
// failed, or whose disk has stalled (DiskWatch), must not hold the lease;
// a node rebuilding a journal it set aside has no history to lead with
// until it caught up; a standby fetching a snapshot has none either.
func WantLead(diskUnusable, refetching, primary, fetching bool) bool {
	return !diskUnusable && !refetching && (primary || !fetching)
}
