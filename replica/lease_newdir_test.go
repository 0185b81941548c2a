package replica

import "testing"

// A node leads any term it is granted, except a node whose directory is
// new, which leads only while no node can hold a history: the arbiter's
// first term (in-sync version 1), the second with the set still empty
// (the first holder granted again before it added a standby), or any
// later one with the set empty while the version still equals the epoch
// (no change of the set was ever accepted: the first holder, granted
// term after term). Any other grant means its directory was replaced or
// wiped while it was a member, or the witness's epoch was rewritten.
func TestMayLeadTerm(t *testing.T) {
	for _, c := range []struct {
		newDir         bool
		version, epoch uint64
		members        int
		want           bool
	}{
		{false, 0, 5, 0, true}, {false, 1, 1, 0, true}, {false, 7, 4, 2, true},
		{true, FirstTermInSyncVersion, 1, 0, true},
		{true, FirstTermInSyncVersion + 1, 2, 0, true},
		{true, FirstTermInSyncVersion + 1, 9, 0, true},
		{true, FirstTermInSyncVersion + 1, 2, 1, false},
		{true, 0, 0, 0, false}, {true, 9, 9, 1, false},
		// Every term granted, no change of the set ever (seed 2872666).
		{true, 4, 4, 0, true},
		// A change of the set was accepted once: a standby was in sync.
		{true, 5, 4, 0, false},
		// The epoch rewritten by an operator (the version restarted at 0).
		{true, 3, 12, 0, false},
	} {
		if got := MayLeadTerm(c.newDir, c.version, c.epoch, c.members); got != c.want {
			t.Errorf("MayLeadTerm(new %v, version %d, epoch %d, %d members) = %v, want %v", c.newDir, c.version, c.epoch, c.members, got, c.want)
		}
	}
}

// A node of another history declines every grant, before any rule of
// new directories; otherwise DeclineLead is MayLeadTerm's answer.
func TestDeclineLead(t *testing.T) {
	for _, c := range []struct {
		foreign, newDir bool
		version, epoch  uint64
		members         int
		want            Decline
	}{
		{false, false, 7, 4, 2, LeadGranted},
		{false, true, FirstTermInSyncVersion, 1, 0, LeadGranted},
		{false, true, 9, 6, 1, DeclineNewDirectory},
		{true, false, 7, 4, 2, DeclineForeign},
		{true, true, FirstTermInSyncVersion, 1, 0, DeclineForeign},
		{true, true, 9, 6, 1, DeclineForeign},
	} {
		if got := DeclineLead(c.foreign, c.newDir, c.version, c.epoch, c.members); got != c.want {
			t.Errorf("DeclineLead(foreign %v, new %v, version %d, epoch %d, %d members) = %d, want %d", c.foreign, c.newDir, c.version, c.epoch, c.members, got, c.want)
		}
	}
}
