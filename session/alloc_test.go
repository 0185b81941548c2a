package session

import (
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// TestRecordAllocs: recording an output (every command applied on every
// node goes through it) does not allocate, nor do the filters that reject
// market data and oversized outputs.
func TestRecordAllocs(t *testing.T) {
	r := New(Config{History: 1024})
	outs := make([][]byte, 64)
	for i := range outs {
		outs[i] = histOutput(uint64(i+1), uint64(i))
	}
	md := []byte{0}
	big := make([]byte, MaxOutputBytes+1)
	seq := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		r.Record(seq, 1+seq%3, outs[seq%64])
		r.Record(seq, 0, md)
		r.Record(seq, 1, big)
	})
	if allocs != 0 {
		t.Errorf("Record: %v allocs per run, want 0", allocs)
	}
	if r.Counters().ReplayRecorded == 0 {
		t.Error("nothing recorded")
	}
}

// TestAnswerAllocs: once warm, planning a request, answering it from the
// history, packing its frames and the budget do not allocate.
func TestAnswerAllocs(t *testing.T) {
	r := New(Config{History: 1024})
	for s := uint64(1); s <= 1024; s++ {
		r.Record(s, 1+s%2, histOutput(1+s/2, s))
	}
	origin := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	now, frames := int64(0), 0
	run := func() {
		now += RequestBudgetNs
		a := r.Request(Request{Session: 1, From: 300, NowNs: now, Leading: true, Released: 1024, Durable: 1024})
		f := r.Frames(&a, origin)
		for _, ok := f.Next(); ok; _, ok = f.Next() {
			frames++
		}
		_ = r.History().Plan(2, 400, 1000, MaxReplayOutputs)
	}
	run() // warm: the answer's slice grows once
	if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
		t.Errorf("Request, Frames, Plan: %v allocs per run, want 0", allocs)
	}
	if frames == 0 {
		t.Error("no frames")
	}
	var b Budget
	if allocs := testing.AllocsPerRun(1000, func() { now++; b.Allow(now) }); allocs != 0 {
		t.Errorf("Budget.Allow: %v allocs per run, want 0", allocs)
	}
}

func BenchmarkRecord(b *testing.B) {
	r := New(Config{History: DefaultHistory})
	out := histOutput(1, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.Record(uint64(i), 7, out)
	}
}

// BenchmarkRequest: a reconnect's request for a session's last 16 outputs
// in a full default history shared by 4 sessions.
func BenchmarkRequest(b *testing.B) {
	r := New(Config{History: DefaultHistory})
	for s := uint64(1); s <= DefaultHistory; s++ {
		r.Record(s, 1+s%4, histOutput(1+s/4, s))
	}
	q := Request{Session: 3, From: DefaultHistory/4 - 15, Leading: true, Released: DefaultHistory, Durable: DefaultHistory}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q.NowNs = int64(i) * RequestBudgetNs
		if a := r.Request(q); len(a.Outputs) != 16 {
			b.Fatalf("%d outputs", len(a.Outputs))
		}
	}
}
