package arbiter

import "fmt"

// MaxInSyncMembers bounds the in-sync set: at most 8 standbys, the most a
// lease frame can carry (wire.MaxMembers). A proposal with more is refused
// (ReasonInSyncInvalid); the set never grows past it.
const MaxInSyncMembers = 8

// InSyncSet is a bounded set of nodes in a fixed array: sorted ascending,
// no duplicates, no NodeNone. A fixed array keeps Decision and Status
// comparable with == and free of allocation. The zero value is the empty
// set.
type InSyncSet struct {
	// N is how many entries of Nodes are in use; the rest are NodeNone.
	N     int
	Nodes [MaxInSyncMembers]NodeID
}

// Slice returns the members (aliasing s; do not modify).
func (s *InSyncSet) Slice() []NodeID { return s.Nodes[:s.N] }

// Contains reports whether node is a member.
func (s *InSyncSet) Contains(node NodeID) bool {
	for _, m := range s.Nodes[:s.N] {
		if m == node {
			return true
		}
	}
	return false
}

// remove deletes node if present, keeping order, and reports whether it
// was a member.
func (s *InSyncSet) remove(node NodeID) bool {
	for i, m := range s.Nodes[:s.N] {
		if m == node {
			copy(s.Nodes[i:s.N], s.Nodes[i+1:s.N])
			s.N--
			s.Nodes[s.N] = NodeNone
			return true
		}
	}
	return false
}

// MakeInSyncSet builds a set from members in any order. It refuses (ok
// false) more than MaxInSyncMembers members, NodeNone, a duplicate, or
// exclude (the holder, which is never its own standby; pass NodeNone to
// exclude nobody). Sorting is an insertion sort on at most eight entries:
// no allocation, and the bound makes it cheap.
func MakeInSyncSet(members []NodeID, exclude NodeID) (s InSyncSet, ok bool) {
	if len(members) > MaxInSyncMembers {
		return InSyncSet{}, false
	}
	for _, m := range members {
		if m == NodeNone || (exclude != NodeNone && m == exclude) {
			return InSyncSet{}, false
		}
		i := s.N
		for i > 0 && s.Nodes[i-1] > m {
			s.Nodes[i] = s.Nodes[i-1]
			i--
		}
		if i > 0 && s.Nodes[i-1] == m {
			return InSyncSet{}, false
		}
		s.Nodes[i] = m
		s.N++
	}
	return s, true
}

// valid reports whether s keeps the set's invariants with holder excluded.
func (s *InSyncSet) valid(holder NodeID) bool {
	if s.N < 0 || s.N > MaxInSyncMembers {
		return false
	}
	for i, m := range s.Nodes {
		switch {
		case i >= s.N:
			if m != NodeNone {
				return false
			}
		case m == NodeNone || (holder != NodeNone && m == holder):
			return false
		case i > 0 && s.Nodes[i-1] >= m:
			return false
		}
	}
	return true
}

// PersistentState is what a witness must keep on disk so that a restart
// neither reuses an epoch nor forgets who may be promoted. The runtime
// writes Decision.PersistentState() whenever Decision.Persist is set, and
// gives the last record written to Restore after a restart.
type PersistentState struct {
	// Epoch is the highest epoch issued.
	Epoch uint64
	// InSyncVersion is the version of Members; it grows by one with every
	// change of the set and with every new epoch.
	InSyncVersion uint64
	// LastHolder is the holder of Epoch, NodeNone if no lease was ever
	// granted (or the record predates the in-sync set: then anyone may
	// take the lease after the restart quarantine, as before).
	LastHolder NodeID
	// Members is the in-sync set: the standbys that have everything the
	// holder of Epoch released. It never contains LastHolder.
	Members InSyncSet
	// History is the cluster's pinned history id (Arbiter.PinHistory;
	// 0: none yet, or a record from before history ids).
	History uint64
}

// Validate returns an error wrapping ErrInvalidState when Members breaks
// the set's invariants (count out of range, unsorted, duplicated, NodeNone,
// containing LastHolder, or junk past the count). A witness calls it on a
// record read from disk.
func (p *PersistentState) Validate() error {
	if !p.Members.valid(p.LastHolder) {
		return fmt.Errorf("%w: in-sync set %v (%d members) with last holder %d", ErrInvalidState, p.Members.Nodes, p.Members.N, p.LastHolder)
	}
	return nil
}
