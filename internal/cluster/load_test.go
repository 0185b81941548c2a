package cluster

import (
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/client"
)

// TestIntervalLatency: the progress line's p99 covers the answers since
// the previous line only, so a slow start or a failover does not hide
// the steady state behind it; the whole run's stays in Latency.
func TestIntervalLatency(t *testing.T) {
	newHist := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3) }
	l := &Load{acked: map[uint64]bool{}, hist: newHist(), interval: newHist()}
	for i := 0; i < 100; i++ {
		l.result(client.Result{LatencyNs: int64(time.Second)}) // a slow start
	}
	if got, n := l.IntervalLatency(99); got < 990*time.Millisecond || n != 100 {
		t.Fatalf("first interval p99 %v of %d answers, want about 1 s of 100", got, n)
	}
	for i := 0; i < 100; i++ {
		l.result(client.Result{LatencyNs: int64(40 * time.Microsecond)})
	}
	if got, n := l.IntervalLatency(99); got < 39*time.Microsecond || got > 41*time.Microsecond || n != 100 {
		t.Fatalf("second interval p99 %v of %d answers, want 40µs of 100: the start must not count", got, n)
	}
	if got, n := l.IntervalLatency(99); got != 0 || n != 0 {
		t.Fatalf("an interval without answers: p99 %v of %d, want 0 of 0", got, n)
	}
	if got := l.Latency(99); got < 990*time.Millisecond {
		t.Fatalf("whole-run p99 %v, want the slow start in it", got)
	}
}

// TestLongestSilence: the demo's "answers resumed" is the answer that
// ended the client's longest silence, not whichever answer came last
// when a status poll noticed the promotion.
func TestLongestSilence(t *testing.T) {
	newHist := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3) }
	l := &Load{acked: map[uint64]bool{}, hist: newHist(), interval: newHist()}
	if g := l.LongestSilence(); !g.To.IsZero() || g.Len() != 0 {
		t.Fatalf("no answers: silence %+v, want zero", g)
	}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, ms := range []int{0, 1, 2, 3, 50, 51, 1150, 1151, 1152, 1300, 1301} {
		l.note(client.Result{LatencyNs: 1000}, at(ms))
	}
	g := l.LongestSilence()
	if !g.From.Equal(at(51)) || !g.To.Equal(at(1150)) || g.Len() != 1099*time.Millisecond {
		t.Fatalf("longest silence %v..%v (%v), want 51 ms..1150 ms (1.099 s)", g.From.Sub(t0), g.To.Sub(t0), g.Len())
	}
}

// TestWindowSilence: a fault's window counts the longest silence an
// answer ended after its mark, from the mark when the silence began
// before it, and a new mark starts afresh.
func TestWindowSilence(t *testing.T) {
	newHist := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3) }
	l := &Load{acked: map[uint64]bool{}, hist: newHist(), interval: newHist()}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	answer := func(ms ...int) {
		for _, m := range ms {
			l.note(client.Result{LatencyNs: 1000}, at(m))
		}
	}
	answer(0, 300) // a long silence before any mark: not a window's
	l.markWindow(at(301))
	answer(302, 340, 341, 500)
	if g := l.WindowSilence(); !g.From.Equal(at(341)) || g.Len() != 159*time.Millisecond {
		t.Fatalf("window silence %v from %v, want 159 ms from 341 ms", g.Len(), g.From.Sub(t0))
	}
	l.markWindow(at(600))
	if g := l.WindowSilence(); g.Len() != 0 {
		t.Fatalf("a new window starts with %v", g.Len())
	}
	answer(700)
	if g := l.WindowSilence(); !g.From.Equal(at(600)) || g.Len() != 100*time.Millisecond {
		t.Fatalf("window silence %v from %v, want 100 ms from the mark", g.Len(), g.From.Sub(t0))
	}
	if g := l.LongestSilence(); g.Len() != 300*time.Millisecond {
		t.Fatalf("longest silence %v, want the 300 ms before the marks", g.Len())
	}
}
