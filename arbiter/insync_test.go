package arbiter

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func set(nodes ...NodeID) InSyncSet {
	s, ok := MakeInSyncSet(nodes, NodeNone)
	if !ok {
		panic("bad test set")
	}
	return s
}

// inSyncStep is one call and the in-sync part of its expected decision.
type inSyncStep struct {
	op      string // "acquire", "renew", "propose", "restore"
	node    NodeID
	epoch   uint64
	base    uint64
	members []NodeID
	state   PersistentState // restore
	nowNs   int64
	// Expected.
	granted bool
	reason  DenyReason // Reason on a deny, InSyncReason on a grant
	version uint64
	set     InSyncSet
	persist bool
}

func TestInSyncRules(t *testing.T) {
	acq := func(node NodeID, nowNs int64, granted bool, reason DenyReason, version uint64, s InSyncSet, persist bool) inSyncStep {
		return inSyncStep{op: "acquire", node: node, nowNs: nowNs, granted: granted, reason: reason, version: version, set: s, persist: persist}
	}
	prop := func(node NodeID, epoch, base uint64, members []NodeID, nowNs int64, reason DenyReason, version uint64, s InSyncSet, persist bool) inSyncStep {
		return inSyncStep{op: "propose", node: node, epoch: epoch, base: base, members: members, nowNs: nowNs, granted: true, reason: reason, version: version, set: s, persist: persist}
	}
	tests := []struct {
		name  string
		steps []inSyncStep
	}{
		{"fresh cluster grants anyone; version 1, empty set", []inSyncStep{
			acq(3, 0, true, ReasonNone, 1, set(), true),
		}},
		{"member is granted after a lapse and leaves the set; old holder does not join", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{3, 2}, 100, ReasonNone, 2, set(2, 3), true),
			acq(2, 1100, true, ReasonNone, 3, set(3), true),
		}},
		{"non-member refused after a lapse", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{2}, 0, ReasonNone, 2, set(2), true),
			acq(3, 1000, false, ReasonNotInSync, 2, set(2), false),
			acq(2, 1001, true, ReasonNone, 3, set(), true),
		}},
		{"empty set: only the previous holder may take the lease", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			acq(2, 1000, false, ReasonNotInSync, 1, set(), false),
			acq(3, 1000, false, ReasonNotInSync, 1, set(), false),
			acq(1, 1000, true, ReasonNone, 2, set(), true),
		}},
		{"previous holder may take its lease back while members wait", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{2}, 0, ReasonNone, 2, set(2), true),
			acq(1, 1000, true, ReasonNone, 3, set(2), true),
		}},
		{"deposed holder is not eligible after the member took over", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{2}, 0, ReasonNone, 2, set(2), true),
			acq(2, 1000, true, ReasonNone, 3, set(), true),
			acq(1, 2000, false, ReasonNotInSync, 3, set(), false),
		}},
		{"CAS: stale base refused, renew still granted, current set reported", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{2}, 10, ReasonNone, 2, set(2), true),
			prop(1, 1, 1, []NodeID{3}, 20, ReasonInSyncVersion, 2, set(2), false),
			prop(1, 1, 3, []NodeID{3}, 20, ReasonInSyncVersion, 2, set(2), false),
			prop(1, 1, 2, []NodeID{3}, 30, ReasonNone, 3, set(3), true),
			prop(1, 1, 3, nil, 40, ReasonNone, 4, set(), true),
		}},
		{"invalid proposals refused, renew granted", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{2, 1}, 10, ReasonInSyncInvalid, 1, set(), false),
			prop(1, 1, 1, []NodeID{2, 2}, 10, ReasonInSyncInvalid, 1, set(), false),
			prop(1, 1, 1, []NodeID{0}, 10, ReasonInSyncInvalid, 1, set(), false),
			prop(1, 1, 1, []NodeID{2, 3, 4, 5, 6, 7, 8, 9, 10}, 10, ReasonInSyncInvalid, 1, set(), false),
			prop(1, 1, 1, []NodeID{9, 8, 7, 6, 5, 4, 3, 2}, 10, ReasonNone, 2, set(2, 3, 4, 5, 6, 7, 8, 9), true),
		}},
		{"proposal equal to the set changes nothing", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			prop(1, 1, 1, []NodeID{2}, 10, ReasonNone, 2, set(2), true),
			prop(1, 1, 2, []NodeID{2}, 20, ReasonNone, 2, set(2), false),
		}},
		{"proposal with a denied renew is not applied", []inSyncStep{
			acq(1, 0, true, ReasonNone, 1, set(), true),
			{op: "propose", node: 1, epoch: 2, base: 1, members: []NodeID{2}, nowNs: 10, reason: ReasonEpochMismatch, version: 1, set: set()},
			{op: "propose", node: 2, epoch: 1, base: 1, members: []NodeID{3}, nowNs: 10, reason: ReasonNotHolder, version: 1, set: set()},
			{op: "propose", node: 1, epoch: 1, base: 1, members: []NodeID{2}, nowNs: 1000, reason: ReasonExpired, version: 1, set: set()},
		}},
		{"restore keeps the set and the last holder; quarantine applies to all", []inSyncStep{
			{op: "restore", state: PersistentState{Epoch: 5, InSyncVersion: 9, LastHolder: 1, Members: set(2)}, nowNs: 0},
			acq(1, 999, false, ReasonQuarantine, 9, set(2), false),
			acq(3, 1000, false, ReasonNotInSync, 9, set(2), false),
			acq(1, 1000, true, ReasonNone, 10, set(2), true),
		}},
		{"restore: member granted after quarantine", []inSyncStep{
			{op: "restore", state: PersistentState{Epoch: 5, InSyncVersion: 9, LastHolder: 1, Members: set(2, 3)}, nowNs: 0},
			acq(3, 1000, true, ReasonNone, 10, set(2), true),
		}},
		{"restore of an epoch-only record lets anyone acquire after quarantine", []inSyncStep{
			{op: "restore", state: PersistentState{Epoch: 5}, nowNs: 0},
			acq(3, 1000, true, ReasonNone, 1, set(), true),
			acq(2, 2000, false, ReasonNotInSync, 1, set(), false),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewArbiter(testConfig)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				var d Decision
				switch s.op {
				case "acquire":
					d = a.Acquire(s.node, s.nowNs)
				case "propose":
					d = a.RenewWithInSync(s.node, s.epoch, s.base, s.members, s.nowNs)
				case "restore":
					if err := a.Restore(s.state, s.nowNs); err != nil {
						t.Fatal(err)
					}
					continue
				}
				reason := d.Reason
				if d.Granted {
					reason = d.InSyncReason
				}
				if d.Granted != s.granted || reason != s.reason || d.InSyncVersion != s.version || d.Members != s.set || d.Persist != s.persist {
					t.Fatalf("step %d: %s node %d: got %+v\nwant granted %v reason %s version %d set %v persist %v",
						i, s.op, s.node, d, s.granted, s.reason, s.version, s.set.Slice(), s.persist)
				}
				if d.Granted && d.Members.Contains(d.Holder) {
					t.Fatalf("step %d: holder %d in its own set %v", i, d.Holder, d.Members.Slice())
				}
				q := a.Query(s.nowNs)
				if q.InSyncVersion != d.InSyncVersion || q.Members != d.Members {
					t.Fatalf("step %d: Query %+v disagrees with decision %+v", i, q, d)
				}
				if d.Persist {
					if p := d.PersistentState(); p.Epoch != d.Epoch || p.LastHolder != d.Holder || p.Members != d.Members || p.InSyncVersion != d.InSyncVersion {
						t.Fatalf("step %d: PersistentState %+v of %+v", i, p, d)
					}
				}
			}
		})
	}
}

