package arbiter

import "testing"

// TestArbiterHistory: the cluster's history id. A fresh cluster's first
// holder asks with none (its directory is new) and pins the id it made
// with its first renew that names it (persisted); a member restarted on
// another cluster's directory, in the set by its node ID alone, is then
// refused the lease however free it is, and a node with no id yet is not
// judged. The pin survives a restart, is kept by an in-sync override and
// dropped by an epoch rewrite (a witness that knows only an epoch).
func TestArbiterHistory(t *testing.T) {
	const ours, theirs = 0xaaaa, 0xbbbb
	a, err := NewArbiter(testConfig) // lease 1000
	if err != nil {
		t.Fatal(err)
	}
	pin := func(d Decision, history uint64) Decision {
		a.PinHistory(&d, history)
		return d
	}
	if d := pin(a.Acquire(1, 0), 0); !d.Granted || d.History != 0 || a.History() != 0 {
		t.Fatalf("fresh acquire with no id: %+v", d)
	}
	if d := pin(a.RenewWithInSync(1, 1, 1, []NodeID{2}, 100), ours); !d.Granted || !d.Persist || d.History != ours || d.PersistentState().History != ours {
		t.Fatalf("the first renew naming the id pins it, persisted: %+v", d)
	}
	if d := pin(a.Renew(1, 1, 200), ours); !d.Granted || d.Persist || d.History != ours {
		t.Fatalf("a renew of the pinned history persists nothing: %+v", d)
	}
	if !a.ForeignHistory(theirs) || a.ForeignHistory(ours) || a.ForeignHistory(0) {
		t.Fatal("ForeignHistory judges wrong")
	}
	// Node 1 is gone; its lease ran out at 1200. Node 2 (a member)
	// restarted on another cluster's directory.
	if d := a.DenyForeign(2, 1300); d.Granted || d.Reason != ReasonForeignHistory || d.History != ours || d.Epoch != 1 {
		t.Fatalf("foreign member: %+v", d)
	}
	if q := a.Query(1300); q.Holder != NodeNone || q.Epoch != 1 || q.LastHolder != 1 {
		t.Fatalf("a foreign refusal changed the arbiter: %+v", q)
	}
	if d := pin(a.Acquire(2, 1400), ours); !d.Granted || d.Epoch != 2 || d.History != ours {
		t.Fatalf("member of the history: %+v", d)
	}
	// Restored from the grant's record: the pin stays.
	st := d2state(t, a, 1500)
	b, _ := NewArbiter(testConfig)
	if err := b.Restore(st, 0); err != nil || !b.ForeignHistory(theirs) || b.History() != ours {
		t.Fatalf("restored: history %#x err %v", b.History(), err)
	}
	if over, err := OverrideInSync(st, []NodeID{3}); err != nil || over.History != ours {
		t.Fatalf("override in sync: %+v %v", over, err)
	}
	if re, err := RewriteEpoch(st.Epoch, st.Epoch+5); err != nil || re.History != 0 {
		t.Fatalf("rewritten epoch: %+v %v", re, err)
	}
}

// d2state is the record a witness would have written for a's state.
func d2state(t *testing.T, a *Arbiter, nowNs int64) PersistentState {
	t.Helper()
	q := a.Query(nowNs)
	return PersistentState{Epoch: q.Epoch, InSyncVersion: q.InSyncVersion, LastHolder: q.LastHolder, Members: q.Members, History: a.History()}
}
