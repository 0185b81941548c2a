package arbiter

import (
	"fmt"
	"math"
)

// An operator's way out of the in-sync rule's one dead end (rule 1 of
// docs/witness.md): the set is empty, or holds only nodes that are gone,
// and the last holder is lost for good, so no node may be promoted and
// the cluster waits. Both overrides change a stopped arbiter's
// PersistentState; the arbiter restored from it still quarantines for one
// lease and then grants a new epoch above every one used, so fencing
// holds. What the lost holder released that no promoted node received is
// lost: that is the operator's call, which is why the command asks for
// it in words (seqbus witness override --accept-loss).

// OverrideInSync returns state with allow as its in-sync set and the
// version grown by one: after the quarantine a node of allow (or the last
// holder, as before) may acquire Epoch+1. The last holder is left out of
// the set (it may acquire anyway); epoch and last holder are unchanged.
// Refused with ErrOverride: no last holder is known (anyone may acquire
// already), allow is empty, has more than MaxInSyncMembers, NodeNone or a
// duplicate, or names nothing but the last holder.
func OverrideInSync(state PersistentState, allow []NodeID) (PersistentState, error) {
	if err := state.Validate(); err != nil {
		return state, err
	}
	if state.LastHolder == NodeNone {
		return state, fmt.Errorf("%w: the record names no last holder, so any node may acquire after the quarantine already", ErrOverride)
	}
	if len(allow) == 0 {
		return state, fmt.Errorf("%w: no node to allow", ErrOverride)
	}
	others := make([]NodeID, 0, len(allow))
	for _, id := range allow {
		if id != state.LastHolder {
			others = append(others, id)
		}
	}
	set, ok := MakeInSyncSet(others, NodeNone)
	if !ok {
		return state, fmt.Errorf("%w: allowed nodes %v: at most %d, none 0, no duplicate", ErrOverride, allow, MaxInSyncMembers)
	}
	if set.N == 0 {
		return state, fmt.Errorf("%w: node %d is the last holder and may acquire already", ErrOverride, state.LastHolder)
	}
	if state.InSyncVersion == math.MaxUint64 {
		return state, fmt.Errorf("%w: in-sync version exhausted", ErrOverride)
	}
	state.Members = set
	state.InSyncVersion++
	return state, nil
}

// RewriteEpoch returns the record of a witness that knows only epoch:
// no last holder and no set, so after the quarantine any node may acquire
// epoch+1 (as a record from before the in-sync set). It is the way out
// when the record is corrupt or lost: epoch must be above every epoch any
// node or journal ever used. known is the readable record's epoch (0:
// none readable); epoch must be above it, and below the largest epoch.
func RewriteEpoch(known, epoch uint64) (PersistentState, error) {
	if epoch <= known {
		return PersistentState{}, fmt.Errorf("%w: epoch %d is not above %d, the highest the witness recorded", ErrOverride, epoch, known)
	}
	if epoch == math.MaxUint64 {
		return PersistentState{}, fmt.Errorf("%w: epoch %d leaves no epoch to grant", ErrOverride, epoch)
	}
	return PersistentState{Epoch: epoch}, nil
}
