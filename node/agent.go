package node

import (
	"errors"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/journal"
)

// The agent (issue 18, items 1–3 and 5): one locked OS thread per node
// runs a duty cycle, Aeron's shared mode and LMAX's single writer. Each
// pass (doWork) polls every receiving socket without blocking, hands what
// arrived to onDatagram and then afterBatch once for the whole pass (smart
// batching: everything that arrived goes into the same DATA frames and
// journal write), runs the timer work when its deadline has passed by the
// clock (no ticker goroutine), drains the send-only sockets at tick
// cadence, picks up the durable watermark the fsync thread published, and
// at status cadence publishes a copy of the status for the status writer.
// A pass that found nothing lets the idle strategy spin, yield or park in
// epoll_wait on the agent's own fds (its sockets and an eventfd the fsync
// thread and Close write), bounded by the next timer deadline.
//
// Other threads: the fsync thread (fsync group/always only) and the status
// writer. Neither takes n.mu: they talk to the agent through atomics, the
// journal's durable watermark and the eventfd. n.mu is still taken once
// per pass that has work, uncontended unless an API call (Status, Role,
// Released, a test) holds it.
//
// The simulator never starts the agent: Deliver, Tick and SyncStep
// (drive.go) run the same pieces of the pass (onDatagram+afterBatch,
// tickLocked, syncedLocked) one at a time.

// memParkNsMax bounds one park of an agent whose endpoints have no fds
// (the in-memory bus, tests only): it waits on its first endpoint, so
// arrivals on the others are seen within this bound.
const memParkNsMax = int64(200 * time.Microsecond)

// agentRecv is one receiving endpoint with its own buffers: a pass reads
// every socket before afterBatch, so the buffers of one must not be reused
// for the next.
type agentRecv struct {
	c     Endpoint
	bufs  [][]byte
	sizes []int
	from  []netip.AddrPort
	held  int   // datagrams a park already read into the buffers
	err   error // the error that stopped this endpoint (closed)
}

type agent struct {
	recv []agentRecv
	// poller parks the agent on its sockets and wake eventfd; nil when an
	// endpoint has no fd (in-memory), then parks wait on recv[0].
	poller *bus.Poller
	idle   bus.Idle
	empty  int // consecutive passes without work
	// ready is the set of recv indexes the pass reads (bit i: recv[i]):
	// from the poller (a park's result, or a zero-timeout poll at the
	// start of the pass), or all of them without a poller.
	ready      uint64
	readyKnown bool // ready came from a park: no poll before the pass

	nextTickNs, nextStatusNs int64

	// From the fsync thread: the journal's Durable() is the watermark;
	// syncFailures counts failed fsyncs, syncErr holds the first.
	durableSeen     uint64
	syncFailures    atomic.Uint64
	syncFailureSeen uint64
	syncErr         atomic.Pointer[error]

	// parked is set while the agent is in (or about to enter) the
	// poller; the fsync thread writes the eventfd only then.
	parked atomic.Bool
	stop   atomic.Bool
	done   chan struct{}

	// status is the latest copy the agent published; statusKick wakes
	// the writer for it.
	status     atomic.Pointer[Status]
	statusKick chan struct{}

	// Counters of the duty cycle (read by tests and status).
	passes, parks atomic.Uint64
}

func newAgent(n *Node) *agent {
	a := &agent{idle: n.cfg.Idle, done: make(chan struct{}), statusKick: make(chan struct{}, 1)}
	for _, c := range []Endpoint{n.uc, n.mcRecv} {
		if c == nil {
			continue
		}
		r := agentRecv{c: c, bufs: make([][]byte, bus.BatchSizeDefault), sizes: make([]int, bus.BatchSizeDefault),
			from: make([]netip.AddrPort, bus.BatchSizeDefault)}
		arena := make([]byte, bus.BatchSizeDefault*bus.DatagramBytesDefault)
		for i := range r.bufs {
			r.bufs[i] = arena[i*bus.DatagramBytesDefault : (i+1)*bus.DatagramBytesDefault : (i+1)*bus.DatagramBytesDefault]
		}
		a.recv = append(a.recv, r)
	}
	a.poller = newAgentPoller(n, a.recv)
	return a
}

