package engine

import (
	"bytes"
	"testing"
)

// TestResendAppliedOnce: a resend changes no state (beyond AppliedSeq) and
// its Duplicate carries the original result byte for byte, also after a
// failover modelled as snapshot and restore into another engine.
func TestResendAppliedOnce(t *testing.T) {
	orig := []([]byte){
		limitCmd(1, 1, 0, Buy, 100, 5),  // ack
		limitCmd(2, 1, 0, Sell, 100, 2), // ack + fills
		limitCmd(1, 2, 9, Buy, 100, 5),  // reject
		cancelCmd(1, 3, 1),              // cancelled
	}
	e := mustNew(t, testConfig())
	var rec recorder
	var results [][]byte
	for i, c := range orig {
		e.Apply(uint64(i+1), c, &rec)
		outs := rec.take()
		results = append(results, outs[0].payload)
	}
	seq := uint64(len(orig))
	check := func(e *Engine, label string) {
		t.Helper()
		for i, c := range orig {
			sum, resting, ids := e.hashSum, e.RestingOrders(), e.nextOrderID
			seq++
			e.Apply(seq, c, &rec)
			outs := rec.take()
			if len(outs) != 1 {
				t.Fatalf("%s resend %d: %d outputs", label, i, len(outs))
			}
			want := append([]byte{byte(KindDuplicate)}, results[i]...)
			if outs[0].to == MarketData || !bytes.Equal(outs[0].payload, want) {
				t.Errorf("%s resend %d: got %x want %x", label, i, outs[0].payload, want)
			}
			if e.hashSum != sum || e.RestingOrders() != resting || e.nextOrderID != ids {
				t.Errorf("%s resend %d changed state", label, i)
			}
		}
	}
	check(e, "same engine")
	var snap bytes.Buffer
	if err := e.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	f := mustNew(t, testConfig())
	if err := f.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	check(f, "after failover")
}

// TestDedupWindow walks the window rule: ids at or below hi-window are too
// old and not applied; ids inside it are applied once.
func TestDedupWindow(t *testing.T) {
	e := mustNew(t, testConfig()) // window 4
	var rec recorder
	seq := uint64(0)
	send := func(clOrd uint64) string {
		seq++
		e.Apply(seq, limitCmd(1, clOrd, 0, Buy, 90, 1), &rec)
		outs := formatAll(t, rec.take())
		if len(outs) == 0 {
			return ""
		}
		return outs[0]
	}
	steps := []struct {
		clOrd uint64
		want  string
	}{
		{1, "s1 ack c1 o1 i0 B L 90x1"},
		{10, "s1 ack c10 o2 i0 B L 90x1"}, // gaps are fine; hi = 10
		{6, "s1 reject c6 too-old"},       // 10-6 = 4 = window
		{7, "s1 ack c7 o3 i0 B L 90x1"},   // never seen, inside window
		{7, "s1 dup[ack c7 o3 i0 B L 90x1]"},
		{10, "s1 dup[ack c10 o2 i0 B L 90x1]"},
		{1, "s1 reject c1 too-old"},
		{11, "s1 ack c11 o4 i0 B L 90x1"},
		{10, "s1 dup[ack c10 o2 i0 B L 90x1]"},
		{15, "s1 reject c15 book-full"}, // results that are rejects are recorded too
		{15, "s1 dup[reject c15 book-full]"},
		{11, "s1 reject c11 too-old"},
		{14, "s1 reject c14 book-full"}, // its slot holds stale c10: applied, not a duplicate
	}
	for i, s := range steps {
		if got := send(s.clOrd); got != s.want {
			t.Errorf("step %d (c%d): got %q want %q", i, s.clOrd, got, s.want)
		}
	}
}
