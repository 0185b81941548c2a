package pace

import (
	"testing"
)

// fakeClock advances by step on every read and counts reads.
type fakeClock struct {
	nowNs, stepNs int64
	reads         int
}

func (c *fakeClock) now() int64 {
	c.reads++
	t := c.nowNs
	c.nowNs += c.stepNs
	return t
}

func TestScheduleDue(t *testing.T) {
	s := NewSchedule(1_000, 3) // 333333333.33 ns apart
	for i, want := range []int64{1_000, 333_334_333, 666_667_666, 1_000_001_000} {
		if got := s.Due(uint64(i)); got != want {
			t.Errorf("Due(%d) = %d, want %d", i, got, want)
		}
	}
	if got := s.Due(3_000_000); got != 1_000+1_000_000_000_000_000 {
		t.Errorf("Due(3e6) = %d: the schedule drifts", got)
	}
	if z := NewSchedule(5, 0); z.Due(7) != 5 {
		t.Errorf("rate 0: Due(7) = %d, want 5", z.Due(7))
	}
}

// TestUntilSpinsThenYields: far from the due time every idle pass yields;
// within SpinNs it spins (no yield); it returns the first reading ≥ due and
// polls on every pass before that with the time it read.
func TestUntilSpinsThenYields(t *testing.T) {
	clk := &fakeClock{nowNs: 0, stepNs: 1_000}
	yields := 0
	w := NewWaiter(WaiterConfig{SpinNs: 5_000, Now: clk.now, Yield: func() { yields++ }})
	var polled []int64
	got := w.Until(10_500, func(nowNs int64) int { polled = append(polled, nowNs); return 0 })
	if got != 11_000 {
		t.Fatalf("Until returned %d, want 11000 (the first reading past due)", got)
	}
	// Readings 0..10000 are before due: 11 passes, each polled.
	if len(polled) != 11 {
		t.Fatalf("polled %d times, want 11: %v", len(polled), polled)
	}
	for i, p := range polled {
		if p != int64(i)*1_000 {
			t.Fatalf("poll %d saw %d, want %d", i, p, int64(i)*1_000)
		}
	}
	// Remaining > 5000 at readings 0..5000 (10500-5000 = 5500 > 5000): 6 yields;
	// at 6000..10000 the remainder is ≤ 5000: spin.
	if yields != 6 {
		t.Fatalf("yielded %d times, want 6", yields)
	}
}

// TestUntilPastDue returns at once, without polling or yielding.
func TestUntilPastDue(t *testing.T) {
	clk := &fakeClock{nowNs: 50_000, stepNs: 1}
	w := NewWaiter(WaiterConfig{Now: clk.now, Yield: func() { t.Fatal("yielded when past due") }})
	got := w.Until(10_000, func(int64) int { t.Fatal("polled when past due"); return 0 })
	if got != 50_000 || clk.reads != 1 {
		t.Fatalf("Until = %d after %d reads, want 50000 after 1", got, clk.reads)
	}
}

// TestUntilWorkSkipsYield: a pass whose poll did work reads the clock
// again without yielding, even far from the due time.
func TestUntilWorkSkipsYield(t *testing.T) {
	clk := &fakeClock{stepNs: 10_000}
	yields, polls := 0, 0
	w := NewWaiter(WaiterConfig{SpinNs: 1, Now: clk.now, Yield: func() { yields++ }})
	w.Until(100_000, func(int64) int { polls++; return polls % 2 }) // work on odd polls
	if polls != 10 || yields != 5 {
		t.Fatalf("polls %d yields %d, want 10 and 5", polls, yields)
	}
}

// TestNeverSpin: SpinNs < 0 yields on every idle pass.
func TestNeverSpin(t *testing.T) {
	clk := &fakeClock{stepNs: 1}
	yields := 0
	w := NewWaiter(WaiterConfig{SpinNs: -1, Now: clk.now, Yield: func() { yields++ }})
	w.Until(3, nil)
	if yields != 3 {
		t.Fatalf("yields %d, want 3", yields)
	}
}

