package arbiter

import "testing"

// TestArbiterDecline: the two-node double fault of a replaced disk. Node
// 1 led with node 2 in sync; both stopped; node 2 came back with an empty
// directory and, as the only member, was granted the next epoch. It
// declines (it holds nothing): the grant is undone, node 1 is again the
// last holder and takes the lease back at once, and node 2 stays out of
// the set. Without Decline, only node 2 (the new last holder) could ever
// lead.
func TestArbiterDecline(t *testing.T) {
	a, err := NewArbiter(testConfig) // lease 1000
	if err != nil {
		t.Fatal(err)
	}
	if d := a.Acquire(1, 0); !d.Granted || d.Epoch != 1 {
		t.Fatalf("acquire: %+v", d)
	}
	if d := a.RenewWithInSync(1, 1, 1, []NodeID{2}, 100); !d.Granted || d.InSyncReason != ReasonNone {
		t.Fatalf("renew with node 2 in sync: %+v", d)
	}
	// Node 1 is gone; its lease runs out at 1100.
	if d := a.Acquire(1, 1200); !d.Granted || d.Epoch != 2 {
		t.Fatalf("node 1 takes its lease back after the lapse: %+v", d)
	}
	if !a.Release(1, 2, 1300) {
		t.Fatal("release")
	}
	if d := a.Acquire(2, 1400); !d.Granted || d.Epoch != 3 {
		t.Fatalf("member node 2 granted: %+v", d)
	}
	if d := a.Acquire(1, 1500); d.Granted {
		t.Fatalf("node 1 granted while node 2 holds: %+v", d)
	}
	// The undo must name the holder and its epoch.
	for _, bad := range []struct {
		node  NodeID
		epoch uint64
	}{{1, 3}, {2, 2}, {2, 4}, {NodeNone, 3}} {
		if a.Decline(bad.node, bad.epoch, 1600) {
			t.Fatalf("decline by node %d of epoch %d taken", bad.node, bad.epoch)
		}
	}
	if !a.Release(2, 3, 1700) || !a.Decline(2, 3, 1700) {
		t.Fatal("node 2's decline not taken")
	}
	if a.Decline(2, 3, 1701) {
		t.Fatal("a second decline taken")
	}
	q := a.Query(1701)
	if q.Holder != NodeNone || q.LastHolder != 1 || q.Epoch != 3 || q.Members.N != 0 {
		t.Fatalf("after the decline: %+v", q)
	}
	if d := a.Acquire(2, 1800); d.Granted || d.Reason != ReasonNotInSync {
		t.Fatalf("node 2 (holds nothing) granted again: %+v", d)
	}
	if d := a.Acquire(1, 1900); !d.Granted || d.Epoch != 4 || !d.PersistEpoch || d.Members.N != 0 {
		t.Fatalf("node 1 takes the lease back: %+v", d)
	}
}

// TestArbiterDeclineRefused: a grant is not undone once its holder
// renewed it (it may have led), after a restart, when the term followed
// the same node's, or on the first term.
func TestArbiterDeclineRefused(t *testing.T) {
	newArb := func() *Arbiter {
		a, err := NewArbiter(testConfig)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	t.Run("first term", func(t *testing.T) {
		a := newArb()
		a.Acquire(1, 0)
		if a.Decline(1, 1, 10) {
			t.Fatal("the first term undone")
		}
	})
	t.Run("same holder", func(t *testing.T) {
		a := newArb()
		a.Acquire(1, 0)
		a.Release(1, 1, 10)
		a.Acquire(1, 20)
		if a.Decline(1, 2, 30) {
			t.Fatal("a term after the same node's undone")
		}
	})
	t.Run("renewed", func(t *testing.T) {
		a := newArb()
		handOver(t, a)
		if d := a.Renew(2, 2, 30); !d.Granted {
			t.Fatalf("renew: %+v", d)
		}
		if a.Decline(2, 2, 40) {
			t.Fatal("a term whose holder renewed it undone")
		}
	})
	t.Run("restored", func(t *testing.T) {
		a := newArb()
		handOver(t, a)
		if err := a.Restore(a.persistentForTest(), 30); err != nil {
			t.Fatal(err)
		}
		if a.Decline(2, 2, 2000) {
			t.Fatal("a grant from before the restart undone")
		}
		if q := a.Query(2000); q.LastHolder != 2 {
			t.Fatalf("last holder %d, want 2", q.LastHolder)
		}
	})
}

// handOver: node 1 leads epoch 1 with node 2 in sync and releases; node
// 2 is granted epoch 2 at 20.
func handOver(t *testing.T, a *Arbiter) {
	t.Helper()
	a.Acquire(1, 0)
	a.RenewWithInSync(1, 1, 1, []NodeID{2}, 5)
	a.Release(1, 1, 10)
	if d := a.Acquire(2, 20); !d.Granted || d.Epoch != 2 {
		t.Fatalf("node 2: %+v", d)
	}
}

// TestDenyRun: a refusal to the last holder says how many of the newest
// epochs were all granted to it; to anyone else, nothing. A grant to
// another node starts a new run; a restart knows only the restored epoch;
// an undone grant leaves the restored holder no run.
func TestDenyRun(t *testing.T) {
	a, err := NewArbiter(testConfig) // lease 1000
	if err != nil {
		t.Fatal(err)
	}
	a.Acquire(1, 0)
	a.RenewWithInSync(1, 1, 1, []NodeID{2}, 10)
	// Node 1 asks again and again (its grants lost): epochs 2, 3, 4.
	for i, now := range []int64{1100, 2200, 3300} {
		if d := a.Acquire(1, now); !d.Granted || d.Epoch != uint64(i+2) {
			t.Fatalf("acquire %d: %+v", i, d)
		}
	}
	if d := a.Renew(1, 1, 3400); d.Granted || d.Epoch != 4 || d.Run != 4 {
		t.Fatalf("node 1's refused renew of epoch 1: %+v, want run 4 (epochs 1..4 all its)", d)
	}
	if d := a.Acquire(2, 3500); d.Granted || d.Run != 0 {
		t.Fatalf("node 2 (not the holder): %+v", d)
	}
	a.Release(1, 4, 3600)
	if d := a.Acquire(2, 3700); !d.Granted || d.Epoch != 5 {
		t.Fatalf("member node 2: %+v", d)
	}
	if d := a.Renew(2, 4, 3800); d.Run != 1 {
		t.Fatalf("node 2's run after one grant: %+v", d)
	}
	if err := a.Restore(a.persistentForTest(), 3900); err != nil {
		t.Fatal(err)
	}
	if d := a.Acquire(2, 4000); d.Granted || d.Run != 1 {
		t.Fatalf("after a restart: %+v, want run 1 (the restored epoch)", d)
	}
}