// newAgentPoller registers every receiving socket in one epoll instance,
// or returns nil when one of them has no fd (in-memory endpoints) or the
// platform has no epoll.
func newAgentPoller(n *Node, recv []agentRecv) *bus.Poller {
	for _, r := range recv {
		if _, ok := r.c.(*bus.UDP); !ok {
			return nil
		}
	}
	p, err := bus.NewPoller()
	if err != nil {
		n.cfg.Log.Warn("no epoll for the agent: it parks with a bounded wait", "err", err)
		return nil
	}
	for _, r := range recv {
		if err := p.Add(r.c.(*bus.UDP)); err != nil {
			p.Close()
			n.cfg.Log.Warn("no epoll for the agent: it parks with a bounded wait", "err", err)
			return nil
		}
	}
	return p
}

// startAgent starts the agent thread, and the fsync thread and status
// writer it needs.
func (n *Node) startAgent() error {
	a := newAgent(n)
	now := n.nowNs()
	a.nextTickNs = now + n.cfg.TickIntervalNs
	a.nextStatusNs = now + StatusIntervalNs
	a.durableSeen = n.j.Durable()
	n.agent = a
	started := make(chan error, 1)
	go n.runAgent(a, started)
	if err := <-started; err != nil {
		<-a.done
		if a.poller != nil {
			a.poller.Close()
		}
		n.agent = nil
		return err
	}
	if n.cfg.Journal.Policy != journal.SyncNone {
		// Under fsync none the journal calls records durable as Flush
		// writes them (afterAppend, flushJournal): there is nothing for an
		// fsync thread to do, so there is none.
		n.wg.Add(1)
		go n.syncLoop()
	}
	if n.cfg.StatusFile != "" {
		n.wg.Add(1)
		go n.statusLoop(a)
	}
	return nil
}

// stopAgent stops the agent thread and waits for it (at most one bounded
// park). The fsync thread and status writer stop on n.stop afterwards.
func (n *Node) stopAgent() {
	a := n.agent
	if a == nil {
		return
	}
	a.stop.Store(true)
	if a.poller != nil {
		_ = a.poller.Wake()
	}
	<-a.done
}

func (n *Node) runAgent(a *agent, started chan<- error) {
	defer close(a.done)
	unlock, err := bus.LockAgentThread(n.cfg.PinCPU, n.cfg.CPU)
	if err != nil {
		started <- err
		return
	}
	defer unlock()
	started <- nil
	parkAtOnce := a.idle.AgentPhase(1) == bus.PhasePark
	// A back-off window polls on only while traffic is dense: two passes
	// with work within the window. A lone heartbeat or liveness ack every
	// few milliseconds then parks at once, so an idle node costs what
	// block costs; a stream of commands never parks (bus.AgentPhaseAt).
	lastWork, hot := n.nowNs(), false
	for !a.stop.Load() {
		now := n.nowNs()
		a.passes.Add(1)
		n.pollReady(a)
		if n.doWork(now) > 0 {
			hot = now-lastWork < int64(a.idle.AgentWindow())
			a.empty, lastWork = 0, now
			if parkAtOnce {
				// block: back to epoll_wait at once. It is level-triggered,
				// so it returns at once when more arrived, for the cost of
				// the poll an empty pass would make.
				n.park(a, now)
			}
			continue
		}
		a.empty++
		idleNs := now - lastWork
		if !hot {
			idleNs = math.MaxInt64
		}
		switch a.idle.AgentPhaseAt(a.empty, idleNs) {
		case bus.PhaseYield:
			bus.Yield()
		case bus.PhasePark:
			n.park(a, now)
		}
	}
}

