package stagetrace

import (
	"fmt"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Window measures a process's heap allocations, socket calls and CPU
// time over the measured commands of a run only, so start-up (the trace's
// own prefaulting among it), the warm-up and the drain do not count
// against the hot path (the whole-life figures stay beside it in the
// Header, and the CPU's in the harness's rusage of the child).
//
// The window is given in client order ids, the ids every process of a
// bench run can see: From is the first measured command (warm-up + 1),
// To the last. Each process opens the window the first time it handles a
// measured command and closes it when it has handled the last one:
//
//	client   opens at the first answer with an id ≥ From, closes at the answer to To
//	primary  opens when it sequences the first id ≥ From, closes when it releases To
//	standby  opens when it applies the first id ≥ From, closes when it applies To
//
// Everything the process allocates or runs in between counts (every
// goroutine and thread: the agent, the fsync thread, the status writer),
// which is what steady state costs. CPU time is getrusage(RUSAGE_SELF),
// user plus system, sampled at the two ends: one system call each.
//
// Allocations are sampled from runtime/metrics ("/gc/heap/allocs:objects"
// plus "/gc/heap/tiny/allocs:objects", what MemStats.Mallocs adds up),
// which does not stop the world. The runtime adds a P's allocations to
// those metrics when its cached span is refilled or flushed, so a sample
// is exact to within the unflushed objects of one span per size class per
// P: a run with no allocation in the window reads 0 or a few hundred
// objects, never a figure growing with the window's length.
type Window struct {
	From, To uint64
	// Syscalls reads the process's cumulative send and receive calls
	// (bus counters); nil: not measured. It must not allocate.
	Syscalls func() uint64

	samples        [2]metrics.Sample
	opened, closed bool
	start, end     windowSample
}

type windowSample struct{ mallocs, syscalls, cpuNs uint64 }

// NewWindow is a window over client order ids from..to (from ≥ 1,
// to ≥ from).
func NewWindow(from, to uint64, syscalls func() uint64) (*Window, error) {
	if from < 1 || to < from {
		return nil, fmt.Errorf("%w: window %d-%d (want 1 ≤ from ≤ to)", ErrLimit, from, to)
	}
	w := &Window{From: from, To: to, Syscalls: syscalls}
	w.samples[0].Name = "/gc/heap/allocs:objects"
	w.samples[1].Name = "/gc/heap/tiny/allocs:objects"
	return w, nil
}

// ParseWindow parses "FROM-TO" (client order ids), the --trace-window
// flag of `seqbus node` and `seqbus client`; "" is no window (nil).
func ParseWindow(s string, syscalls func() uint64) (*Window, error) {
	if s == "" {
		return nil, nil
	}
	a, b, ok := strings.Cut(s, "-")
	from, err1 := strconv.ParseUint(a, 10, 64)
	to, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: window %q (want FROM-TO)", ErrLimit, s)
	}
	return NewWindow(from, to, syscalls)
}

// WindowText is the FROM-TO a harness passes for a run of warmup
// commands then count measured ones.
func WindowText(warmup, count int) string {
	return strconv.Itoa(warmup+1) + "-" + strconv.Itoa(warmup+count)
}

func (w *Window) sample() windowSample {
	metrics.Read(w.samples[:])
	var s windowSample
	for _, m := range w.samples {
		if m.Value.Kind() == metrics.KindUint64 {
			s.mallocs += m.Value.Uint64()
		}
	}
	if w.Syscalls != nil {
		s.syscalls = w.Syscalls()
	}
	s.cpuNs = processCPUNs()
	return s
}

// Open samples the start, the first time only.
func (w *Window) Open() {
	if w == nil || w.opened {
		return
	}
	w.opened = true
	w.start = w.sample()
}

// Close samples the end, the first time only, and only once open.
func (w *Window) Close() {
	if w == nil || !w.opened || w.closed {
		return
	}
	w.closed = true
	w.end = w.sample()
}

// Handled is the one call for a process that handles the command with
// client order id id and whose last handling of a command is this one
// (the client's answer, a standby's apply): it opens at the first id ≥
// From and closes at To. Not safe for concurrent use (like Recorder).
func (w *Window) Handled(id uint64) {
	if w == nil || id < w.From {
		return
	}
	w.Open()
	if id == w.To {
		w.Close()
	}
}

// Fill writes the window's figures into h: zero, with WindowClosed
// false, when the window never closed (a run cut short or without a
// window).
func (w *Window) Fill(h *Header) {
	if w == nil || !w.closed {
		return
	}
	h.WindowClosed = true
	h.WindowFrom, h.WindowTo = w.From, w.To
	h.WindowMallocs = w.end.mallocs - w.start.mallocs
	h.WindowSyscalls = w.end.syscalls - w.start.syscalls
	h.WindowCPUNs = w.end.cpuNs - w.start.cpuNs
}
