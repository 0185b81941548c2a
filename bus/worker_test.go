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
