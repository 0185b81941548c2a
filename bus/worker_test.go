package bus

import (
	"sync/atomic"
	"testing"
	"time"
)

// A kick runs the job; kicks while it runs collapse into one more run
// (never lost, never one run per kick); Stop waits for the run in
// progress and ends the goroutine (goleak, in TestMain).
func TestWorkerCollapsesKicks(t *testing.T) {
	var runs atomic.Int64
	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	w := NewWorker(func() {
		runs.Add(1)
		entered <- struct{}{}
		<-release
	})
	w.Start()
	w.Start() // a second Start does nothing
	w.Kick()
	<-entered // the first run is in progress
	for range 10 {
		w.Kick()
	}
	release <- struct{}{} // the first run ends; the ten kicks make one more
	<-entered
	release <- struct{}{}
	waitFor(t, "two runs", func() bool { return runs.Load() == 2 })
	time.Sleep(5 * time.Millisecond) // time for a wrong third run to start
	if r := runs.Load(); r != 2 {
		t.Fatalf("%d runs for a kick and ten kicks during its run, want 2", r)
	}
	w.Stop()
	w.Stop()
	w.Kick() // after Stop: harmless
}

// A worker never started keeps one kick for TakeKick; Stop returns.
func TestWorkerByHand(t *testing.T) {
	w := NewWorker(func() { t.Fatal("a worker never started ran its job") })
	if w.TakeKick() {
		t.Fatal("a kick before any Kick")
	}
	w.Kick()
	w.Kick()
	if !w.TakeKick() || w.TakeKick() {
		t.Fatal("two kicks are not one waiting kick")
	}
	w.Stop()
}

// Kick allocates nothing (it is on the agent's path after every append).
func TestWorkerKickDoesNotAllocate(t *testing.T) {
	w := NewWorker(func() {})
	if allocs := testing.AllocsPerRun(100, w.Kick); allocs != 0 {
		t.Fatalf("%.1f allocations per Kick", allocs)
	}
}

// No kick is ever lost between the thread's last look and its sleep:
// thousands of kick → run round trips, each waited for (a lost wake-up
// would leave one waiting until the bound). With one kicker the check is
// exact: the job counts at its end and the kicker saw the previous run
// end, so only a run that took this kick can count next. Two kickers at
// once then race Kick against itself.
func TestWorkerNeverLosesAKick(t *testing.T) {
	for _, kickers := range []int{1, 2} {
		var runs atomic.Uint64
		w := NewWorker(func() { runs.Add(1) })
		w.Start()
		var kicked atomic.Uint64
		errs := make(chan string, kickers)
		for range kickers {
			go func() {
				for range 5000 {
					kicked.Add(1)
					seen := runs.Load()
					w.Kick()
					deadline := time.Now().Add(5 * time.Second)
					for runs.Load() == seen {
						if time.Now().After(deadline) {
							errs <- "a kick did not run the job within 5 s: a lost wake-up"
							return
						}
					}
				}
				errs <- ""
			}()
		}
		for range kickers {
			if e := <-errs; e != "" {
				t.Fatalf("%d kickers: %s", kickers, e)
			}
		}
		w.Stop()
		if r := runs.Load(); r == 0 || r > kicked.Load() {
			t.Fatalf("%d kickers: %d runs for %d kicks", kickers, r, kicked.Load())
		}
	}
}
