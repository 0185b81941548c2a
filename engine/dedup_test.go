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
			sum, resting, ids := e.sum(), e.RestingOrders(), e.nextOrderID
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
			if e.sum() != sum || e.RestingOrders() != resting || e.nextOrderID != ids {
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

// FuzzAnswer: Answer agrees with Apply. Before each command is applied,
// Answer is asked: it never changes the state; when it answers, Apply
// then emits exactly the same outputs and changes nothing but AppliedSeq;
// when it does not, Apply records something (a result or a session) or the
// command has no valid header.
func FuzzAnswer(f *testing.F) {
	f.Add(joinCommands(limitCmd(1, 1, 0, Buy, 100, 5), limitCmd(1, 1, 0, Buy, 100, 5), limitCmd(2, 1, 0, Sell, 99, 7), cancelCmd(2, 2, 2), cancelCmd(2, 2, 2)))
	f.Add(joinCommands(limitCmd(1, 9, 1, Buy, 1, 1), limitCmd(1, 2, 1, Buy, 1, 1), limitCmd(1, 0, 1, Buy, 1, 1), limitCmd(3, 1, 0, Buy, 1, 1), limitCmd(4, 1, 0, Buy, 1, 1), limitCmd(5, 1, 0, Buy, 1, 1)))
	f.Add([]byte{16, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	cfg := Config{MaxInstruments: 2, MaxOrders: 6, MaxSessions: 3, DedupWindow: 4, MaxOrderQty: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := mustNew(t, cfg)
		var asked, applied recorder
		for i, c := range splitCommands(data) {
			hash, sum, md, next := e.StateHash(), e.sum(), e.mdSeq, e.nextOrderID
			answered := e.Answer(c, &asked)
			want := asked.take()
			if e.StateHash() != hash {
				t.Fatalf("cmd %d: Answer changed the state", i)
			}
			if !answered && len(want) != 0 {
				t.Fatalf("cmd %d: not answered, yet %d outputs", i, len(want))
			}
			e.Apply(uint64(i+1), c, &applied)
			got := applied.take()
			_, perr := ParseCommand(c)
			unchanged := e.sum() == sum && e.mdSeq == md && e.nextOrderID == next
			switch {
			case answered && !unchanged:
				t.Fatalf("cmd %d: answered from the table, but Apply changed the state", i)
			case answered && !equalOutputs(got, want):
				t.Fatalf("cmd %d: Answer %v, Apply %v", i, formatAll(t, want), formatAll(t, got))
			case !answered && unchanged && perr == nil:
				t.Fatalf("cmd %d: not answered, yet Apply changed nothing (%v)", i, formatAll(t, got))
			}
		}
	})
}

func TestAnswerDoesNotAllocate(t *testing.T) {
	e := mustNew(t, testConfig())
	var d discard
	cmd := limitCmd(1, 1, 0, Buy, 100, 5)
	e.Apply(1, cmd, &d)
	if !e.Answer(cmd, &d) {
		t.Fatal("a resend of an applied command is not answered")
	}
	if a := testing.AllocsPerRun(100, func() { e.Answer(cmd, &d) }); a != 0 {
		t.Fatalf("Answer allocates %.1f per call", a)
	}
}