func TestMakeInSyncSet(t *testing.T) {
	tests := []struct {
		in      []NodeID
		exclude NodeID
		want    []NodeID
		ok      bool
	}{
		{nil, NodeNone, nil, true},
		{[]NodeID{3, 1, 2}, NodeNone, []NodeID{1, 2, 3}, true},
		{[]NodeID{3, 1, 2}, 4, []NodeID{1, 2, 3}, true},
		{[]NodeID{3, 1, 2}, 2, nil, false},
		{[]NodeID{3, 1, 3}, NodeNone, nil, false},
		{[]NodeID{1, 0}, NodeNone, nil, false},
		{[]NodeID{8, 7, 6, 5, 4, 3, 2, 1}, NodeNone, []NodeID{1, 2, 3, 4, 5, 6, 7, 8}, true},
		{[]NodeID{1, 2, 3, 4, 5, 6, 7, 8, 9}, NodeNone, nil, false},
	}
	for _, tt := range tests {
		s, ok := MakeInSyncSet(tt.in, tt.exclude)
		if ok != tt.ok || !slices.Equal(s.Slice(), tt.want) || (!ok && s != InSyncSet{}) {
			t.Errorf("MakeInSyncSet(%v, %d) = %v %v, want %v %v", tt.in, tt.exclude, s.Slice(), ok, tt.want, tt.ok)
		}
	}
}

