package pace

import "testing"

// fakePark records every park and advances the fake clock by the time
// asked (or by arriveAfterNs when an arrival comes sooner).
type fakePark struct {
	clk           *fakeClock
	timeouts      []int64
	arriveAtNs    int64 // an input arrives at this time (0: none)
	readyReported int
}

func (p *fakePark) park(timeoutNs int64) bool {
	p.timeouts = append(p.timeouts, timeoutNs)
	wake := p.clk.nowNs + timeoutNs
	if p.arriveAtNs > 0 && p.arriveAtNs >= p.clk.nowNs && p.arriveAtNs < wake {
		p.clk.nowNs = p.arriveAtNs
		p.arriveAtNs = 0
		p.readyReported++
		return true
	}
	p.clk.nowNs = wake
	return false
}

// TestUntilParksToMargin: with ParkNs the Waiter parks once, until
// SpinNs before the due time, polls once after the park, then spins the
// rest on the clock without polling, yielding or parking again.
func TestUntilParksToMargin(t *testing.T) {
	clk := &fakeClock{nowNs: 0, stepNs: 100}
	p := &fakePark{clk: clk}
	polls := 0
	w := NewWaiter(WaiterConfig{SpinNs: 5_000, Now: clk.now, ParkNs: p.park,
		Yield: func() { t.Fatal("yielded in park mode") }})
	got := w.Until(100_000, func(int64) int { polls++; return 0 })
	if got < 100_000 {
		t.Fatalf("Until returned %d before due", got)
	}
	// First reading 0: park for 100000-5000-0.
	if len(p.timeouts) != 1 || p.timeouts[0] != 95_000 {
		t.Fatalf("parks %v, want one of 95000 ns", p.timeouts)
	}
	if polls != 1 {
		t.Fatalf("polled %d times, want 1 (after the park only)", polls)
	}
}

// TestUntilParkWakesOnArrival: an arrival ends the park, poll handles
// it, and the Waiter parks again for the rest, never past due − SpinNs.
func TestUntilParkWakesOnArrival(t *testing.T) {
	clk := &fakeClock{nowNs: 0, stepNs: 100}
	p := &fakePark{clk: clk, arriveAtNs: 40_000}
	var polledAt []int64
	w := NewWaiter(WaiterConfig{SpinNs: 5_000, Now: clk.now, ParkNs: p.park})
	w.Until(100_000, func(nowNs int64) int { polledAt = append(polledAt, nowNs); return 1 })
	if p.readyReported != 1 || len(p.timeouts) != 2 {
		t.Fatalf("parks %v (ready %d), want two: one cut short by the arrival", p.timeouts, p.readyReported)
	}
	if len(polledAt) != 2 || polledAt[0] < 40_000 || polledAt[0] > 41_000 {
		t.Fatalf("polls at %v, want the first right after the arrival at 40000", polledAt)
	}
	// The second park starts at the loop's reading after the poll's
	// (40100): it ends at 95000 exactly, the margin before due.
	start := int64(40_000 + 100)
	if p.timeouts[1] != 95_000-start {
		t.Fatalf("second park %d ns, want %d (until due − SpinNs)", p.timeouts[1], 95_000-start)
	}
}

// TestUntilParkShortWaitSpins: a wait within the margin never parks;
// it only checks for input (a zero-timeout ParkNs) every SpinCheckNs, and
// polls when that finds some. A due time already past returns at once.
func TestUntilParkShortWaitSpins(t *testing.T) {
	clk := &fakeClock{nowNs: 0, stepNs: 500}
	checks, polls := 0, 0
	ready := false
	w := NewWaiter(WaiterConfig{Now: clk.now, ParkNs: func(ns int64) bool {
		if ns != 0 {
			t.Fatalf("parked %d ns within the margin", ns)
		}
		checks++
		return ready
	}})
	if w.spinNs != ParkSpinNsDefault || w.checkNs != SpinCheckNsDefault {
		t.Fatalf("spin margin %d check %d, want the defaults", w.spinNs, w.checkNs)
	}
	w.Until(ParkSpinNsDefault, func(int64) int { polls++; return 0 })
	// Readings 0, 500, ..., 9500: checks at 5000 only (from 0, every 5 µs).
	if checks != 1 || polls != 0 {
		t.Fatalf("%d checks, %d polls; want 1 check and no poll (nothing readable)", checks, polls)
	}
	ready = true
	w.Until(clk.nowNs+ParkSpinNsDefault, func(int64) int { polls++; return 0 })
	if polls == 0 {
		t.Fatal("input found in the margin was not polled")
	}
	if w.Parks(0, ParkSpinNsDefault) || !w.Parks(0, ParkSpinNsDefault+1) {
		t.Fatal("Parks disagrees with Until's margin")
	}
	if NewWaiter(WaiterConfig{}).Parks(0, 1e9) {
		t.Fatal("Parks true without ParkNs")
	}
	never := NewWaiter(WaiterConfig{Now: clk.now, SpinCheckNs: -1, ParkNs: func(int64) bool { t.Fatal("checked with SpinCheckNs < 0"); return false }})
	never.Until(clk.nowNs+ParkSpinNsDefault, func(int64) int { return 0 })
}

