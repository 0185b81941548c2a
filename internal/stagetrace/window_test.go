package stagetrace

import (
	"runtime"
	"testing"
	"time"
)

var windowSink []byte

func allocate(n int) {
	for range n {
		windowSink = make([]byte, 64)
	}
}

// The window counts what is allocated between its first measured command
// and its last, not what the process allocated before (start-up,
// warm-up): the figure the bench used to report (MemStats.Mallocs since
// start) charged those to the hot path.
func TestWindowCountsOnlyTheMeasuredCommands(t *testing.T) {
	var calls uint64
	w, err := NewWindow(101, 200, func() uint64 { return calls })
	if err != nil {
		t.Fatal(err)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	const startup = 100_000
	for id := uint64(1); id <= 100; id++ { // warm-up: allocates, not measured
		allocate(startup / 100)
		calls++
		w.Handled(id)
	}
	for id := uint64(101); id <= 200; id++ { // measured: no allocation
		calls += 2
		w.Handled(id)
	}
	allocate(startup) // after the last measured command: not measured
	w.Handled(201)
	runtime.ReadMemStats(&ms1)
	var h Header
	w.Fill(&h)
	if !h.WindowClosed || h.WindowFrom != 101 || h.WindowTo != 200 {
		t.Fatalf("window %+v, want closed over 101-200", h)
	}
	if life := ms1.Mallocs - ms0.Mallocs; life < 2*startup {
		t.Fatalf("whole life %d mallocs, want ≥ %d (the test allocates them)", life, 2*startup)
	}
	// Slack: the runtime flushes a P's counts per cached span (see Window).
	if h.WindowMallocs > 4096 {
		t.Fatalf("window mallocs %d, want ~0 (start-up and drain allocations leaked in)", h.WindowMallocs)
	}
	// Opened at id 101 (after its call count rose), closed at 200.
	if h.WindowSyscalls != 2*99 {
		t.Fatalf("window syscalls %d, want %d", h.WindowSyscalls, 2*99)
	}
}

func TestWindowCountsAllocationsInside(t *testing.T) {
	w, err := NewWindow(1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Handled(1)
	const inside = 50_000
	allocate(inside)
	w.Handled(2)
	var h Header
	w.Fill(&h)
	if h.WindowMallocs < inside-4096 || h.WindowMallocs > inside+4096 {
		t.Fatalf("window mallocs %d, want ~%d", h.WindowMallocs, inside)
	}
}

// burnCPU spins until this process has used d more CPU time (every
// thread counts, so it may stop early, never late), or 10 s have passed.
func burnCPU(t *testing.T, d time.Duration) {
	t.Helper()
	start, deadline := processCPUNs(), time.Now().Add(10*time.Second)
	x := uint64(1)
	for processCPUNs()-start < uint64(d) {
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if time.Now().After(deadline) {
			t.Fatalf("burned %v of CPU in 10 s, want %v", time.Duration(processCPUNs()-start), d)
		}
	}
	cpuSink = x // used: the loop is not removed
}

var cpuSink uint64

// The window's CPU time is what the process ran between its first
// measured command and its last: not the start-up before it (the trace's
// prefaulting: a fifth of a node's CPU in a short flat-out run) nor the
// drain after.
func TestWindowCountsCPUInsideOnly(t *testing.T) {
	if processCPUNs() == 0 {
		t.Skip("no getrusage on this platform: the window's CPU is not measured")
	}
	w, err := NewWindow(1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	burnCPU(t, 60*time.Millisecond) // start-up: not measured
	w.Handled(1)
	burnCPU(t, 20*time.Millisecond)
	w.Handled(2)
	burnCPU(t, 60*time.Millisecond) // drain: not measured
	var h Header
	w.Fill(&h)
	if got := time.Duration(h.WindowCPUNs); got < 20*time.Millisecond || got >= 60*time.Millisecond {
		t.Fatalf("window CPU %v, want the 20 ms burned inside it (under the 60 ms before and after)", got)
	}
}

func TestWindowNotClosed(t *testing.T) {
	w, _ := NewWindow(10, 20, nil)
	w.Handled(15)
	var h Header
	w.Fill(&h)
	if h.WindowClosed || h.WindowMallocs != 0 || h.WindowCPUNs != 0 {
		t.Fatalf("an open window reported %+v", h)
	}
	var nilWindow *Window
	nilWindow.Handled(1) // no window: a no-op
	nilWindow.Fill(&h)
}

func TestParseWindow(t *testing.T) {
	w, err := ParseWindow(WindowText(5000, 20000), nil)
	if err != nil || w.From != 5001 || w.To != 25000 {
		t.Fatalf("ParseWindow: %+v %v", w, err)
	}
	for _, bad := range []string{"1", "a-2", "0-3", "5-4", "-", "1-2-3"} {
		if _, err := ParseWindow(bad, nil); err == nil {
			t.Errorf("ParseWindow(%q) accepted", bad)
		}
	}
	if w, err := ParseWindow("", nil); w != nil || err != nil {
		t.Fatalf("empty: %v %v", w, err)
	}
}

// Handled does not allocate: it runs in a node's observer and the
// client's result callback.
func TestWindowHandledAllocs(t *testing.T) {
	w, _ := NewWindow(1, 1<<62, func() uint64 { return 0 })
	id := uint64(0)
	if a := testing.AllocsPerRun(1000, func() { id++; w.Handled(id) }); a != 0 {
		t.Fatalf("Handled: %v allocs", a)
	}
}