func TestRestoreRefusesInvalidState(t *testing.T) {
	bad := []PersistentState{
		{Epoch: 1, LastHolder: 2, Members: set(2, 3)},
		{Epoch: 1, Members: InSyncSet{N: 2, Nodes: [MaxInSyncMembers]NodeID{3, 2}}},
		{Epoch: 1, Members: InSyncSet{N: 2, Nodes: [MaxInSyncMembers]NodeID{2, 2}}},
		{Epoch: 1, Members: InSyncSet{N: 1, Nodes: [MaxInSyncMembers]NodeID{0}}},
		{Epoch: 1, Members: InSyncSet{N: 1, Nodes: [MaxInSyncMembers]NodeID{2, 3}}},
		{Epoch: 1, Members: InSyncSet{N: 9}},
		{Epoch: 1, Members: InSyncSet{N: -1}},
	}
	for _, st := range bad {
		a, _ := NewArbiter(testConfig)
		if err := a.Restore(st, 0); !errors.Is(err, ErrInvalidState) {
			t.Errorf("Restore(%+v) = %v, want ErrInvalidState", st, err)
		}
		// Nothing changed: no quarantine, a fresh cluster.
		if d := a.Acquire(7, 0); !d.Granted || d.Epoch != 1 {
			t.Errorf("after refused Restore(%+v): %+v", st, d)
		}
	}
}

func TestRenewWithInSyncDoesNotAllocate(t *testing.T) {
	a, _ := NewArbiter(testConfig)
	a.Acquire(1, 0)
	members := []NodeID{3, 2}
	version := a.Query(0).InSyncVersion
	if n := testing.AllocsPerRun(1000, func() {
		d := a.RenewWithInSync(1, 1, version, members, 0)
		version = d.InSyncVersion
		members[0], members[1] = members[1]+2, members[0]+2
	}); n != 0 {
		t.Fatalf("RenewWithInSync allocates %v times", n)
	}
}

// TestInSyncProperty drives one arbiter over 2-4 nodes with a random
// schedule of acquires, renews, proposals, time steps, output and
// restarts, and a model of the data: has[n] is the highest seq node n
// holds, released the highest seq the venue released. The holder writes
// new seqs, standbys catch up from it, and the holder releases only up to
// the minimum of its own and the in-sync members' has (what the gate
// does). A proposal adds only nodes that have caught up to released (the
// primary decides who caught up) and may drop anyone. The invariant: every
// grant of a NEW epoch goes to a node that has every released seq, so no
// released output is ever lost by a failover.
func TestInSyncProperty(t *testing.T) {
	var newTerms, handovers, refused, declined int
	rapid.Check(t, inSyncRun(&newTerms, &handovers, &refused, &declined))
	t.Logf("new terms %d, handovers %d, refused not-in-sync %d, grants undone %d", newTerms, handovers, refused, declined)
	if newTerms == 0 || handovers == 0 || refused == 0 || declined == 0 {
		t.Fatal("the property never exercised handover, refusal or an undone grant: vacuous")
	}
}

