package replica

import "testing"

// TestWitnessGrant: a grant of an epoch the node already knows used (a
// witness that lost its state) is behind, on a standby also at the
// highest epoch (only its primary renews that one); the first of a run
// alarms, a good grant ends the run, a deny changes nothing.
func TestWitnessGrant(t *testing.T) {
	r := NewRoles(RolesConfig{})
	if err := r.Fence().Accept(7); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		granted bool
		epoch   uint64
		alarm   bool
	}{
		{true, 8, false}, // the next epoch: a promotion
		{true, 3, true},  // behind: the first of a run
		{true, 7, false}, // at the highest, on a standby: still behind, no second alarm
		{false, 1, false},
		{true, 5, false},
		{true, 9, false}, // the run ends
		{true, 2, true},  // a new run
	}
	for i, s := range steps {
		if got := r.WitnessGrant(s.granted, s.epoch); got != s.alarm {
			t.Fatalf("step %d (%+v): alarm %v", i, s, got)
		}
	}
	if got := r.BehindGrants(); got != 4 {
		t.Fatalf("behind grants %d, want 4", got)
	}
	// A primary renews its own epoch: not behind.
	p := NewRoles(RolesConfig{})
	if err := p.BecomePrimary(7); err != nil {
		t.Fatal(err)
	}
	if p.WitnessGrant(true, 7) || p.BehindGrants() != 0 {
		t.Fatal("a primary's renewal of its own epoch taken for a witness behind")
	}
	if !p.WitnessGrant(true, 6) {
		t.Fatal("a primary granted an older epoch: no alarm")
	}
}
