package bus

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
	"time"
)

// An AgentRunner owns an agent's thread and its duty cycle, Agrona's
// AgentRunner in Aeron's shared mode: one locked OS thread runs pass
// after pass of Agent.DoWork, and after a pass that found no work the
// idle strategy spins, yields or parks. It owns the receive side of the
// pass: one set of buffers per endpoint (a pass reads each endpoint at
// most once, so what one endpoint delivered stays valid while the agent
// reads the next), the Poller that parks the thread on every endpoint's
// fd and a wake-up eventfd at once, and the park itself, bounded by the
// deadline the agent supplies (its next timer): a park never hides an
// arrival the way a timed sleep would, and there is no Go timer anywhere.
//
// Threads: Start, Stop and Close are the owner's; Wake is safe from any
// goroutine; everything the Agent is called with runs on the runner's
// thread (or the caller's, for PassAt).
type AgentRunner struct {
	cfg   AgentRunnerConfig
	agent Agent
	recv  []runnerRecv
	// poller parks on the endpoints' fds and the wake eventfd; nil when
	// an endpoint has no fd (in-memory) or the platform has no epoll:
	// parks are then a bounded wait on the first endpoint.
	poller *Poller
	rx     Received
	// ready is the set of endpoints the coming pass reads (bit i:
	// recv[i]): from the park before it (readyKnown), a zero-timeout
	// poll, or all of them without a poller.
	ready      uint64
	readyKnown bool

	// parked is set while the thread is in (or about to enter) the
	// poller: Wake writes the eventfd only then (see Wake).
	parked  atomic.Bool
	stop    atomic.Bool
	started atomic.Bool
	done    chan struct{}

	passes, parks, pollErrors atomic.Uint64
	// The agent's longest absence from its sockets (Stalls).
	stalls stallWatch
}

// StallNs is the absence Stalls counts: the thread away from its
// sockets longer than this delays every datagram that arrives meanwhile
// by as much.
const StallNs = int64(time.Millisecond)

// AgentStalls is what a runner saw of its agent's time away from its
// sockets, over the runner's life: the longest pass that did work (wall
// time: its own work, a slow journal write, or the thread descheduled in
// the middle of it); the longest
// stall, a turn of the duty cycle less its pass's work and the wait its
// park was allowed (the thread did not run when it should have:
// descheduled by the kernel, a yield that gave the core away for a
// timeslice, a stopped process, a park that overslept); and how many
// stalls were longer than StallNs. The runner's clock is read once more
// after each pass that did work; nothing else is added to a pass.
type AgentStalls struct {
	LongestPassNs, LongestStallNs int64
	Stalls                        uint64
}

// stallWatch keeps AgentStalls: written on the runner's thread only,
// read from any goroutine.
type stallWatch struct {
	longestPass, longestStall atomic.Int64
	stalls                    atomic.Uint64
}

// pass notes a pass that did work and took d.
func (w *stallWatch) pass(d int64) {
	if d > w.longestPass.Load() {
		w.longestPass.Store(d)
	}
}

// turn notes a turn of the duty cycle that took d beyond its pass's
// work and what its park was allowed to wait.
func (w *stallWatch) turn(d int64) {
	if d > w.longestStall.Load() {
		w.longestStall.Store(d)
	}
	if d > StallNs {
		w.stalls.Add(1)
	}
}

// Stalls reports the agent's time away from its sockets (AgentStalls);
// safe from any goroutine.
func (r *AgentRunner) Stalls() AgentStalls {
	return AgentStalls{LongestPassNs: r.stalls.longestPass.Load(), LongestStallNs: r.stalls.longestStall.Load(), Stalls: r.stalls.stalls.Load()}
}

// Agent is the work an AgentRunner runs (Agrona's Agent). Every method
// is called on the runner's thread, never concurrently.
type Agent interface {
	// DoWork runs one pass at nowNs (the runner's clock) and returns the
	// work it did; 0 counts as an empty pass for the idle strategy. What
	// arrived is read through rx (Received.Next), lazily, one endpoint at
	// a time; the batches stay valid until DoWork returns.
	DoWork(nowNs int64, rx *Received) int
	// DeadlineNs is when the next pass must run at the latest (the
	// agent's next timer, on the runner's clock): a park ends by then.
	DeadlineNs() int64
	// Pending reports whether another thread published something the
	// next pass picks up (a durable watermark, a finished job). It is
	// the agent's half of the wake handshake (Wake): the runner asks it
	// after announcing that it parks, and does not park when it says
	// true. It must be cheap (atomic loads) and must not block.
	Pending() bool
}

