package stagetrace

import "testing"

// BenchmarkRecordFresh is a node's tracer in a bench run: seven columns
// of a fresh recorder, one row per command in seq order (Set for the
// sequenced columns, Stamp for the watermarks). The recorder is made
// outside the timer, as a node makes it before the measured window, so
// what the timer sees per row is the stores and any first touch of a
// page they pay.
func BenchmarkRecordFresh(b *testing.B) {
	const rows = 1 << 20
	names := []string{ColSequenced, ColSession, ColOrderID, ColAcked, ColDurable, ColReleased, ColApplied}
	b.ReportAllocs()
	done := 0
	for done < b.N {
		b.StopTimer()
		r, err := NewRecorder(rows, names...)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		n := min(rows, b.N-done)
		for s := uint64(1); s <= uint64(n); s++ {
			r.Set(0, s, int64(s))
			r.Set(1, s, 7)
			r.Set(2, s, int64(s))
			r.Stamp(3, s, int64(s))
			r.Stamp(4, s, int64(s))
			r.Stamp(5, s, int64(s))
			r.Set(6, s, int64(s))
		}
		done += n
	}
}