// TestUntilParkLearnsLateWakeups: parks that wake 20 µs late teach the
// Waiter to end them 20 µs earlier, so after the first the wake-up comes
// before due − SpinNs; the estimate decays when wake-ups are on time and
// never exceeds ParkLateMaxNs.
func TestUntilParkLearnsLateWakeups(t *testing.T) {
	clk := &fakeClock{stepNs: 100}
	lateNs := int64(20_000)
	var wokeEarlyEnough []bool
	var due int64
	w := NewWaiter(WaiterConfig{SpinNs: 5_000, SpinCheckNs: -1, Now: clk.now, ParkNs: func(ns int64) bool {
		clk.nowNs += ns + lateNs
		wokeEarlyEnough = append(wokeEarlyEnough, clk.nowNs <= due-5_000)
		return false
	}})
	for i := 0; i < 5; i++ {
		due = clk.nowNs + 100_000
		if got := w.Until(due, nil); got-due > 1_000 {
			if i > 0 {
				t.Fatalf("wait %d: returned %d ns late after learning", i, got-due)
			}
		}
	}
	if wokeEarlyEnough[0] || !wokeEarlyEnough[len(wokeEarlyEnough)-1] {
		t.Fatalf("wake-ups early enough: %v; want the first late, the later ones not", wokeEarlyEnough)
	}
	if w.parkLateNs < 20_000 || w.parkLateNs > 21_000 {
		t.Fatalf("learnt lateness %d, want ~20000", w.parkLateNs)
	}
	lateNs = 0
	for i := 0; i < 200; i++ {
		w.Until(clk.nowNs+100_000, nil)
	}
	if w.parkLateNs > 1_000 {
		t.Fatalf("learnt lateness %d after 200 on-time parks, want it decayed", w.parkLateNs)
	}
	lateNs = 10_000_000 // a 10 ms preemption
	w.Until(clk.nowNs+100_000, nil)
	if w.parkLateNs != ParkLateMaxNs {
		t.Fatalf("learnt lateness %d after a preemption, want the cap %d", w.parkLateNs, ParkLateMaxNs)
	}
}

// TestUntilParkNoAlloc: the parked wait does not allocate.
func TestUntilParkNoAlloc(t *testing.T) {
	clk := &fakeClock{stepNs: 100}
	p := &fakePark{clk: clk, timeouts: make([]int64, 0, 1024)}
	w := NewWaiter(WaiterConfig{Now: clk.now, ParkNs: p.park})
	poll := func(int64) int { return 0 }
	allocs := testing.AllocsPerRun(100, func() {
		p.timeouts = p.timeouts[:0]
		w.Until(clk.nowNs+100_000, poll)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per Until, want 0", allocs)
	}
}

// TestUntilLooseNeverSpins: a loose wait parks until its learnt lateness
// before due, never before due − slack, polls after each park, and
// returns at the first wake-up at or past that without spinning on the
// clock; an arrival mid-way parks again for the rest.
func TestUntilLooseNeverSpins(t *testing.T) {
	clk := &fakeClock{nowNs: 0, stepNs: 100}
	p := &fakePark{clk: clk, arriveAtNs: 30_000}
	polls := 0
	w := NewWaiter(WaiterConfig{Now: clk.now, ParkNs: p.park,
		Yield: func() { t.Fatal("yielded in park mode") }})
	w.parkLateNs = 20_000
	got := w.UntilLoose(100_000, 50_000, func(int64) int { polls++; return 1 })
	if got < 80_000 || got > 80_000+2*clk.stepNs {
		t.Fatalf("returned at %d, want at the park's end, 80000 (due − lateness)", got)
	}
	if len(p.timeouts) != 2 || p.timeouts[0] != 80_000 || p.readyReported != 1 {
		t.Fatalf("parks %v (ready %d), want one of 80000 cut by the arrival, then the rest", p.timeouts, p.readyReported)
	}
	if polls != 2 {
		t.Fatalf("polled %d times, want once after each park", polls)
	}
	// A lateness above the slack: never return before due − slack.
	clk.nowNs = 0
	p.timeouts = nil
	w.parkLateNs = 60_000
	if got := w.UntilLoose(100_000, 10_000, nil); got < 90_000 {
		t.Fatalf("returned at %d, before due − slack (90000)", got)
	}
	if len(p.timeouts) != 1 || p.timeouts[0] != 90_000 {
		t.Fatalf("parks %v, want one until due − slack", p.timeouts)
	}
	// Past due: at once, no park.
	p.timeouts = nil
	clk.nowNs = 200_000
	if got := w.UntilLoose(100_000, 10_000, nil); got < 200_000 || len(p.timeouts) != 0 {
		t.Fatalf("past due: returned %d after parks %v", got, p.timeouts)
	}
}

// TestUntilLooseWithoutParkIsUntil: without ParkNs there is no park to
// be loose with; the wait is Until's.
func TestUntilLooseWithoutParkIsUntil(t *testing.T) {
	clk := &fakeClock{nowNs: 0, stepNs: 1_000}
	w := NewWaiter(WaiterConfig{Now: clk.now, Yield: func() {}})
	if got := w.UntilLoose(50_000, 40_000, nil); got < 50_000 {
		t.Fatalf("returned at %d, before due", got)
	}
}