// AgentRunnerConfig configures an AgentRunner.
type AgentRunnerConfig struct {
	// Idle is what the runner does after an empty pass
	// (Idle.AgentPhaseAt): block parks at once, busy-spin never parks,
	// yield yields, back-off spins, yields within its window, then parks.
	Idle Idle
	// PinCPU pins the runner's thread to CPU (LockAgentThread).
	PinCPU bool
	CPU    int
	// DatagramBytes is each receive buffer's size (0: DatagramBytesDefault):
	// a datagram longer than it is dropped and counted as a truncation.
	DatagramBytes int
	// NowNs is the runner's clock, monotonic nanoseconds: the clock of
	// DoWork's nowNs and of DeadlineNs. Required.
	NowNs func() int64
	// Warn, when set, is told why the runner has no poller and of failed
	// polls (the pass then reads every endpoint). It runs on the caller's
	// goroutine in NewAgentRunner, on the runner's thread afterwards.
	Warn func(msg string, err error)
}

// runnerRecv is one receiving endpoint with its own buffers.
type runnerRecv struct {
	c     Receiver
	gro   *UDP // c, when it is a socket with UDP_GRO on (else nil: nothing is ever buffered)
	bufs  [][]byte
	sizes []int
	from  []netip.AddrPort
	held  int   // datagrams a bounded park already read into the buffers
	err   error // the error that stopped this endpoint (ErrClosed)
}

// memParkNsMax bounds one park of a runner without a poller: it waits on
// its first endpoint, so arrivals on the others are seen within this.
const memParkNsMax = int64(200 * time.Microsecond)

// NewAgentRunner returns a runner for a over endpoints (at most
// PollSocketsMax; none makes a runner that only keeps a's deadlines).
// When every endpoint is a *UDP it parks in a Poller; otherwise, or
// without epoll, a park is a bounded Receive on the first endpoint.
func NewAgentRunner(cfg AgentRunnerConfig, a Agent, endpoints ...Receiver) (*AgentRunner, error) {
	if cfg.NowNs == nil || a == nil {
		return nil, fmt.Errorf("%w: an agent runner needs an agent and a clock", ErrConfig)
	}
	if len(endpoints) > PollSocketsMax {
		return nil, fmt.Errorf("%w: %d endpoints, at most %d in one agent runner", ErrConfig, len(endpoints), PollSocketsMax)
	}
	SpareP() // before the poller reads GOMAXPROCS
	r := &AgentRunner{cfg: cfg, agent: a, done: make(chan struct{})}
	r.rx.r = r
	size := cfg.DatagramBytes
	if size <= 0 {
		size = DatagramBytesDefault
	}
	arena := make([]byte, len(endpoints)*BatchSizeDefault*size)
	for i, c := range endpoints {
		e := runnerRecv{c: c, bufs: make([][]byte, BatchSizeDefault), sizes: make([]int, BatchSizeDefault),
			from: make([]netip.AddrPort, BatchSizeDefault)}
		if u, ok := c.(*UDP); ok && u.Report().GRO {
			e.gro = u
		}
		for j := range e.bufs {
			at := (i*BatchSizeDefault + j) * size
			e.bufs[j] = arena[at : at+size : at+size]
		}
		r.recv = append(r.recv, e)
	}
	r.poller = r.newPoller()
	return r, nil
}

// newPoller registers every endpoint in one epoll instance, or returns
// nil when one of them has no fd or the platform has no epoll.
func (r *AgentRunner) newPoller() *Poller {
	for _, e := range r.recv {
		if _, ok := e.c.(*UDP); !ok {
			return nil
		}
	}
	p, err := NewPoller()
	if err != nil {
		r.warn("no epoll for the agent: it parks with a bounded wait", err)
		return nil
	}
	for _, e := range r.recv {
		if err := p.Add(e.c.(*UDP)); err != nil {
			p.Close()
			r.warn("no epoll for the agent: it parks with a bounded wait", err)
			return nil
		}
	}
	return p
}

func (r *AgentRunner) warn(msg string, err error) {
	if r.cfg.Warn != nil {
		r.cfg.Warn(msg, err)
	}
}

// Start runs the duty cycle on a new goroutine locked to its OS thread
// (pinned when the config says so), and returns once the thread is set
// up; an error (a pin that failed) means the runner never ran. A runner
// starts once.
func (r *AgentRunner) Start() error {
	if r.started.Swap(true) {
		return fmt.Errorf("%w: agent runner started twice", ErrConfig)
	}
	started := make(chan error, 1)
	go r.run(started)
	if err := <-started; err != nil {
		<-r.done
		return err
	}
	return nil
}