// doWork is one pass of the duty cycle; it returns the work done
// (datagrams handled and durable progress; timers and status are not work,
// so an idle node parks between its ticks).
func (n *Node) doWork(now int64) int {
	l := passLock{n: n}
	work, ok := n.receivePass(now, &l)
	if ok && work > 0 {
		n.afterBatch(now)
	}
	if ok && n.cfg.Journal.Policy != journal.SyncNone {
		var w int
		w, ok = n.durablePass(now, &l)
		work += w
	}
	if ok {
		ok = n.timerPass(now, &l)
	}
	if ok {
		var w int
		w, ok = n.recomputePass(&l)
		work += w
	}
	l.unlock()
	if !ok {
		return 0
	}
	return work
}

// passLock takes the node's lock at most once per pass, and only when the
// pass has something to do under it.
type passLock struct {
	n      *Node
	locked bool
}

// lock takes the lock if the pass does not hold it yet; false: the node
// closed.
func (l *passLock) lock() bool {
	if !l.locked {
		l.n.mu.Lock()
		l.n.beginPass()
		l.locked = true
	}
	return !l.n.closed
}

func (l *passLock) unlock() {
	if l.locked {
		l.n.endPass()
		l.n.mu.Unlock()
		l.locked = false
	}
}

// receivePass reads the sockets the poller reported ready and handles
// every datagram; false: the node closed.
func (n *Node) receivePass(now int64, l *passLock) (int, bool) {
	a := n.agent
	work := 0
	for i := range a.recv {
		r := &a.recv[i]
		if r.err != nil || a.ready&(1<<uint(i)) == 0 {
			continue
		}
		k := r.held
		r.held = 0
		if k == 0 {
			var err error
			if k, err = r.c.Receive(r.bufs, r.sizes, r.from, 0); err != nil {
				n.agentReceiveError(r, err)
				continue
			}
		}
		if k == 0 {
			continue
		}
		if !l.lock() {
			return 0, false
		}
		for j := 0; j < k; j++ {
			n.onDatagram(r.bufs[j][:r.sizes[j]], r.from[j], now)
		}
		work += k
	}
	return work, true
}

// durablePass picks up what the fsync thread published: failures, and a
// risen durable watermark (work 1); false: the node closed.
func (n *Node) durablePass(now int64, l *passLock) (int, bool) {
	a := n.agent
	if f := a.syncFailures.Load(); f != a.syncFailureSeen {
		if !l.lock() {
			return 0, false
		}
		for ; a.syncFailureSeen < f; a.syncFailureSeen++ {
			n.syncFailedLocked(*a.syncErr.Load())
		}
	}
	if d := n.j.Durable(); d != a.durableSeen {
		if !l.lock() {
			return 0, false
		}
		n.syncedLocked(now)
		return 1, true
	}
	return 0, true
}

// timerPass runs the tick and the status copy when the clock says they
// are due; false: the node closed.
func (n *Node) timerPass(now int64, l *passLock) bool {
	a := n.agent
	if now >= a.nextTickNs {
		// drainSendOnly runs off the lock (what the pass queued leaves
		// first): it never delays an API caller waiting for the lock.
		l.unlock()
		n.drainSendOnly()
		if !l.lock() {
			return false
		}
		n.tickLocked(now)
		a.nextTickNs += n.cfg.TickIntervalNs
		if a.nextTickNs <= now {
			a.nextTickNs = now + n.cfg.TickIntervalNs // a stall: skip the missed ticks, as a Ticker does
		}
	}
	if now >= a.nextStatusNs {
		a.nextStatusNs += StatusIntervalNs
		if a.nextStatusNs <= now {
			a.nextStatusNs = now + StatusIntervalNs
		}
		if n.cfg.StatusFile != "" {
			if !l.lock() {
				return false
			}
			// A copy of values, made at status cadence (never per command);
			// the writer marshals and writes it on its own goroutine.
			st := n.statusLocked()
			a.status.Store(&st)
			select {
			case a.statusKick <- struct{}{}:
			default:
			}
		}
	}
	return true
}

