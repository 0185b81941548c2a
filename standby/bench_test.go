package standby

import "testing"

func newBenchWindow(b *testing.B) *Window {
	w, err := New(Config{}, func(uint64, []byte) {})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(32)
	b.ResetTimer()
	return w
}

// BenchmarkInOrder is the steady state: every message is Applied+1.
func BenchmarkInOrder(b *testing.B) {
	w := newBenchWindow(b)
	payload := make([]byte, 32)
	for i := range b.N {
		w.OnMessage(uint64(i)+1, payload)
	}
}

// BenchmarkPairsSwapped delivers 2,1,4,3,...: every other message is copied
// into the buffer and drained by the next.
func BenchmarkPairsSwapped(b *testing.B) {
	w := newBenchWindow(b)
	payload := make([]byte, 32)
	for i := range b.N {
		seq := uint64(i) + 1
		if seq%2 == 1 {
			seq++
		} else {
			seq--
		}
		w.OnMessage(seq, payload)
	}
}

// BenchmarkLossRecovery buffers 255 messages behind a lost one, then
// receives the retransmit, which drains them all: the cost per message of
// a burst loss (including a first-gap scan on every buffered message).
func BenchmarkLossRecovery(b *testing.B) {
	w := newBenchWindow(b)
	payload := make([]byte, 32)
	const burst = 256
	base := uint64(0)
	for i := 0; i < b.N; i += burst {
		for k := uint64(2); k <= burst; k++ {
			w.OnMessage(base+k, payload)
		}
		w.OnMessage(base+1, payload)
		base += burst
	}
}

// BenchmarkGaps reports 16 gaps out of a buffer with many holes.
func BenchmarkGaps(b *testing.B) {
	w := newBenchWindow(b)
	b.SetBytes(0)
	payload := make([]byte, 32)
	for seq := uint64(2); seq < 4000; seq += 5 {
		w.OnMessage(seq, payload)
	}
	w.ObserveHighest(5000)
	var nak [16]Range
	b.ResetTimer()
	for range b.N {
		w.Gaps(nak[:0])
	}
}