// Stop asks the runner to end, wakes it, and waits for it: at most one
// bounded park (memParkNsMax without a poller). Safe to call twice, or
// without Start.
func (r *AgentRunner) Stop() {
	r.stop.Store(true)
	if r.poller != nil {
		_ = r.poller.Wake()
	}
	if r.started.Load() {
		<-r.done
	}
}

// Close releases the poller. Call it after Stop and after every other
// thread that may call Wake has stopped: a Wake racing Close could write
// to a reused fd number.
func (r *AgentRunner) Close() error {
	if r.poller == nil {
		return nil
	}
	return r.poller.Close()
}

// Wake makes a parked runner run its next pass now; another thread calls
// it after publishing what Agent.Pending reports. It costs one atomic
// load unless the runner is parked (then one eventfd write), and does
// nothing without a poller (those parks are bounded by memParkNsMax).
//
// The handshake (Dekker's): the publisher stores its value, then reads
// parked; the runner stores parked, then reads the value (Pending), and
// only then parks. Go's atomics are sequentially consistent, so one of
// the two sees the other: either the runner sees the value and does not
// park, or the publisher sees parked and writes the eventfd, which ends
// the park or, written before it, makes it return at once. A publication
// is never slept through. The runner also clears parked after the park;
// a Wake that sees it still set costs one spurious pass, no more.
func (r *AgentRunner) Wake() {
	if r.parked.Load() && r.poller != nil {
		_ = r.poller.Wake()
	}
}

// Polling reports whether the runner parks in epoll on its endpoints
// (false: the bounded wait of endpoints without fds).
func (r *AgentRunner) Polling() bool { return r.poller != nil }

// Passes is how many passes the runner ran; Parks how many times it
// went to park (including parks given up at once for a Pending
// publication or a stop); PollErrors how many polls and parks failed.
func (r *AgentRunner) Passes() uint64     { return r.passes.Load() }
func (r *AgentRunner) Parks() uint64      { return r.parks.Load() }
func (r *AgentRunner) PollErrors() uint64 { return r.pollErrors.Load() }

// PassAt runs one pass at nowNs on the caller's goroutine, for an agent
// driven by hand (tests); never while the runner's thread runs.
func (r *AgentRunner) PassAt(nowNs int64) int { return r.pass(nowNs) }

func (r *AgentRunner) run(started chan<- error) {
	defer close(r.done)
	unlock, err := LockAgentThread(r.cfg.PinCPU, r.cfg.CPU)
	if err != nil {
		started <- err
		return
	}
	defer unlock()
	started <- nil
	idle := r.cfg.Idle
	parkAtOnce := idle.AgentPhase(1) == PhasePark
	window := int64(idle.AgentWindow())
	// A back-off window polls on only while traffic is dense: two passes
	// with work within the window. A lone heartbeat or liveness ack every
	// few milliseconds then parks at once, so an idle agent costs what
	// block costs; a stream of commands never parks (Idle.AgentPhaseAt).
	lastWork, hot, empty := r.cfg.NowNs(), false, 0
	// prev, busy and allowed: when the last turn began, how long its pass
	// worked and how long its park was allowed to wait (Stalls).
	prev, busy, allowed := lastWork, int64(0), int64(0)
	for !r.stop.Load() {
		now := r.cfg.NowNs()
		r.stalls.turn(now - prev - busy - allowed)
		prev, busy, allowed = now, 0, 0
		if r.pass(now) > 0 {
			busy = r.cfg.NowNs() - now
			r.stalls.pass(busy)
			hot = now-lastWork < window
			empty, lastWork = 0, now
			if parkAtOnce {
				// block: back to epoll_wait at once. It is level-triggered,
				// so it returns at once when more arrived, for the cost of
				// the poll an empty pass would make.
				allowed = r.park(now)
			}
			continue
		}
		empty++
		idleNs := now - lastWork
		if !hot {
			idleNs = math.MaxInt64
		}
		switch idle.AgentPhaseAt(empty, idleNs) {
		case PhaseYield:
			Yield()
		case PhasePark:
			allowed = r.park(now)
		}
	}
}

func (r *AgentRunner) pass(now int64) int {
	r.passes.Add(1)
	r.pollReady()
	r.rx.next = 0
	return r.agent.DoWork(now, &r.rx)
}

