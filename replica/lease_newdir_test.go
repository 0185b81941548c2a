package replica

import "testing"

// A node leads any term it is granted, except a node whose directory is
// new, which leads only while no node can hold a history: the arbiter's
// first term (in-sync version 1), or the second with the set still empty
// (the first holder granted again before it added a standby). Any other
// grant means its directory was replaced or wiped while it was a member.
func TestMayLeadTerm(t *testing.T) {
	for _, c := range []struct {
		newDir  bool
		version uint64
		members int
		want    bool
	}{
		{false, 0, 0, true}, {false, 1, 0, true}, {false, 7, 2, true},
		{true, FirstTermInSyncVersion, 0, true},
		{true, FirstTermInSyncVersion + 1, 0, true},
		{true, FirstTermInSyncVersion + 1, 1, false},
		{true, 0, 0, false}, {true, 3, 0, false}, {true, 9, 1, false},
	} {
		if got := MayLeadTerm(c.newDir, c.version, c.members); got != c.want {
			t.Errorf("MayLeadTerm(new %v, version %d, %d members) = %v, want %v", c.newDir, c.version, c.members, got, c.want)
		}
	}
}

// A node of another history declines every grant, before any rule of
// new directories; otherwise DeclineLead is MayLeadTerm's answer.
func TestDeclineLead(t *testing.T) {
	for _, c := range []struct {
		foreign, newDir bool
		version         uint64
		members         int
		want            Decline
	}{
		{false, false, 7, 2, LeadGranted},
		{false, true, FirstTermInSyncVersion, 0, LeadGranted},
		{false, true, 9, 1, DeclineNewDirectory},
		{true, false, 7, 2, DeclineForeign},
		{true, true, FirstTermInSyncVersion, 0, DeclineForeign},
		{true, true, 9, 1, DeclineForeign},
	} {
		if got := DeclineLead(c.foreign, c.newDir, c.version, c.members); got != c.want {
			t.Errorf("DeclineLead(foreign %v, new %v, version %d, %d members) = %d, want %d", c.foreign, c.newDir, c.version, c.members, got, c.want)
		}
	}
}
