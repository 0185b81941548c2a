package mdfeed

import (
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// TestMDPublishPathAllocs: the primary's per-command path (Add, Full,
// Publish, HeartbeatDue) never allocates, nor does answering a known
// requester's range request.
func TestMDPublishPathAllocs(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 1024, ReserveUpdates: 8, HeartbeatEveryNs: 10})
	b := wire.NewBatch(0)
	payloads := make([][]byte, 1<<12)
	for i := range payloads {
		payloads[i] = update(uint64(i + 1))
	}
	cmd, now := uint64(0), int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		cmd++
		now += 3
		if f.Full() {
			t.Fatal("full")
		}
		for range 3 { // three updates per command
			f.Add(cmd, payloads[(f.Stats().RingLast)%uint64(len(payloads))])
		}
		for f.Publish(b, origin, cmd, ^uint64(0)) > 0 {
			_ = b.Bytes()
		}
		f.HeartbeatDue(cmd, now)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per command", allocs)
	}
	if st := f.Stats(); st.Released < 3000 || st.Released != st.RingLast {
		t.Fatalf("published %d of %d", st.Released, st.RingLast)
	}
	f.Request(1, rangeReq(f.Released()-100, 100), now, nil)
	drain(t, f)
	allocs = testing.AllocsPerRun(100, func() {
		now += RefillNs * 4
		f.Request(1, rangeReq(f.Released()-100, 100), now, nil)
		for _, _, ok := f.Next(origin); ok; _, _, ok = f.Next(origin) {
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per range request", allocs)
	}
}

func BenchmarkPublish(b *testing.B) {
	f := newFeed(b, Config{RingUpdates: 1 << 16})
	batch := wire.NewBatch(0)
	o := engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDLevel, Instrument: 1, Side: engine.Buy, Price: 1, Qty: 1}
	p := make([]byte, 0, SlotBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		cmd := uint64(i + 1)
		o.MDSeq = cmd
		p = engine.AppendOutput(p[:0], &o)
		f.Add(cmd, p)
		for f.Publish(batch, origin, cmd, ^uint64(0)) > 0 {
		}
	}
}
