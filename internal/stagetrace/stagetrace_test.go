package stagetrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	r, err := NewRecorder(100, ColIntended, ColSent, ColReceived)
	if err != nil {
		t.Fatal(err)
	}
	r.Set(0, 3, 300)
	r.Set(1, 7, -5)
	r.Stamp(2, 4, 42)
	r.Set(0, 1000, 1) // past capacity: ignored
	path := filepath.Join(t.TempDir(), "client.trace")
	h := Header{Role: RoleClient, ID: 9, Pid: 1234, Mallocs: 5, Syscalls: 6, Commands: 7, GOMAXPROCS: 2,
		WindowClosed: true, WindowFrom: 11, WindowTo: 12, WindowMallocs: 13, WindowSyscalls: 14, WindowCPUNs: 15}
	if err := r.WriteFile(path, h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header != h {
		t.Fatalf("header %+v, want %+v", got.Header, h)
	}
	// Rows up to the highest written (7) are kept.
	want := map[string][]int64{
		ColIntended: {0, 0, 0, 300, 0, 0, 0, 0},
		ColSent:     {0, 0, 0, 0, 0, 0, 0, -5},
		ColReceived: {0, 42, 42, 42, 42, 0, 0, 0},
	}
	for name, w := range want {
		c := got.Col(name)
		if len(c) != len(w) {
			t.Fatalf("%s: %d rows, want %d", name, len(c), len(w))
		}
		for i := range w {
			if c[i] != w[i] {
				t.Fatalf("%s[%d] = %d, want %d", name, i, c[i], w[i])
			}
		}
	}
}

// sampleTrace is a client's trace of one column, its rows up to 5.
func sampleTrace(t testing.TB) []byte {
	r, _ := NewRecorder(10, ColSent)
	r.Set(0, 5, 1)
	var b bytes.Buffer
	if err := r.Write(&b, Header{Role: RoleClient}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadRejectsGarbage(t *testing.T) {
	full := sampleTrace(t)
	for i := range len(full) {
		if _, err := Read(bytes.NewReader(full[:i])); !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix %d: %v, want ErrFormat", i, err)
		}
	}
	if _, err := Read(bytes.NewReader(full)); err != nil {
		t.Fatal(err)
	}
}

// TestRecorderAllocatesNothing: the hot path (Set, Stamp) is an index
// store.
func TestRecorderAllocatesNothing(t *testing.T) {
	r, _ := NewRecorder(1<<12, ColSequenced, ColReleased)
	var seq uint64
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		r.Set(0, seq, int64(seq))
		r.Stamp(1, seq, int64(seq))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record", allocs)
	}
}