// inSyncRun is one run of TestInSyncProperty, counting into the totals.
func inSyncRun(newTerms, handovers, refused, declined *int) func(*rapid.T) {
	return func(t *rapid.T) {
		cfg := testConfig
		a, _ := NewArbiter(cfg)
		nodes := rapid.IntRange(2, 4).Draw(t, "nodes")
		has := make([]uint64, nodes+1)
		// wiped: the node's directory was replaced (it holds nothing and
		// knows it is new) and it has not caught up since: granted, it
		// declines (a Declined release) before leading anything.
		wiped := make([]bool, nodes+1)
		var released uint64
		var persisted PersistentState
		nowNs := int64(0)
		lastEpoch := uint64(0)
		for range rapid.IntRange(50, 300).Draw(t, "steps") {
			q := a.Query(nowNs)
			holder := q.Holder
			node := NodeID(rapid.IntRange(1, nodes).Draw(t, "node"))
			var d Decision
			switch rapid.IntRange(0, 8).Draw(t, "op") {
			case 0:
				d = a.Acquire(node, nowNs)
			case 1:
				if wiped[node] {
					continue // its process restarted: it acquires, never renews
				}
				d = a.Renew(node, q.Epoch, nowNs)
			case 2: // the holder proposes: keep some members, add caught-up nodes
				if holder != NodeNone && rapid.IntRange(0, 3).Draw(t, "from_holder") != 0 {
					node = holder
				}
				if wiped[node] {
					continue
				}
				var proposal []NodeID
				for n := NodeID(1); int(n) <= nodes; n++ {
					if n == node || !rapid.Bool().Draw(t, "pick") {
						continue
					}
					if q.Members.Contains(n) || has[n] >= released {
						proposal = append(proposal, n)
					}
				}
				base := q.InSyncVersion
				if rapid.IntRange(0, 4).Draw(t, "stale") == 0 {
					base--
				}
				d = a.RenewWithInSync(node, q.Epoch, base, proposal, nowNs)
			case 3:
				// Quarter leases: rapid favours small draws, and whole
				// quarters make lapses common.
				nowNs += int64(rapid.IntRange(0, 6).Draw(t, "dt_quarters")) * cfg.LeaseDurationNs / 4
				continue
			case 4: // the holder writes new seqs
				if holder != NodeNone {
					has[holder] += uint64(rapid.IntRange(1, 5).Draw(t, "write"))
				}
				continue
			case 5: // a standby catches up (partly) from the holder
				if holder != NodeNone && node != holder {
					has[node] = max(has[node], min(has[holder], has[node]+uint64(rapid.IntRange(0, 5).Draw(t, "catch"))))
					wiped[node] = wiped[node] && has[node] < has[holder]
				}
				continue
			case 6: // the holder releases what its own and the members' has cover
				if holder != NodeNone {
					upTo := has[holder]
					for _, m := range q.Members.Slice() {
						upTo = min(upTo, has[m])
					}
					released = max(released, upTo)
				}
				continue
			case 7:
				a, _ = NewArbiter(cfg)
				if err := a.Restore(persisted, nowNs); err != nil {
					t.Fatal(err)
				}
				continue
			case 8: // a standby's disk is replaced (the holder's: a crash, not modelled)
				if node != holder && survives(has, wiped, node, released) {
					has[node], wiped[node] = 0, true
				}
				continue
			}
			if d.Persist {
				persisted = d.PersistentState()
			}
			if !d.Granted {
				if d.Reason == ReasonNotInSync {
					*refused++
				}
				continue
			}
			if d.Members.Contains(d.Holder) || !d.Members.valid(d.Holder) {
				t.Fatalf("grant %+v: invalid set", d)
			}
			if d.Epoch > lastEpoch && wiped[d.Holder] {
				// It leads nothing: gives the lease back and undoes the
				// grant where the arbiter allows it.
				a.Release(d.Holder, d.Epoch, nowNs)
				if a.Decline(d.Holder, d.Epoch, nowNs) {
					*declined++
				}
				lastEpoch = d.Epoch
				continue
			}
			if d.Epoch > lastEpoch {
				*newTerms++
				if d.Holder != persisted.LastHolder || d.Epoch != persisted.Epoch {
					t.Fatalf("new epoch %+v not persisted (%+v)", d, persisted)
				}
				if has[d.Holder] < released {
					t.Fatalf("node %d granted epoch %d with has %d < released %d", d.Holder, d.Epoch, has[d.Holder], released)
				}
				if d.Holder != q.LastHolder && q.LastHolder != NodeNone {
					*handovers++
				}
				lastEpoch = d.Epoch
			}
		}
	}
}

func BenchmarkArbiterRenewWithInSync(b *testing.B) {
	a, _ := NewArbiter(DefaultConfig())
	epoch := a.Acquire(1, 0).Epoch
	members := []NodeID{3, 2}
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		// A stale base every time: the proposal path without growing the
		// version.
		a.RenewWithInSync(1, epoch, 0, members, nowNs)
		nowNs++
	}
}

// survives reports whether everything released is still held by a node
// other than node that was not wiped: the model wipes only such a node
// (losing every copy is a loss no arbiter can undo: seqbus witness
// override --accept-loss).
func survives(has []uint64, wiped []bool, node NodeID, released uint64) bool {
	for n := range has[1:] {
		if id := NodeID(n + 1); id != node && !wiped[id] && has[id] >= released {
			return true
		}
	}
	return false
}
