// Package pace is the load generator's clock: a fixed-rate schedule of
// intended send times and a Waiter that waits for each one without a Go
// timer, counting how late every send left.
//
// Why no timer: the Go runtime rounds any netpoll wait under a millisecond
// up to about 1 ms, and a scheduler tick here is 4 ms, so time.Sleep(90µs)
// measured p50 1.09 ms. A generator paced by time.Sleep sends up to a
// millisecond late, and the coordinated-omission correction (latency from
// the intended send time, wrk2 style) then charges that lateness to the
// system under test. A Waiter instead polls the clock, and between clock
// reads runs the caller's poll function (read the receive socket
// non-blocking, run timers): it spins when the next send is within SpinNs
// and calls sched_yield between polls when it is further away.
//
// Usage contract:
//  1. Lock the calling goroutine to its OS thread for the whole run
//     (runtime.LockOSThread). sched_yield yields the thread, not the
//     goroutine: unlocked, the runtime could move the goroutine between
//     threads mid-wait, and a yielding goroutine without its own thread
//     holds a P other goroutines need.
//  2. For each command i: now := w.Until(s.Due(i), poll); send; then
//     w.Sent(s.Due(i), now) (or the time read just before the send).
//  3. Read Stats (and Histogram) at the end.
//
// CPU cost: for waits under ParkAboveNs (2 ms) a Waiter never sleeps, so
// the thread that runs it is always runnable. With nothing else runnable
// on its CPU, sched_yield returns at once and the wait costs a whole core;
// with other runnable threads it hands the CPU over on every pass, so on a
// loaded machine it costs its fair share. At 10k/s every wait is under
// 100 µs. For longer waits (slow rates), a caller that gives a Park
// function (e.g. bus.Parker: epoll_wait on its socket, which wakes when an
// answer arrives, so none is stamped late) sleeps until ~1 ms before the
// due time and spins and yields only for the rest; without one the loop
// spins and yields throughout.
package pace

import (
	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/internal/monotime"
)

// Defaults and limits.
const (
	// SpinNsDefault: within 20 µs of the intended time the Waiter spins
	// instead of yielding. A sched_yield that hands the CPU to another
	// thread may not come back for a time slice (~ms), so yielding close to
	// the deadline risks a late send; 20 µs is twice the lateness that
	// counts (LateNs) and ~20 empty socket polls.
	SpinNsDefault = int64(20_000)
	// LateNs: a send more than 10 µs after its intended time counts in
	// Stats.Late10us.
	LateNs = int64(10_000)
	// HistogramHighestNs is the largest intended->sent lateness the
	// histogram tracks (larger values are recorded as this): 60 s.
	HistogramHighestNs = int64(60_000_000_000)
	// HistogramSignificantDigits: 0.1 % resolution.
	HistogramSignificantDigits = 3
	// ParkAboveNs: a wait longer than 2 ms may park (WaiterConfig.Park);
	// the park ends ParkMarginNs before the due time, because a parked
	// thread may wake a scheduler tick (~1–4 ms) late, and the rest of the
	// wait spins and yields.
	ParkAboveNs  = int64(2_000_000)
	ParkMarginNs = int64(1_000_000)
	// ParkSpinNsDefault is the spin margin of a Waiter with ParkNs when
	// SpinNs is 0: it parks until 10 µs before the due time and spins only
	// for that last stretch, which covers the wake-up of a thread whose
	// timer fired (a few µs with its timer slack lowered,
	// SetThreadTimerSlack) and the spin's clock reads.
	ParkSpinNsDefault = int64(10_000)
	// ParkLateMaxNs bounds the learnt wake-up lateness of a park (see
	// WaiterConfig.ParkNs): a thread preempted for milliseconds is not a
	// wake-up a margin can cover, and must not stop the parks for long.
	ParkLateMaxNs = int64(60_000)
	// SpinCheckNsDefault: during the spin margin of a parked Waiter, the
	// socket is checked (ParkNs(0), then poll if readable) every 5 µs, so
	// an answer arriving then is stamped at most that late.
	SpinCheckNsDefault = int64(5_000)
)

