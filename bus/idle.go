package bus

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"time"
)

// IdleKind names an idle strategy, after Aeron's.
type IdleKind uint8

// Idle strategies, from lowest latency and highest CPU cost to the reverse.
const (
	// IdleBlock parks on the netpoller at once, like a plain net.UDPConn.
	// The zero value, and the default: see DefaultIdle.
	IdleBlock IdleKind = iota
	// IdleBackoff spins Spins polls, then yields to other goroutines
	// between the next Yields polls, then parks on the netpoller until
	// readable.
	IdleBackoff
	// IdleBusySpin polls without pause; it owns a CPU while it runs.
	IdleBusySpin
	// IdleYield polls and yields the CPU (sched_yield) between polls.
	IdleYield
)

func (k IdleKind) String() string {
	switch k {
	case IdleBackoff:
		return "backoff"
	case IdleBusySpin:
		return "busy-spin"
	case IdleYield:
		return "yield"
	case IdleBlock:
		return "block"
	}
	return fmt.Sprintf("idle(%d)", uint8(k))
}

// Bounds on the idle strategies.
const (
	// PollsPerCallMax bounds how many empty polls one Idle.Receive call
	// makes before it returns 0, so a spinning caller can check for stop.
	// At ~0.6–1.4 µs per empty recvmmsg this is a few milliseconds.
	PollsPerCallMax = 4096
	// ParkDefault is how long a park waits when Idle.Park is 0; a Loop
	// notices Stop within this time.
	ParkDefault = 20 * time.Millisecond

	// BackoffSpinsDefault: empty polls spun before yielding. One empty
	// recvmmsg costs ~0.7–1.4 µs here, so 100 polls is ~70–140 µs: several
	// loopback round trips (~10 µs), so a reply in a ping-pong is caught
	// while spinning, yet an idle receiver burns at most that before it
	// yields. Compared with 20 and 500 in BenchmarkPingPong (docs/bus.md):
	// on a quiet machine longer spins buy ~1 µs; under load they cost most.
	BackoffSpinsDefault = 100
	// BackoffYieldsDefault: polls with a sched_yield between them before
	// parking. A yield costs ~1 µs when nothing else wants the CPU and hands
	// it over when something does.
	BackoffYieldsDefault = 50
)

// Idle says how a receiver waits when nothing has arrived.
type Idle struct {
	Kind IdleKind
	// Spins and Yields are IdleBackoff's phases (0 means the default). They
	// are capped at PollsPerCallMax.
	Spins, Yields int
	// Park is how long one park may wait (0 means ParkDefault).
	Park time.Duration
	// Window, for a node's agent under IdleBackoff: how long after its
	// last work it keeps polling (yielding between passes) before it
	// parks (AgentPhaseAt). 0: the pass counts alone decide.
	Window time.Duration
}

// IdleWindowMax bounds Idle.Window: past a second, back-off is yield.
const IdleWindowMax = time.Second

// ParseIdle reads an idle strategy's name: block, backoff, spin, yield,
// or backoff:DURATION (a back-off whose agent keeps polling DURATION
// after its last work before it parks, e.g. backoff:250us).
func ParseIdle(s string) (Idle, error) {
	switch s {
	case "backoff":
		return Idle{Kind: IdleBackoff}, nil
	case "spin":
		return Idle{Kind: IdleBusySpin}, nil
	case "yield":
		return Idle{Kind: IdleYield}, nil
	case "block":
		return Idle{Kind: IdleBlock}, nil
	}
	if w, ok := strings.CutPrefix(s, "backoff:"); ok {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 || d > IdleWindowMax {
			return Idle{}, fmt.Errorf("idle strategy %q: the back-off window must be a duration in (0, %v], like backoff:250us", s, IdleWindowMax)
		}
		return Idle{Kind: IdleBackoff, Window: d}, nil
	}
	return Idle{}, fmt.Errorf("unknown idle strategy %q (backoff, backoff:DURATION, spin, yield, block)", s)
}

