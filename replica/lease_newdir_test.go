package replica

import "testing"

// A node leads any term it is granted, except a node whose directory is
// new, which leads only the arbiter's first (in-sync version 1): a later
// grant means its directory was replaced or wiped while it was a member.
func TestMayLeadTerm(t *testing.T) {
	for _, c := range []struct {
		newDir  bool
		version uint64
		want    bool
	}{
		{false, 0, true}, {false, 1, true}, {false, 7, true},
		{true, FirstTermInSyncVersion, true},
		{true, 0, false}, {true, 2, false}, {true, 9, false},
	} {
		if got := MayLeadTerm(c.newDir, c.version); got != c.want {
			t.Errorf("MayLeadTerm(new %v, version %d) = %v, want %v", c.newDir, c.version, got, c.want)
		}
	}
}