// Schedule is a fixed-rate schedule: command i is due at StartNs +
// i*IntervalNs (monotime nanoseconds). IntervalNs is a float so that a
// rate such as 3/s (333333333.3 ns) does not drift.
type Schedule struct {
	StartNs    int64
	IntervalNs float64
}

// NewSchedule starts a schedule of ratePerSecond commands at startNs. A
// rate ≤ 0 gives IntervalNs 0: every command is due at once.
func NewSchedule(startNs int64, ratePerSecond float64) Schedule {
	if ratePerSecond <= 0 {
		return Schedule{StartNs: startNs}
	}
	return Schedule{StartNs: startNs, IntervalNs: 1e9 / ratePerSecond}
}

// Due is the intended send time of command i.
func (s Schedule) Due(i uint64) int64 {
	return s.StartNs + int64(float64(i)*s.IntervalNs)
}

// Stats is the generator's own lateness: how many commands were sent, how
// many left more than LateNs after their intended time, and the worst.
type Stats struct {
	Sent      uint64
	Late10us  uint64
	MaxLateNs int64
}

// WaiterConfig configures a Waiter. Zero values take the defaults.
type WaiterConfig struct {
	// SpinNs: spin (poll without yielding) while the due time is at most
	// this far away (0 means SpinNsDefault; negative means never spin).
	SpinNs int64
	// Now reads the clock (nil means monotime.Now, CLOCK_MONOTONIC).
	Now func() int64
	// Yield gives up the CPU between polls (nil means a raw sched_yield
	// syscall, which does not allocate).
	Yield func()
	// Histogram, when set, records every intended->sent lateness (ns) in a
	// preallocated HDR histogram (1 ns .. HistogramHighestNs, 3 digits).
	Histogram bool
	// Park, if set, is called for waits longer than ParkAboveNs: it should
	// block for at most timeoutMs milliseconds and return early when there
	// is input to poll (bus.Parker.Park). Never a Go timer.
	Park func(timeoutMs int)
	// ParkNs, if set, replaces the spin-and-yield loop (and Park): every
	// wait blocks in ParkNs until SpinNs before the due time (SpinNs 0
	// means ParkSpinNsDefault here) and spins on the clock alone for the
	// rest. ParkNs must block for at most timeoutNs and return early when
	// there is input (bus.Parker.ParkNs: epoll_pwait2 on the socket), so
	// an answer is handled when it arrives, not at the next send. poll is
	// called once after every park, not on the spin passes: the caller
	// reads its socket there only when ParkNs said it was readable (so no
	// receive finds it empty) and runs its timers. One syscall per wait,
	// plus one per arrival.
	//
	// A park's wake-up is late by the kernel's timer slack plus the time
	// to get the thread back on a CPU: measured ~20 µs on a Firecracker VM
	// whose idle vCPU halts (no halt polling), a few µs on bare metal. The
	// Waiter learns it (the worst of the recent timed-out parks, decaying,
	// at most ParkLateMaxNs) and ends each park that much earlier, so the
	// send is not late for it.
	ParkNs func(timeoutNs int64) (ready bool)
	// SpinCheckNs: during a parked Waiter's spin margin, check for input
	// (ParkNs(0), and poll if it is readable) at most this often (0 means
	// SpinCheckNsDefault; negative: never, input waits for the send).
	SpinCheckNs int64
}

// Waiter waits for intended send times and keeps the lateness accounts. It
// is used from one goroutine (locked to its thread); it is not safe for
// concurrent use.
type Waiter struct {
	spinNs int64
	now    func() int64
	yield  func()
	park   func(timeoutMs int)
	parkNs func(timeoutNs int64) bool
	// parkLateNs is the learnt wake-up lateness of a park; checkNs the
	// spin margin's input-check period.
	parkLateNs int64
	checkNs    int64
	stats      Stats
	hist       *hdrhistogram.Histogram
}

