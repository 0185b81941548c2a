package replica

import "testing"

// Judge: an id of 0 on either side is not judged against, except that a
// node with none adopts a known one; two known ids that differ are
// foreign. HeardPrimary latches Foreign on the first foreign primary and
// reports only that first time.
func TestIdentity(t *testing.T) {
	for _, c := range []struct {
		ours, peer uint64
		want       IdentityVerdict
	}{
		{0, 0, SameHistory}, {7, 0, SameHistory}, {7, 7, SameHistory},
		{0, 7, AdoptHistory}, {7, 9, ForeignHistory},
	} {
		var id Identity
		id.Set(c.ours)
		if got := id.Judge(c.peer); got != c.want {
			t.Errorf("ours %d, peer %d: %d, want %d", c.ours, c.peer, got, c.want)
		}
		if id.Foreign() {
			t.Errorf("ours %d, peer %d: Judge latched Foreign", c.ours, c.peer)
		}
	}
	var id Identity
	id.Set(7)
	for i, c := range []struct {
		peer                    uint64
		first, confirmed, latch bool
	}{
		{0, false, false, false}, {7, true, true, false}, {7, false, true, false}, {0, false, true, false},
		{9, true, true, true}, {9, false, true, true}, {7, false, true, true}, {11, false, true, true},
	} {
		_, first := id.HeardPrimary(c.peer)
		if first != c.first || id.Confirmed() != c.confirmed || id.Foreign() != c.latch {
			t.Fatalf("step %d (peer %d): first %v confirmed %v foreign %v, want %v %v %v",
				i, c.peer, first, id.Confirmed(), id.Foreign(), c.first, c.confirmed, c.latch)
		}
	}
	if id.Heard() != 11 || id.Refused() != 3 {
		t.Fatalf("heard %d refused %d", id.Heard(), id.Refused())
	}
	// A node with none adopts the first it hears, confirmed, and judges
	// the next against it.
	var fresh Identity
	if v, _ := fresh.HeardPrimary(5); v != AdoptHistory || fresh.Confirmed() {
		t.Fatalf("fresh: %d confirmed %v", v, fresh.Confirmed())
	}
	fresh.Adopted(5)
	if v, _ := fresh.HeardPrimary(6); !fresh.Confirmed() || v != ForeignHistory || !fresh.Foreign() {
		t.Fatalf("adopted 5, heard 6: %d confirmed %v foreign %v", v, fresh.Confirmed(), fresh.Foreign())
	}
}

// HeardArbiter latches Foreign only on a pinned id that is neither 0 nor
// ours, and never adopts one.
func TestIdentityArbiter(t *testing.T) {
	var id Identity
	if id.HeardArbiter(5) || id.Foreign() || id.ID() != 0 {
		t.Fatal("a node with no id judged or adopted the arbiter's")
	}
	id.Set(7)
	if id.HeardArbiter(0) || id.HeardArbiter(7) || id.Foreign() {
		t.Fatal("latched on none or on ours")
	}
	if !id.HeardArbiter(9) || id.HeardArbiter(9) || !id.Foreign() || id.Heard() != 9 {
		t.Fatalf("another pinned id: foreign %v heard %d", id.Foreign(), id.Heard())
	}
}