// DefaultIdle is block. A node runs one agent thread (bus.Idle.AgentPhase;
// for a node, block parks in epoll_wait on the agent's own fds) and a
// client one receive loop; on a machine with fewer spare cores than
// threads (the bench's three processes on 2 cores) any spinning strategy
// steals the CPU the others need (docs/tuning.md). Spin where each thread
// can own a core (--idle spin --cpu N).
var DefaultIdle = Idle{Kind: IdleBlock}

// AgentIdleDefault is a node's agent's default (`seqbus node`, the
// bench): block, parking in epoll_wait on the agent's own fds after a
// pass that found nothing. Measured on the 2-core machine with the
// bench's generator at nice 0 (docs/tuning.md, "The idle strategy of a
// node"), it matches back-off's round trip at p50, has the lower p99
// and p99.9, and costs each node 15–30 µs less CPU a command at 10k/s;
// flat out and under fsync group it is ahead too. Back-off pays where
// a node has a core of its own. A receive loop (a client's) keeps
// DefaultIdle, also block.
var AgentIdleDefault = Idle{Kind: IdleBlock}

func (i Idle) spins() int {
	if i.Spins <= 0 {
		return BackoffSpinsDefault
	}
	return min(i.Spins, PollsPerCallMax)
}

func (i Idle) yields() int {
	if i.Yields <= 0 {
		return BackoffYieldsDefault
	}
	return min(i.Yields, PollsPerCallMax)
}

func (i Idle) park() time.Duration {
	if i.Park <= 0 {
		return ParkDefault
	}
	return i.Park
}

// spinning reports whether the strategy polls in a loop (and so wants its
// goroutine locked to an OS thread).
// spinning reports whether the strategy owns its thread (busy-spin and
// yield lock the loop to an OS thread). Back-off does not: its yield phase
// is runtime.Gosched, so on a machine with fewer cores than loops other
// goroutines still get the P at once. Holding the P (a locked thread
// yielding with sched_yield) made every other runnable goroutine wait for
// the scheduler's 10 ms preemption: measured, p90 of a 2-core ping-pong
// went from ~25 µs to 70–130 ms with five loops.
func (i Idle) spinning() bool { return i.Kind == IdleBusySpin || i.Kind == IdleYield }

// Receive waits for at least one datagram the way the strategy says and
// returns what r.Receive returns. It gives up with 0, nil after at most
// PollsPerCallMax polls or one park, so callers can check for stop. It does
// not allocate beyond what r.Receive does.
func (i Idle) Receive(r Receiver, bufs [][]byte, sizes []int, from []netip.AddrPort) (int, error) {
	switch i.Kind {
	case IdleBlock:
		return r.Receive(bufs, sizes, from, i.park())
	case IdleBusySpin:
		return pollN(r, bufs, sizes, from, PollsPerCallMax, false)
	case IdleYield:
		return pollN(r, bufs, sizes, from, PollsPerCallMax, true)
	}
	n, err := pollN(r, bufs, sizes, from, i.spins(), false)
	if n > 0 || err != nil {
		return n, err
	}
	n, err = pollGosched(r, bufs, sizes, from, i.yields())
	if n > 0 || err != nil {
		return n, err
	}
	return r.Receive(bufs, sizes, from, i.park())
}

// pollGosched polls with runtime.Gosched between polls: the back-off
// strategy's yield phase hands the P to any runnable goroutine.
func pollGosched(r Receiver, bufs [][]byte, sizes []int, from []netip.AddrPort, polls int) (int, error) {
	for p := 0; p < polls; p++ {
		n, err := r.Receive(bufs, sizes, from, 0)
		if n > 0 || err != nil {
			return n, err
		}
		runtime.Gosched()
	}
	return 0, nil
}

func pollN(r Receiver, bufs [][]byte, sizes []int, from []netip.AddrPort, polls int, yield bool) (int, error) {
	for p := 0; p < polls; p++ {
		n, err := r.Receive(bufs, sizes, from, 0)
		if n > 0 || err != nil {
			return n, err
		}
		if yield {
			osYield()
		}
	}
	return 0, nil
}
