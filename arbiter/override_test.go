package arbiter

import (
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"
)

func overrideState(epoch, version uint64, last NodeID, members ...NodeID) PersistentState {
	set, ok := MakeInSyncSet(members, last)
	if !ok {
		panic("bad test set")
	}
	return PersistentState{Epoch: epoch, InSyncVersion: version, LastHolder: last, Members: set}
}

// TestOverrideInSyncRefuses: every refusal wraps ErrOverride (or the
// record's own invalidity) and changes nothing.
func TestOverrideInSyncRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state PersistentState
		allow []NodeID
	}{
		{"no last holder", overrideState(5, 2, NodeNone), []NodeID{2}},
		{"nothing allowed", overrideState(5, 2, 1), nil},
		{"node 0", overrideState(5, 2, 1), []NodeID{0}},
		{"duplicate", overrideState(5, 2, 1), []NodeID{2, 2}},
		{"too many", overrideState(5, 2, 1), []NodeID{2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"only the last holder", overrideState(5, 2, 1), []NodeID{1}},
		{"version exhausted", overrideState(5, math.MaxUint64, 1), []NodeID{2}},
	} {
		got, err := OverrideInSync(tc.state, tc.allow)
		if !errors.Is(err, ErrOverride) {
			t.Errorf("%s: err %v, want ErrOverride", tc.name, err)
		}
		if got != tc.state {
			t.Errorf("%s: state changed to %+v", tc.name, got)
		}
	}
	bad := overrideState(5, 2, 1)
	bad.Members.Nodes[0], bad.Members.N = 1, 1 // the last holder in its own set
	if _, err := OverrideInSync(bad, []NodeID{2}); !errors.Is(err, ErrInvalidState) {
		t.Errorf("invalid record: %v, want ErrInvalidState", err)
	}
}

// TestOverrideUnblocksPromotion is the dead end and the way out: node 1
// led epoch 7 alone (empty set) and is gone; node 2 is refused as not in
// sync, for good. After OverrideInSync(allow 2) and a restart, node 2 is
// granted epoch 8 once the quarantine is over, and node 3 still is not.
func TestOverrideUnblocksPromotion(t *testing.T) {
	stuck := overrideState(7, 4, 1)
	a, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(stuck, 0); err != nil {
		t.Fatal(err)
	}
	after := testConfig.LeaseDurationNs + 1
	if d := a.Acquire(2, after); d.Granted || d.Reason != ReasonNotInSync {
		t.Fatalf("before the override: %+v, want a not-in-sync deny", d)
	}
	over, err := OverrideInSync(stuck, []NodeID{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	if over.Epoch != 7 || over.LastHolder != 1 || over.InSyncVersion != 5 || over.Members.N != 1 || over.Members.Nodes[0] != 2 {
		t.Fatalf("override: %+v", over)
	}
	b, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Restore(over, 0); err != nil {
		t.Fatal(err)
	}
	if d := b.Acquire(2, 1); d.Granted || d.Reason != ReasonQuarantine {
		t.Fatalf("in the quarantine: %+v", d)
	}
	if d := b.Acquire(3, after); d.Granted || d.Reason != ReasonNotInSync {
		t.Fatalf("a node not allowed: %+v", d)
	}
	if d := b.Acquire(2, after); !d.Granted || d.Epoch != 8 {
		t.Fatalf("the allowed node: %+v, want epoch 8", d)
	}
}

// TestRewriteEpoch: a rewritten record lets any node acquire above it,
// and an epoch that does not grow is refused.
func TestRewriteEpoch(t *testing.T) {
	for _, c := range [][2]uint64{{9, 9}, {9, 3}, {0, 0}, {0, math.MaxUint64}} {
		if _, err := RewriteEpoch(c[0], c[1]); !errors.Is(err, ErrOverride) {
			t.Errorf("RewriteEpoch(%d, %d): %v, want ErrOverride", c[0], c[1], err)
		}
	}
	st, err := RewriteEpoch(9, 20)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(st, 0); err != nil {
		t.Fatal(err)
	}
	if d := a.Acquire(5, testConfig.LeaseDurationNs+1); !d.Granted || d.Epoch != 21 {
		t.Fatalf("after a rewrite: %+v, want epoch 21 to anyone", d)
	}
}

// TestOverrideInSyncProperty: for any valid record with a last holder and
// any allowed list, an accepted override keeps the record valid, keeps
// epoch and last holder, grows the version by one and makes exactly the
// allowed nodes (and the last holder) promotable after the quarantine,
// each at epoch+1; a refused one changes nothing.
func TestOverrideInSyncProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		last := NodeID(rapid.Uint32Range(1, 12).Draw(t, "last"))
		members := rapid.SliceOfNDistinct(rapid.Uint32Range(1, 12), 0, MaxInSyncMembers, func(v uint32) uint32 { return v }).Draw(t, "members")
		var ms []NodeID
		for _, m := range members {
			if NodeID(m) != last {
				ms = append(ms, NodeID(m))
			}
		}
		state := overrideState(rapid.Uint64Range(1, 1<<40).Draw(t, "epoch"), rapid.Uint64Range(0, 1<<40).Draw(t, "version"), last, ms...)
		raw := rapid.SliceOfN(rapid.Uint32Range(0, 12), 0, 10).Draw(t, "allow")
		allow := make([]NodeID, len(raw))
		for i, v := range raw {
			allow[i] = NodeID(v)
		}
		over, err := OverrideInSync(state, allow)
		if err != nil {
			if !errors.Is(err, ErrOverride) || over != state {
				t.Fatalf("refusal %v changed %+v to %+v", err, state, over)
			}
			return
		}
		if over.Validate() != nil || over.Epoch != state.Epoch || over.LastHolder != last || over.InSyncVersion != state.InSyncVersion+1 {
			t.Fatalf("override of %+v by %v: %+v", state, allow, over)
		}
		for id := NodeID(1); id <= 13; id++ {
			a, err := NewArbiter(testConfig)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Restore(over, 0); err != nil {
				t.Fatal(err)
			}
			allowed := id == last
			for _, x := range allow {
				allowed = allowed || x == id
			}
			d := a.Acquire(id, testConfig.LeaseDurationNs+1)
			if d.Granted != allowed || (allowed && d.Epoch != state.Epoch+1) {
				t.Fatalf("node %d (allowed %v) after override %+v: %+v", id, allowed, over, d)
			}
		}
	})
}
