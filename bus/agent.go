package bus

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

// An agent (Aeron's term) is one locked OS thread running a duty cycle:
// each pass polls every socket without blocking and does whatever work is
// due, and when a pass finds nothing to do the idle strategy decides
// whether to spin, yield or park (in a Poller, on the agent's own fds).
// node runs one per process; these are the pieces it shares with the bus.

// IdlePhase is what an agent does after a pass that found no work.
type IdlePhase uint8

const (
	// PhaseSpin: run the next pass at once.
	PhaseSpin IdlePhase = iota
	// PhaseYield: sched_yield, then run the next pass.
	PhaseYield
	// PhasePark: wait in the Poller until an fd is ready or the next
	// deadline passes.
	PhasePark
)

func (p IdlePhase) String() string {
	switch p {
	case PhaseSpin:
		return "spin"
	case PhaseYield:
		return "yield"
	case PhasePark:
		return "park"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Agent back-off defaults, in empty passes. One empty pass of a node's
// agent is two non-blocking receives (~0.5–1 µs each here), so the agent
// spins a few µs (AgentSpinsDefault passes, ~10–20 µs), yields a little
// longer, then parks: an idle node costs one epoll_wait per timer
// deadline (a millisecond), not a core. They are counts rather than a
// time so that a pass reads no clock it does not need.
const (
	AgentSpinsDefault  = 10
	AgentYieldsDefault = 20
)

// AgentPhase says what an agent does after its empty-th consecutive
// empty pass (empty ≥ 1): block parks at once; busy-spin never parks;
// yield always yields; back-off spins Spins passes, yields Yields more,
// then parks. Spins and Yields of 0 mean the agent defaults above.
func (i Idle) AgentPhase(empty int) IdlePhase {
	switch i.Kind {
	case IdleBlock:
		return PhasePark
	case IdleBusySpin:
		return PhaseSpin
	case IdleYield:
		return PhaseYield
	}
	spins, yields := i.Spins, i.Yields
	if spins <= 0 {
		spins = AgentSpinsDefault
	}
	if yields <= 0 {
		yields = AgentYieldsDefault
	}
	switch {
	case empty <= min(spins, PollsPerCallMax):
		return PhaseSpin
	case empty <= min(spins, PollsPerCallMax)+min(yields, PollsPerCallMax):
		return PhaseYield
	}
	return PhasePark
}

// AgentPhaseAt is AgentPhase for an agent that knows how long it has
// been without work (idleNs, since its last pass that did some): under
// back-off, the agent spins its first Spins empty passes, then yields
// until its window (AgentWindow) has passed since its last work, and
// only then parks. Under a steady stream (a command every 100 µs at 10k/s) a
// window longer than the gap never parks, so no hop pays a wake-up; an
// idle node parks a Window after its last work and costs what block
// costs. For the other strategies it is AgentPhase.
func (i Idle) AgentPhaseAt(empty int, idleNs int64) IdlePhase {
	if i.Kind != IdleBackoff {
		return i.AgentPhase(empty)
	}
	spins := i.Spins
	if spins <= 0 {
		spins = AgentSpinsDefault
	}
	switch {
	case empty <= min(spins, PollsPerCallMax):
		return PhaseSpin
	case idleNs < int64(i.AgentWindow()):
		return PhaseYield
	}
	return PhasePark
}

// AgentWindowDefault is a back-off agent's window when Idle.Window is 0:
// ten command gaps at 10k/s, so a stream at that rate or faster never
// parks. Measured here (docs/tuning.md): end to end p50 halved against
// block, p99 and p99.9 unchanged, an idle node's CPU unchanged (2 %),
// and each node's CPU at 10k/s up by about 20 µs a command.
const AgentWindowDefault = time.Millisecond

// AgentWindow is the back-off window an agent applies (Window, or
// AgentWindowDefault); 0 for the other strategies.
func (i Idle) AgentWindow() time.Duration {
	switch {
	case i.Kind != IdleBackoff:
		return 0
	case i.Window > 0:
		return i.Window
	}
	return AgentWindowDefault
}

// Yield gives the CPU to any other runnable thread (sched_yield).
func Yield() { osYield() }

// SpareP raises GOMAXPROCS to 2 when it is 1 and the GOMAXPROCS
// environment variable does not set it (a process confined to one CPU,
// e.g. by taskset or `bench --cpus`, gets one P), and reports whether it
// did. A locked thread that spins or yields (sched_yield) keeps its P:
// with only one, the rest of the process (the GC's workers, timers, the
// status writer) runs only when the runtime preempts the thread, every
// 10 ms, and the thread then waits as long for its P back — measured, two
// nodes sharing one CPU with the back-off idle: p99 5–16 ms from sent to
// sequenced, against 0.1 ms with a second P. With a second P the kernel
// interleaves the two threads at each sched_yield. Call it before
// anything reads GOMAXPROCS to decide how to park (NewPoller).
func SpareP() bool {
	if runtime.GOMAXPROCS(0) >= 2 || os.Getenv("GOMAXPROCS") != "" {
		return false
	}
	runtime.GOMAXPROCS(2)
	return true
}

// LockAgentThread locks the calling goroutine to its OS thread and, when
// pin is set, pins that thread to cpu. The returned function undoes the
// lock; when pinned it does nothing, so the thread (with its affinity)
// dies with the goroutine instead of returning to the runtime's pool.
func LockAgentThread(pin bool, cpu int) (unlock func(), err error) {
	if pin && (cpu < 0 || cpu >= runtime.NumCPU()) {
		return nil, fmt.Errorf("%w: CPU %d not in 0..%d", ErrConfig, cpu, runtime.NumCPU()-1)
	}
	runtime.LockOSThread()
	if !pin {
		return runtime.UnlockOSThread, nil
	}
	if err := pinCPU(cpu); err != nil {
		// The thread may be half-pinned: let it die with the goroutine.
		return func() {}, err
	}
	return func() {}, nil
}