// pollReady sets the endpoints the coming pass reads: what the park
// before it found, else one zero-timeout epoll_wait over all of them (one
// syscall however many endpoints, where polling each would be one per
// endpoint), else (no poller) all of them; and in every case those that
// still hold datagrams read before (buffered), which epoll cannot see.
func (r *AgentRunner) pollReady() {
	if r.readyKnown {
		r.readyKnown = false
		r.ready |= r.buffered()
		return
	}
	if r.poller == nil {
		r.ready = ^uint64(0)
		return
	}
	ready, err := r.poller.Wait(0)
	if err != nil {
		r.pollErrors.Add(1)
		r.warn("agent poll", err)
		ready = ^uint64(0)
	}
	r.ready = ready | r.buffered()
}

// buffered is the set of endpoints holding datagrams their last Receive
// read from the kernel and did not hand out yet (the rest of a coalesced
// run: UDP.Buffered). Their fds may poll empty; a pass reads them, and
// the runner does not park while any has some.
func (r *AgentRunner) buffered() uint64 {
	var set uint64
	for i := range r.recv {
		if u := r.recv[i].gro; u != nil && u.Buffered() {
			set |= 1 << uint(i)
		}
	}
	return set
}

// park waits for an arrival, a Wake or the agent's deadline, whichever
// comes first (the handshake is Wake's), and returns how long from now
// it was allowed to wait (the deadline's distance; 0: it did not park).
func (r *AgentRunner) park(now int64) (allowed int64) {
	timeout := max(r.agent.DeadlineNs()-now, 0)
	r.parks.Add(1)
	if r.poller == nil {
		if !r.stop.Load() && !r.agent.Pending() && r.buffered() == 0 {
			timeout = min(timeout, memParkNsMax)
			r.parkWithoutFds(timeout)
			return timeout
		}
		return 0
	}
	r.parked.Store(true)
	if r.stop.Load() || r.agent.Pending() || r.buffered() != 0 {
		r.parked.Store(false)
		return 0
	}
	ready, err := r.poller.Wait(timeout)
	if err != nil {
		r.pollErrors.Add(1)
		r.warn("agent park", err)
		ready = ^uint64(0)
	}
	r.parked.Store(false)
	r.ready, r.readyKnown = ready, true
	return r.poller.WaitNs(timeout)
}

// parkWithoutFds is the park of endpoints without fds (in-memory): a
// bounded wait on the first endpoint still open, whose datagrams the
// next pass hands over first.
func (r *AgentRunner) parkWithoutFds(timeoutNs int64) {
	if len(r.recv) == 0 || timeoutNs <= 0 {
		return
	}
	e := &r.recv[0]
	if e.err != nil || e.held > 0 {
		return
	}
	k, err := e.c.Receive(e.bufs, e.sizes, e.from, time.Duration(timeoutNs))
	if err != nil {
		e.stopOn(err)
		return
	}
	e.held = k
}

// stopOn stops reading an endpoint whose Receive failed for good
// (closed); other errors are counted by the endpoint and retried.
func (e *runnerRecv) stopOn(err error) {
	if errors.Is(err, ErrClosed) {
		e.err = err
	}
}

// Received is what one pass may read: the endpoints that are readable,
// read lazily by Next, each at most once per pass.
type Received struct {
	r    *AgentRunner
	next int
}

// Batch is what one endpoint delivered in a pass: datagram j (j < Len)
// is Datagram(j). It stays valid until the pass ends.
type Batch struct {
	// Endpoint is the endpoint's index in NewAgentRunner's list.
	Endpoint int
	bufs     [][]byte
	sizes    []int
	from     []netip.AddrPort
}

// Len is how many datagrams the batch holds.
func (b Batch) Len() int { return len(b.sizes) }

// Datagram returns datagram j and its sender.
func (b Batch) Datagram(j int) ([]byte, netip.AddrPort) { return b.bufs[j][:b.sizes[j]], b.from[j] }

// Next reads the next readable endpoint that has datagrams (without
// blocking) and returns what it delivered; false when no endpoint has
// more this pass. An endpoint whose Receive reports ErrClosed is not read
// again; other receive errors are the endpoint's to count, and the next
// pass reads it again. The zero Received has nothing. It does not
// allocate.
func (rx *Received) Next() (Batch, bool) {
	r := rx.r
	if r == nil {
		return Batch{}, false
	}
	for rx.next < len(r.recv) {
		i := rx.next
		rx.next++
		e := &r.recv[i]
		if e.err != nil || r.ready&(1<<uint(i)) == 0 {
			continue
		}
		k := e.held
		e.held = 0
		if k == 0 {
			var err error
			if k, err = e.c.Receive(e.bufs, e.sizes, e.from, 0); err != nil {
				e.stopOn(err)
				continue
			}
		}
		if k > 0 {
			return Batch{Endpoint: i, bufs: e.bufs[:k], sizes: e.sizes[:k], from: e.from[:k]}, true
		}
	}
	return Batch{}, false
}
