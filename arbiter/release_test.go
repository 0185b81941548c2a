package arbiter

import "testing"

// TestArbiterRelease: only the live holder's release of its own epoch
// ends the lease, at once; the next in-sync acquire is then granted the
// next epoch without waiting for the lease to run out; the released
// epoch cannot be renewed; a release during the quarantine changes
// nothing.
func TestArbiterRelease(t *testing.T) {
	a, err := NewArbiter(testConfig) // lease 1000
	if err != nil {
		t.Fatal(err)
	}
	if d := a.Acquire(1, 0); !d.Granted || d.Epoch != 1 {
		t.Fatalf("acquire: %+v", d)
	}
	if d := a.RenewWithInSync(1, 1, 1, []NodeID{2}, 100); !d.Granted {
		t.Fatalf("renew with node 2 in sync: %+v", d)
	}
	for _, bad := range []struct {
		node  NodeID
		epoch uint64
	}{{2, 1}, {1, 0}, {1, 2}, {NodeNone, 1}} {
		if a.Release(bad.node, bad.epoch, 200) {
			t.Fatalf("release by node %d of epoch %d taken", bad.node, bad.epoch)
		}
	}
	if d := a.Acquire(2, 200); d.Granted || d.Reason != ReasonHeld {
		t.Fatalf("acquire while node 1 holds: %+v", d)
	}
	if !a.Release(1, 1, 300) {
		t.Fatal("the holder's release not taken")
	}
	if a.Release(1, 1, 301) {
		t.Fatal("a second release taken")
	}
	if q := a.Query(301); q.Holder != NodeNone || q.Epoch != 1 || q.LastHolder != 1 {
		t.Fatalf("after the release: %+v", q)
	}
	if d := a.Renew(1, 1, 302); d.Granted || d.Reason != ReasonNotHolder {
		t.Fatalf("renew of the released epoch: %+v", d)
	}
	// Long before node 1's lease (renewed at 100) would have ended at 1100.
	if d := a.Acquire(2, 310); !d.Granted || d.Epoch != 2 || !d.PersistEpoch {
		t.Fatalf("acquire after the release: %+v", d)
	}
	if prev, lapsed := a.LastTerm(); prev != 1 || lapsed != 10 {
		t.Fatalf("the new term follows node %d, %d ns after its end: want node 1, 10", prev, lapsed)
	}
	if err := a.Restore(a.persistentForTest(), 400); err != nil {
		t.Fatal(err)
	}
	if a.Release(2, 2, 500) {
		t.Fatal("a release during the restart quarantine taken")
	}
}

func (a *Arbiter) persistentForTest() PersistentState {
	return PersistentState{Epoch: a.epochHighest, InSyncVersion: a.inSyncVersion, LastHolder: a.lastHolder, Members: a.members}
}

// TestKeeperRelease: a keeper that releases stops leading at once, sends
// the release of its view's epoch (once), asks for nothing more until it
// wants the lease again (then a new epoch), and ignores a late grant of a
// renew sent before the release.
func TestKeeperRelease(t *testing.T) {
	k := newTestKeeper(t, 1) // lease 1000, renew 250, margin 150
	k.SetWantLead(true)
	acq := mustTick(t, k, 0, RequestAcquire)
	if !k.OnGrant(acq.ID, 3, 1000) || !k.MayLead(10) {
		t.Fatal("not leading after the grant")
	}
	renew := mustTick(t, k, 250, RequestRenew)
	req, ok := k.Release(300)
	if !ok || req.Kind != RequestRelease || req.Epoch != 3 || req.Node != 1 || req.ID <= renew.ID {
		t.Fatalf("Release = %+v %v, want a release of epoch 3 after the renew", req, ok)
	}
	if k.MayLead(300) {
		t.Fatal("still leading after the release")
	}
	if k.OnGrant(renew.ID, 3, 1000) || k.MayLead(310) {
		t.Fatal("a grant of the renew sent before the release revived the lease")
	}
	mustNotTick(t, k, 400)
	mustNotTick(t, k, 5000)
	if _, ok := k.Release(5000); ok {
		t.Fatal("a second release sent")
	}
	k.SetWantLead(true)
	mustTick(t, k, 5000, RequestAcquire)
	// A keeper whose lease ran out has nothing to release.
	k2 := newTestKeeper(t, 2)
	k2.SetWantLead(true)
	a2 := mustTick(t, k2, 0, RequestAcquire)
	k2.OnGrant(a2.ID, 1, 1000)
	if _, ok := k2.Release(1000); ok {
		t.Fatal("a release of a lease that ended")
	}
}