// NewWaiter returns a Waiter.
func NewWaiter(cfg WaiterConfig) *Waiter {
	w := &Waiter{spinNs: cfg.SpinNs, now: cfg.Now, yield: cfg.Yield, park: cfg.Park, parkNs: cfg.ParkNs, checkNs: cfg.SpinCheckNs}
	if w.checkNs == 0 {
		w.checkNs = SpinCheckNsDefault
	}
	switch {
	case w.spinNs == 0 && w.parkNs != nil:
		w.spinNs = ParkSpinNsDefault
	case w.spinNs == 0:
		w.spinNs = SpinNsDefault
	}
	if w.now == nil {
		w.now = monotime.Now
	}
	if w.yield == nil {
		w.yield = schedYield
	}
	if cfg.Histogram {
		w.hist = NewHistogram()
	}
	return w
}

// NewHistogram is the histogram shape for intended->sent lateness (ns).
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, HistogramHighestNs, HistogramSignificantDigits)
}

// Until waits until the clock reaches dueNs and returns the time it read
// (≥ dueNs). On every pass that finds dueNs still ahead it calls poll with
// the time just read (poll may be nil); poll reads the caller's socket
// without blocking, runs its timers and returns the work it did. After a
// pass with work it reads the clock again at once; after an idle pass it
// spins on when dueNs is at most SpinNs away, parks (WaiterConfig.Park)
// when it is more than ParkAboveNs away, and otherwise yields the CPU
// (sched_yield). A dueNs already past returns at once without polling: the
// caller polls after it sends, so a generator that is behind still drains
// its socket. Never a Go timer; it does not allocate.
func (w *Waiter) Until(dueNs int64, poll func(nowNs int64) int) (nowNs int64) {
	if w.parkNs != nil {
		return w.untilParked(dueNs, poll)
	}
	for {
		nowNs = w.now()
		if nowNs >= dueNs {
			return nowNs
		}
		work := 0
		if poll != nil {
			work = poll(nowNs)
		}
		remainingNs := dueNs - nowNs
		switch {
		case work > 0 || remainingNs <= w.spinNs:
		case w.park != nil && remainingNs > ParkAboveNs:
			w.park(int((remainingNs - ParkMarginNs) / 1_000_000))
		default:
			w.yield()
		}
	}
}

// untilParked is Until with WaiterConfig.ParkNs: park until SpinNs before
// dueNs (waking for input, which poll then handles), then spin on the
// clock without polling. A due time already past returns at once.
func (w *Waiter) untilParked(dueNs int64, poll func(nowNs int64) int) (nowNs int64) {
	var checkedNs int64
	for {
		nowNs = w.now()
		if nowNs >= dueNs {
			return nowNs
		}
		lead := w.parkLead()
		if dueNs-nowNs <= lead {
			// The last stretch: spin on the clock, checking for input
			// every checkNs.
			if poll != nil && w.checkNs >= 0 && nowNs-checkedNs >= w.checkNs {
				checkedNs = nowNs
				if w.parkNs(0) {
					poll(nowNs)
				}
			}
			continue
		}
		checkedNs = w.parkThenPoll(nowNs, dueNs-lead-nowNs, poll)
	}
}

// parkThenPoll parks for timeoutNs from nowNs, learns the wake-up's
// lateness when the park ran out, polls, and returns the wake-up time.
func (w *Waiter) parkThenPoll(nowNs, timeoutNs int64, poll func(nowNs int64) int) (woke int64) {
	ready := w.parkNs(timeoutNs)
	woke = w.now()
	if !ready {
		w.learnLate(woke - nowNs - timeoutNs)
	}
	if poll != nil {
		poll(woke)
	}
	return woke
}