// TestSentLateness counts exactly: > 10 µs is late, 10 µs is not, early
// counts as 0, and the histogram holds every send.
func TestSentLateness(t *testing.T) {
	w := NewWaiter(WaiterConfig{Histogram: true, Now: func() int64 { return 0 }, Yield: func() {}})
	cases := []struct{ intended, sent int64 }{
		{1_000, 1_000},             // on time
		{1_000, 11_000},            // exactly 10 µs: not late
		{1_000, 11_001},            // 10.001 µs: late
		{5_000, 4_000},             // early: 0
		{0, 2_000_000},             // 2 ms: late, the max
		{100_000_000, 100_020_000}, // 20 µs: late
	}
	for _, c := range cases {
		w.Sent(c.intended, c.sent)
	}
	st := w.Stats()
	if st != (Stats{Sent: 6, Late10us: 3, MaxLateNs: 2_000_000}) {
		t.Fatalf("stats %+v, want Sent 6 Late10us 3 MaxLateNs 2000000", st)
	}
	h := w.Histogram()
	if h.TotalCount() != 6 {
		t.Fatalf("histogram holds %d, want 6", h.TotalCount())
	}
	if h.Max() < 1_999_000 || h.Max() > 2_001_000 {
		t.Fatalf("histogram max %d, want ~2000000", h.Max())
	}
	if v := h.ValueAtQuantile(30); v != 0 {
		t.Fatalf("p30 %d, want 0 (two sends on time or early)", v)
	}
	w.Reset()
	if w.Stats() != (Stats{}) || h.TotalCount() != 0 {
		t.Fatalf("Reset left %+v, %d", w.Stats(), h.TotalCount())
	}
	// A lateness past the histogram's range is clamped, not lost.
	w.Sent(0, HistogramHighestNs*2)
	if h.TotalCount() != 1 || w.Stats().MaxLateNs != HistogramHighestNs*2 {
		t.Fatalf("clamp: count %d max %d", h.TotalCount(), w.Stats().MaxLateNs)
	}
}

// TestZeroAllocs: Until (with a poll closure made once) and Sent do not
// allocate, with the real clock and sched_yield.
func TestZeroAllocs(t *testing.T) {
	w := NewWaiter(WaiterConfig{Histogram: true})
	polls := 0
	poll := func(int64) int { polls++; return 0 }
	allocs := testing.AllocsPerRun(200, func() {
		due := w.now() + 30_000 // yields, then spins
		now := w.Until(due, poll)
		w.Sent(due, now)
	})
	if allocs != 0 {
		t.Fatalf("Until+Sent: %v allocs per run, want 0", allocs)
	}
	if polls == 0 || w.Stats().Sent == 0 {
		t.Fatal("nothing ran")
	}
}

// TestUntilParksLongWaits: a wait longer than ParkAboveNs parks until
// ParkMarginNs before the due time (in whole ms), then yields and spins;
// a short wait never parks.
func TestUntilParksLongWaits(t *testing.T) {
	clk := &fakeClock{}
	var parks []int
	yields := 0
	w := NewWaiter(WaiterConfig{SpinNs: 5_000, Now: clk.now, Yield: func() { yields++; clk.nowNs += 100_000 },
		Park: func(ms int) { parks = append(parks, ms); clk.nowNs += int64(ms) * 1_000_000 }})
	got := w.Until(10_500_000, nil)
	// 10.5 ms away: park 9 ms (to 9 ms + reads), then 1.5 ms of 100 µs yields.
	if len(parks) != 1 || parks[0] != 9 {
		t.Fatalf("parks %v, want [9]", parks)
	}
	if got < 10_500_000 || yields < 10 {
		t.Fatalf("returned %d after %d yields", got, yields)
	}
	parks, clk.nowNs = nil, 0
	w.Until(1_900_000, nil)
	if len(parks) != 0 {
		t.Fatalf("a 1.9 ms wait parked: %v", parks)
	}
}
