package sequencer

import "testing"

func TestSnapshotBudgetBoundsEachStandby(t *testing.T) {
	b := NewSnapshotBudget(2, 1000)
	const chunks = 10
	for i := 0; i < 2*chunks; i++ {
		if ok, _ := b.Allow(2, 100, chunks, 10); !ok {
			t.Fatalf("chunk %d refused inside the budget", i)
		}
	}
	ok, first := b.Allow(2, 100, chunks, 10)
	if ok || !first {
		t.Fatalf("past the budget: ok %v first %v", ok, first)
	}
	if ok, first := b.Allow(2, 100, chunks, 10); ok || first {
		t.Fatalf("second refusal: ok %v first %v (logged once)", ok, first)
	}
	// Another standby has its own budget; a new snapshot starts over.
	if ok, _ := b.Allow(3, 100, chunks, 10); !ok {
		t.Fatal("another standby refused")
	}
	// The window renews the budget, without logging again.
	if ok, first := b.Allow(2, 100, chunks, 1010); !ok || first {
		t.Fatalf("after the window: ok %v first %v", ok, first)
	}
	if ok, _ := b.Allow(2, 200, chunks, 1011); !ok {
		t.Fatal("a new snapshot refused")
	}
	if b.Refused() != 2 || b.Served(2) != 1 || b.Served(3) != 1 {
		t.Fatalf("refused %d served %d %d", b.Refused(), b.Served(2), b.Served(3))
	}
}