// pollReady sets the sockets the coming pass reads: what the park
// before it found, else one zero-timeout epoll_wait over all of them (one
// syscall however many sockets the node has, where polling each would be
// one per socket), else (no poller) all of them.
func (n *Node) pollReady(a *agent) {
	if a.readyKnown {
		a.readyKnown = false
		return
	}
	if a.poller == nil {
		a.ready = ^uint64(0)
		return
	}
	ready, err := a.poller.Wait(0)
	if err != nil {
		n.cfg.Log.Warn("agent poll", "err", err)
		ready = ^uint64(0)
	}
	a.ready = ready
}

// agentReceiveError stops polling an endpoint whose Receive failed for
// good (closed); other errors are counted by the bus and retried.
func (n *Node) agentReceiveError(r *agentRecv, err error) {
	if errors.Is(err, bus.ErrClosed) {
		r.err = err
	}
}

// park waits for an arrival, a wake or the next timer deadline, whichever
// comes first.
func (n *Node) park(a *agent, now int64) {
	deadline := a.nextTickNs
	if n.cfg.StatusFile != "" {
		deadline = min(deadline, a.nextStatusNs)
	}
	timeout := max(deadline-now, 0)
	a.parks.Add(1)
	if a.poller == nil {
		n.parkWithoutFds(a, min(timeout, memParkNsMax))
		return
	}
	a.parked.Store(true)
	// Dekker with the fsync thread: it stores the watermark, then reads
	// parked; the agent stores parked, then reads the watermark. One of
	// the two sees the other, so a durable rise is never slept through.
	if a.stop.Load() || (n.cfg.Journal.Policy != journal.SyncNone && n.j.Durable() != a.durableSeen) {
		a.parked.Store(false)
		return
	}
	ready, err := a.poller.Wait(timeout)
	if err != nil {
		n.cfg.Log.Warn("agent park", "err", err)
		ready = ^uint64(0)
	}
	a.parked.Store(false)
	a.ready, a.readyKnown = ready, true
}

// parkWithoutFds is the in-memory bus's park (no fds to epoll): a bounded
// wait on the first endpoint, whose datagrams the next pass handles.
func (n *Node) parkWithoutFds(a *agent, timeoutNs int64) {
	r := &a.recv[0]
	if r.err != nil || timeoutNs <= 0 {
		return
	}
	k, err := r.c.Receive(r.bufs, r.sizes, r.from, time.Duration(timeoutNs))
	if err != nil {
		n.agentReceiveError(r, err)
		return
	}
	r.held = k
}

// syncLoop is the fsync thread (fsync group and always): natural group
// commit, LMAX's and TigerBeetle's way. Woken by kickSync after the agent
// wrote records, it fsyncs everything written so far; whatever the agent
// writes while that fsync runs kicks it again and goes into the next one.
// There is no timer: under load the groups grow by themselves, idle they
// are one record. The journal's GroupWindowNs and GroupRecords (which
// SyncDue applies for the simulator's SyncStep) are thus upper bounds the
// process always meets early, never a wait. It publishes through the
// journal's atomic durable watermark and wakes a parked agent with the
// eventfd; it never takes n.mu.
func (n *Node) syncLoop() {
	defer n.wg.Done()
	a := n.agent
	for {
		select {
		case <-n.stop:
			return
		case <-n.syncKick:
		}
		n.syncOnce(a)
	}
}

// syncOnce is one group commit of the fsync thread: sync, publish a
// failure, wake a parked agent. It allocates nothing.
func (n *Node) syncOnce(a *agent) {
	if err := n.j.Sync(); err != nil && !errors.Is(err, journal.ErrClosed) {
		// A copy only here: taking err's own address would move it to
		// the heap on every sync (one malloc per group commit).
		failed := err
		a.syncErr.CompareAndSwap(nil, &failed)
		a.syncFailures.Add(1)
	}
	if a.parked.Load() && a.poller != nil {
		_ = a.poller.Wake()
	}
}

// statusLoop writes each status copy the agent publishes (marshal and
// file I/O off the agent and off the lock).
func (n *Node) statusLoop(a *agent) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-a.statusKick:
		}
		if st := a.status.Load(); st != nil {
			n.writeStatus(st)
		}
	}
}