// UntilLoose is Until for a wait whose exact end does not matter, only
// its bounds: it returns at some time in [dueNs−slackNs, dueNs] when the
// clock allows, and never spins on the clock to hit dueNs. A parked Waiter
// (ParkNs) parks until its learnt wake-up lateness before dueNs (not
// before dueNs−slackNs) and returns at the first wake-up at or past that;
// without ParkNs it is Until. A generator that sends in bursts (the
// oldest unsent command CoalesceNs late, then everything due) waits this
// way: its bursts already carry up to CoalesceNs of lateness, charged to
// the bus, and spinning out the spin margin and the wake-up lateness
// before each (up to 70 µs of every 100) took the CPU the nodes needed.
func (w *Waiter) UntilLoose(dueNs, slackNs int64, poll func(nowNs int64) int) (nowNs int64) {
	if w.parkNs == nil {
		return w.Until(dueNs, poll)
	}
	target := max(dueNs-w.parkLateNs, dueNs-max(slackNs, 0))
	for {
		nowNs = w.now()
		if nowNs >= target {
			return nowNs
		}
		w.parkThenPoll(nowNs, target-nowNs, poll)
	}
}

// parkLead is how long before a due time a park must end: the spin
// margin plus the learnt wake-up lateness.
func (w *Waiter) parkLead() int64 { return max(w.spinNs, 0) + w.parkLateNs }

// learnLate folds one timed-out park's lateness into the estimate: it
// rises at once to a worse wake-up and decays by 1/64 per park, so it
// follows the worst of the last hundred or so; clamped to ParkLateMaxNs.
func (w *Waiter) learnLate(lateNs int64) {
	decayed := w.parkLateNs - w.parkLateNs/64
	w.parkLateNs = min(max(lateNs, decayed, 0), ParkLateMaxNs)
}

// Parks reports whether Until(dueNs) called at nowNs would park (a
// Waiter with ParkNs and a due time more than its spin margin away), and
// so poll after the park: a caller that polls after each send anyway can
// skip that poll when it is true, since the park sees any input.
func (w *Waiter) Parks(nowNs, dueNs int64) bool {
	return w.parkNs != nil && dueNs-nowNs > w.parkLead()
}

// Sent records that the command intended for intendedNs left at sentNs.
// A send before its intended time counts as 0 late.
func (w *Waiter) Sent(intendedNs, sentNs int64) {
	late := max(sentNs-intendedNs, 0)
	w.stats.Sent++
	if late > LateNs {
		w.stats.Late10us++
	}
	w.stats.MaxLateNs = max(w.stats.MaxLateNs, late)
	if w.hist != nil {
		// Clamped into range, so RecordValue cannot fail.
		_ = w.hist.RecordValue(min(late, HistogramHighestNs))
	}
}

// Stats returns the lateness counters.
func (w *Waiter) Stats() Stats { return w.stats }

// Histogram is the intended->sent histogram (ns), nil unless configured.
func (w *Waiter) Histogram() *hdrhistogram.Histogram { return w.hist }

// Reset clears the counters and the histogram (after a warm-up).
func (w *Waiter) Reset() {
	w.stats = Stats{}
	if w.hist != nil {
		w.hist.Reset()
	}
}

// Yield gives the CPU to any other runnable thread (sched_yield on Linux)
// without allocating; it is the Waiter's default Yield, exported for the
// idle loops of benchmark processes.
func Yield() { schedYield() }

// LowTimerSlack lowers the calling thread's timer slack to
// ThreadTimerSlackNs (a park's timer then fires when due, not up to 50 µs
// late) and returns what puts it back (nothing to undo when refused). The
// caller holds its OS thread.
func LowTimerSlack() (restore func()) {
	prev, err := SetThreadTimerSlack(ThreadTimerSlackNs)
	if err != nil {
		return func() {}
	}
	return func() { _, _ = SetThreadTimerSlack(prev) }
}