// synthetic builds three processes' traces for n commands of session 5
// where every stage takes a known time: command i (1..n) is intended at
// base+1000i, sent i ns late, sequenced 100 ns after, applied at the
// standby +200, acked +300, durable +50, released +400, received +2i.
// The primary sequences them in reverse order of id pairs, so the join
// must go through the order id column, not the row.
func synthetic(t *testing.T, n int) (client, primary, standby *Trace) {
	t.Helper()
	dir := t.TempDir()
	cr, _ := NewRecorder(n, ColIntended, ColSent, ColReceived)
	pr, _ := NewRecorder(n, ColSequenced, ColSession, ColOrderID, ColAcked, ColDurable, ColReleased)
	sr, _ := NewRecorder(n, ColApplied)
	const base = int64(1e12)
	for i := 1; i <= n; i++ {
		id := uint64(i)
		seq := uint64(n + 1 - i) // reversed
		intended := base + 1000*int64(i)
		sent := intended + int64(i)
		sq := sent + 100
		rel := sq + 400
		cr.Set(0, id, intended)
		cr.Set(1, id, sent)
		cr.Set(2, id, rel+2*int64(i))
		pr.Set(0, seq, sq)
		pr.Set(1, seq, 5)
		pr.Set(2, seq, int64(id))
		pr.Set(3, seq, sq+300)
		pr.Set(4, seq, sq+50)
		pr.Set(5, seq, rel)
		sr.Set(0, seq, sq+200)
	}
	write := func(r *Recorder, h Header) *Trace {
		p := filepath.Join(dir, h.Role)
		if err := r.WriteFile(p, h); err != nil {
			t.Fatal(err)
		}
		tr, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	return write(cr, Header{Role: RoleClient, ID: 5}), write(pr, Header{Role: RolePrimary, ID: 1}), write(sr, Header{Role: RoleStandby, ID: 2})
}

func TestMergeKnownAnswers(t *testing.T) {
	client, primary, standby := synthetic(t, 1000)
	m, err := Merge(client, primary, []*Trace{standby}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if m.Commands != 900 || m.Unanswered != 0 || m.Unmatched != 0 || m.Backwards != 0 {
		t.Fatalf("commands %d unanswered %d unmatched %d backwards %d", m.Commands, m.Unanswered, m.Unmatched, m.Backwards)
	}
	// ids 101..1000. intended->sent = i: p50 is id 550, max 1000.
	// end-to-end = i + 100 + 400 + 2i = 3i + 500; from sent = 2i + 500.
	type want struct{ p50, p99, max int64 }
	cases := map[string]want{
		StageIntendedToSent: {550, 991, 1000},
		StageSequenced:      {100, 100, 100},
		StageStandby:        {200, 200, 200},
		StageAcked:          {300, 300, 300},
		StageDurable:        {50, 50, 50},
		StageReleased:       {400, 400, 400},
		StageReceived:       {1100, 1982, 2000},
		StageEndToEnd:       {2150, 3473, 3500},
		StageEndToEndSent:   {1600, 2482, 2500},
	}
	// ids 101..1000 are intended 1 µs apart: all within the first second.
	if len(m.Intervals) != 1 || m.Intervals[0].TotalCount() != 900 {
		t.Fatalf("%d intervals", len(m.Intervals))
	}
	// id 101 is the first measured: intended base+101000, sent 101 later;
	// id 1000 received last at base+1000000+1000+500+2000.
	const base = int64(1e12)
	if m.FirstIntendedNs != base+101_000 || m.FirstSentNs != base+101_101 || m.LastReceivedNs != base+1_003_500 {
		t.Fatalf("bounds %d %d %d", m.FirstIntendedNs-base, m.FirstSentNs-base, m.LastReceivedNs-base)
	}
	for stage, w := range cases {
		h := m.Hist[stage]
		if h.TotalCount() != 900 {
			t.Errorf("%s: %d samples, want 900", stage, h.TotalCount())
		}
		// HDR at 3 digits is exact below 2048 and within 1 ns per
		// 1024 above: the values here are exact or off by one bucket.
		if got := h.ValueAtQuantile(50); !near(got, w.p50) {
			t.Errorf("%s p50 = %d, want %d", stage, got, w.p50)
		}
		if got := h.ValueAtQuantile(99); !near(got, w.p99) {
			t.Errorf("%s p99 = %d, want %d", stage, got, w.p99)
		}
		if got := h.Max(); !near(got, w.max) {
			t.Errorf("%s max = %d, want %d", stage, got, w.max)
		}
	}
}

// near: equal below 2048 (exact in HDR at 3 digits), within HDR's 1/1024
// above.
func near(got, want int64) bool {
	if want < 2048 {
		return got == want
	}
	return got >= want && got <= want+want/1024
}

// TestMergeGaps: unanswered commands, another session's seqs and a
// standby that missed a seq are counted, not recorded.
func TestMergeGaps(t *testing.T) {
	client, primary, standby := synthetic(t, 10)
	client.Col(ColReceived)[3] = 0       // id 3 unanswered
	primary.Col(ColSession)[10+1-4] = 6  // id 4 sequenced for another session
	standby.Col(ColApplied)[10+1-5] = 0  // id 5 missed by the standby
	primary.Col(ColReleased)[10+1-6] = 1 // id 6 released before sequenced
	m, err := Merge(client, primary, []*Trace{standby}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Commands != 9 || m.Unanswered != 1 || m.Unmatched != 1 || m.Backwards != 1 {
		t.Fatalf("commands %d unanswered %d unmatched %d backwards %d", m.Commands, m.Unanswered, m.Unmatched, m.Backwards)
	}
	if got := m.Hist[StageIntendedToSent].TotalCount(); got != 10 {
		t.Errorf("intended->sent has %d samples, want all 10 sent", got)
	}
	if got := m.Hist[StageStandby].TotalCount(); got != 7 {
		t.Errorf("sequenced->standby has %d samples, want 7", got)
	}
	if got := m.Hist[StageReleased].TotalCount(); got != 7 {
		t.Errorf("sequenced->released has %d samples, want 7", got)
	}
	if _, err := Merge(nil, primary, nil, 0); !errors.Is(err, ErrMissing) {
		t.Fatalf("no client trace: %v", err)
	}
}

// A header claiming the most rows allowed, with none of them in the
// file, is refused as truncated without allocating them (the column grows
// as its rows arrive).
func TestReadShortFileClaimingManyRows(t *testing.T) {
	full := sampleTrace(t)
	// The row count is the header's last field: before the column's name
	// (u16 length, the name) and its rows.
	at := len(full) - 6*8 - len(ColSent) - 2 - 4
	binary.LittleEndian.PutUint32(full[at:], RowsMax+1)
	full = full[:len(full)-8] // and a row short
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Read(bytes.NewReader(full)); !errors.Is(err, ErrFormat) {
		t.Fatalf("%v, want ErrFormat", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading a %d-byte file allocated %d bytes", len(full), grew)
	}
}

// FuzzRead: Read treats its input as untrusted. For any input it never
// panics; a trace it accepts has at most ColumnsMax columns of one length
// (at most RowsMax+1), and written back by a recorder it reads the same.
func FuzzRead(f *testing.F) {
	r, _ := NewRecorder(10, ColIntended, ColSent)
	r.Set(0, 3, 300)
	r.Set(1, 7, -5)
	var b bytes.Buffer
	if err := r.Write(&b, Header{Role: RoleClient, ID: 2, WindowClosed: true, WindowFrom: 1, WindowTo: 9}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:20])
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(tr.Columns) > ColumnsMax {
			t.Fatalf("%d columns", len(tr.Columns))
		}
		rows := -1
		for name, c := range tr.Columns {
			if rows >= 0 && len(c) != rows {
				t.Fatalf("column %q has %d rows, another %d", name, len(c), rows)
			}
			rows = len(c)
		}
		if rows > RowsMax+1 {
			t.Fatalf("%d rows", rows)
		}
	})
}
