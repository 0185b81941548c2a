package replica

// Identity is which history a node's directory holds: a random id made
// by the first node to lead the history (a fresh cluster's first
// primary, or a node of a directory from before history ids that leads),
// written into every directory that follows it, and stamped by the
// primary on its HEARTBEAT and NEW_EPOCH and by a standby on its ACK.
//
// Epoch numbers are not an identity: two clusters started apart both
// lead epoch 1, so a standby restarted on a copy of the other cluster's
// directory passes every epoch check. One whose journal is longer than
// the primary's history is caught by Leader.Ack (AckAhead); one whose
// journal is shorter acknowledged seqs the primary did sequence, was
// counted in sync, and could be promoted with another history until its
// first state-hash check. With ids, a primary refuses every ack of
// another history (AckForeign), and a standby that hears a primary of
// another history latches Foreign: it acknowledges nothing and asks for
// no lease for the rest of its run, and its operator empties its
// directory. An id of 0 is none (a new directory before it follows
// anyone, or one from before ids): nothing is judged against it, and a
// node without one takes the first it hears from a primary it follows.
//
// A standby applies nothing until it is Confirmed: a directory restarted
// at its primary's epoch needs no NEW_EPOCH, and would otherwise append
// the primary's records to another history's before the first HEARTBEAT
// told it whose they are (it asks for one: wire.Ack.AskHistory).
//
// No clock, socket, file, lock or goroutine: the runtime writes the id
// into the directory (Adopt's answer, then Adopted) and reads it back at
// start (Set).
type Identity struct {
	id uint64
	// confirmed: a primary of this history was heard this run.
	confirmed bool
	// foreign: a primary of another history was heard (Foreign);
	// heard is the last such id.
	foreign bool
	heard   uint64
	// refused counts the frames of another history judged.
	refused uint64
}

// IdentityVerdict is what Judge found.
type IdentityVerdict uint8

const (
	// SameHistory: the ids match, or one of them is 0 while ours is
	// known (a peer from before ids): nothing to do.
	SameHistory IdentityVerdict = iota
	// AdoptHistory: ours is unknown and a primary we follow has one:
	// the runtime records it durably, then calls Set.
	AdoptHistory
	// ForeignHistory: both are known and differ.
	ForeignHistory
)

// Set makes id this node's history id: read from the directory at start,
// or made at a first lead (a primary needs no confirmation).
func (i *Identity) Set(id uint64) { i.id = id }

// Adopted makes id, which a primary led (AdoptHistory) and the runtime
// recorded, this node's: confirmed.
func (i *Identity) Adopted(id uint64) { i.id, i.confirmed = id, true }

// Confirmed reports that a primary of this node's history was heard
// this run (or its id adopted): the standby may apply what it receives.
func (i *Identity) Confirmed() bool { return i.confirmed }

// ID is this node's history id (0: none yet).
func (i *Identity) ID() uint64 { return i.id }

// Judge compares the history id of a peer's frame with ours.
func (i *Identity) Judge(peer uint64) IdentityVerdict {
	switch {
	case peer == 0 || peer == i.id:
		return SameHistory
	case i.id == 0:
		return AdoptHistory
	}
	i.refused++
	return ForeignHistory
}

// HeardPrimary judges the history id of a frame from a primary (a
// HEARTBEAT or NEW_EPOCH): ours confirms it (Confirmed), another
// history's latches Foreign. first reports the first confirmation or the
// latch's first time (the runtime drains what waited, or logs it once).
func (i *Identity) HeardPrimary(peer uint64) (v IdentityVerdict, first bool) {
	switch v = i.Judge(peer); {
	case v == ForeignHistory:
		first = !i.foreign
		i.foreign, i.heard = true, peer
	case v == SameHistory && peer != 0:
		first = !i.confirmed
		i.confirmed = true
	}
	return v, first
}

// HeardArbiter judges the history id the arbiter pinned for the cluster
// (arbiter.Reply.History): another one than ours latches Foreign, as a
// primary's would; none, or ours, changes nothing (an arbiter's id is
// never adopted: only a primary's records make a directory its
// history's). first reports the latch's first time.
func (i *Identity) HeardArbiter(pinned uint64) (first bool) {
	if pinned == 0 || i.id == 0 || pinned == i.id {
		return false
	}
	i.refused++
	first = !i.foreign
	i.foreign, i.heard = true, pinned
	return first
}

// Foreign reports that a primary of another history was heard this run:
// the directory's records are not this cluster's, so the node must
// neither acknowledge (its acks would count another history in sync) nor
// lead. It stays latched until the process ends; the operator empties
// the directory and restarts the node, which then follows as new.
func (i *Identity) Foreign() bool { return i.foreign }

// Heard is the last other history's id heard (Foreign), for the log.
func (i *Identity) Heard() uint64 { return i.heard }

// Refused counts the frames Judge found of another history.
func (i *Identity) Refused() uint64 { return i.refused }
