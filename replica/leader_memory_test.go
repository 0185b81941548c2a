package replica

import (
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/sequencer"
)

// newTerm starts a term of the default sizes (a node's) in mem (nil: new
// memory), continuing after applied.
func newTerm(tb testing.TB, mem *LeaderMemory, epoch, applied uint64) *Leader[string] {
	tb.Helper()
	return newTermOf(tb, termConfig(epoch, applied, mem), testEngine(tb))
}

func newTermOf(tb testing.TB, cfg LeaderConfig, eng engine.StateMachine) *Leader[string] {
	tb.Helper()
	p, err := NewPrimary(PrimaryConfig{Self: 1, Epoch: cfg.Epoch, Peers: []uint32{2}}, &InSync{}, nil, cfg.Applied, cfg.Applied, 0)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := NewLeader[string](cfg, p, eng, &nopJournal{}, NewSessions[string](8), &testRecorder{}, &testRing{})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func testEngine(tb testing.TB) engine.StateMachine {
	eng, err := engine.New(engine.Config{MaxInstruments: 4, MaxOrders: 1 << 12, MaxSessions: 8, DedupWindow: 64, MaxOrderQty: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	return eng
}

// termConfig is a term's configuration at a node's default sizes
// (nodeconfig.DefaultPublisherCapacity, the sequencer's default ring).
func termConfig(epoch, applied uint64, mem *LeaderMemory) LeaderConfig {
	return LeaderConfig{Sequencer: sequencer.Config{Stream: 9, Node: 1}, Epoch: epoch, Applied: applied,
		PublisherCapacity: 1 << 16, HashEvery: 16, SnapshotEvery: 1 << 40, Memory: mem}
}

// A term started in an earlier term's memory starts as one in new
// memory does: nothing queued, the sequencer at applied+1 with an empty
// ring; the earlier term's outputs are gone. TakeQueued hands the
// displaced publisher to the old term, so its Memory is whole.
func TestLeaderMemoryReused(t *testing.T) {
	mem, err := NewLeaderMemory(termConfig(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	a := newTerm(t, mem, 2, 10)
	if err := a.pub.Enqueue(11, OutSlot{To: 5}); err != nil {
		t.Fatal(err)
	}
	a.seqr.Heartbeat(1)
	b := newTerm(t, a.Memory(), 3, 40)
	if b.Queued() != 0 || b.pub.Stats().Enqueued != 0 || b.seqr.LastAssigned() != 40 || b.seqr.HighestSent() != 40 || len(b.seqr.Outbox()) != 0 {
		t.Fatalf("reused term: queued %d (enqueued %d), last %d, sent %d, outbox %d; want a fresh term after 40",
			b.Queued(), b.pub.Stats().Enqueued, b.seqr.LastAssigned(), b.seqr.HighestSent(), len(b.seqr.Outbox()))
	}
	if b.pub != mem.pub {
		t.Fatal("the reused term allocated a new publisher")
	}
	// A new term of the same process keeps the old one's queue.
	if err := b.pub.Enqueue(41, OutSlot{To: 5}); err != nil {
		t.Fatal(err)
	}
	spare, err := NewLeaderMemory(termConfig(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := newTerm(t, spare, 4, 41)
	c.TakeQueued(b)
	if c.Queued() != 1 || b.Memory().pub != spare.pub {
		t.Fatalf("after TakeQueued: %d queued in the new term; the old term's memory must hold the displaced publisher", c.Queued())
	}
	// Memory of another size is not used.
	small := termConfig(5, 0, nil)
	small.PublisherCapacity = 256
	smallMem, err := NewLeaderMemory(small)
	if err != nil {
		t.Fatal(err)
	}
	if d := newTerm(t, smallMem, 6, 0); d.pub == smallMem.pub || d.pub.Cap() != 1<<16+OutputReserve {
		t.Fatalf("memory of capacity %d reused for a term of %d", smallMem.pub.Cap(), 1<<16+OutputReserve)
	}
}

// BenchmarkPromotionMemory: what starting a term costs with the memory
// allocated on the promotion's path (new) and handed from the previous
// term (reused).
func BenchmarkPromotionMemory(b *testing.B) {
	eng := testEngine(b)
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			newTermOf(b, termConfig(uint64(i+1), 0, nil), eng)
		}
	})
	b.Run("reused", func(b *testing.B) {
		b.ReportAllocs()
		mem, err := NewLeaderMemory(termConfig(0, 0, nil))
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			mem = newTermOf(b, termConfig(uint64(i+1), 0, mem), eng).Memory()
		}
	})
}
