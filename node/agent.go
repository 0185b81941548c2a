package node

import (
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/status"
)

// The agent (issue 18, items 1–3 and 5): one locked OS thread per node
// runs a duty cycle, Aeron's shared mode and LMAX's single writer. The
// thread, the idle strategy, the receive buffers, the poller and the park
// are bus.AgentRunner's; the node is its bus.Agent. Each pass (doWork)
// hands what every readable socket delivered to onDatagram and then
// afterBatch once for the whole pass (smart batching: everything that
// arrived goes into the same DATA frames and journal write), picks up the
// durable watermark the fsync thread published, runs the timer work when
// its deadline has passed by the clock (no ticker goroutine), drains the
// send-only sockets at tick cadence, and at status cadence publishes a
// copy of the status for the status writer. A pass that found nothing
// lets the runner spin, yield or park on the node's fds, bounded by the
// next timer deadline (DeadlineNs).
//
// Other threads: the fsync thread (fsync group/always only), the status
// writer and a session replay's recompute. None takes n.mu: they publish
// through atomics and the journal's durable watermark, then call
// runner.Wake; Pending is the agent's side of that handshake
// (bus.AgentRunner.Wake). n.mu is still taken once per pass that has
// work, uncontended unless an API call (Status, Role, Released, a test)
// holds it.
//
// The simulator never starts the agent: Deliver, Tick and SyncStep
// (drive.go) run the same pieces of the pass (onDatagram+afterBatch,
// tickLocked, syncedLocked) one at a time.

// agent is the node's side of the duty cycle: its timers and what the
// other threads publish to it.
type agent struct {
	n      *Node
	runner *bus.AgentRunner

	nextTickNs, nextStatusNs int64

	// status writes the latest copy the agent published (marshal and
	// file I/O off the agent and off the lock); nil without a status file.
	status *status.Publisher
}

var _ bus.Agent = (*agent)(nil)

// newAgent makes the agent and its runner over the node's receiving
// sockets, its timers starting now; the thread is not started.
func newAgent(n *Node) (*agent, error) {
	a := &agent{n: n}
	if n.cfg.StatusFile != "" {
		a.status = status.NewPublisher(n.cfg.StatusFile, n.statusWrite, func(err error) {
			if err != nil {
				n.cfg.Log.Warn("status file not written; seqbus stat shows the last one written, marked stale", "path", n.cfg.StatusFile, "err", err)
			} else {
				n.cfg.Log.Info("status file written again", "path", n.cfg.StatusFile)
			}
		}, n.finishStatus)
		a.status.Warn = n.cfg.Log.Warn
	}
	cfg := bus.AgentRunnerConfig{Idle: n.cfg.Idle, PinCPU: n.cfg.PinCPU, CPU: n.cfg.CPU, NowNs: n.nowNs, DatagramBytes: bus.RecvBufferBytes(n.cfg.DatagramBytes),
		Warn: func(msg string, err error) { n.cfg.Log.Warn(msg, "err", err) }}
	r, err := bus.NewAgentRunner(cfg, a, n.tr.Receivers()...)
	if err != nil {
		return nil, err
	}
	a.runner = r
	now := n.nowNs()
	a.nextTickNs = now + n.cfg.TickIntervalNs
	a.nextStatusNs = now + status.IntervalNs
	n.commit.Seen()
	return a, nil
}

// DoWork is the runner's pass (doWork).
func (a *agent) DoWork(now int64, rx *bus.Received) int { return a.n.doWork(now, rx) }

// DeadlineNs is the next timer: the tick, and the status copy when there
// is a status file.
func (a *agent) DeadlineNs() int64 {
	if a.n.cfg.StatusFile != "" {
		return min(a.nextTickNs, a.nextStatusNs)
	}
	return a.nextTickNs
}

// Pending reports what another thread published and the next pass picks
// up: a durable rise or a failed fsync (the fsync thread), a finished
// recompute. Each publisher stores, then calls runner.Wake.
func (a *agent) Pending() bool {
	n := a.n
	return n.commit.Pending() || n.recompute.done.Load() != nil
}

// Start runs the node's agent thread, and the fsync thread and status
// writer where the configuration needs them; a node that cannot start is
// closed.
func (n *Node) Start() error {
	a, err := newAgent(n)
	if err == nil {
		n.agent = a // before the thread runs: its passes read it
		if err = a.runner.Start(); err != nil {
			a.runner.Close()
			n.agent = nil
		}
	}
	if err != nil {
		n.Close()
		return err
	}
	n.commit.Start() // none under fsync none: Flush makes records durable
	if a.status != nil {
		a.status.Start()
	}
	return nil
}

// stopAgent stops the agent thread and waits for it (at most one bounded
// park), then the status writer. The fsync thread stops after it.
func (n *Node) stopAgent() {
	if n.agent != nil {
		n.agent.runner.Stop()
		if n.agent.status != nil {
			n.agent.status.Stop()
		}
	}
}

// doWork is one pass of the duty cycle; it returns the work done
// (datagrams handled and durable progress; timers and status are not work,
// so an idle node parks between its ticks).
func (n *Node) doWork(now int64, rx *bus.Received) int {
	l := passLock{n: n}
	work, ok := n.receivePass(now, rx, &l)
	if ok && work > 0 {
		n.afterBatch(now)
	}
	if ok {
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
		l.n.tr.Begin()
		l.locked = true
	}
	return !l.n.closed
}

func (l *passLock) unlock() {
	if l.locked {
		l.n.tr.End()
		l.n.mu.Unlock()
		l.locked = false
	}
}

// receivePass handles every datagram the readable sockets delivered;
// false: the node closed.
func (n *Node) receivePass(now int64, rx *bus.Received, l *passLock) (int, bool) {
	work := 0
	for {
		b, ok := rx.Next()
		if !ok {
			return work, true
		}
		if !l.lock() {
			return 0, false
		}
		for j := 0; j < b.Len(); j++ {
			pkt, from := b.Datagram(j)
			n.onDatagram(pkt, from, now)
		}
		work += b.Len()
	}
}

// durablePass picks up what the fsync thread published: failures, and a
// risen durable watermark (work 1); false: the node closed.
func (n *Node) durablePass(now int64, l *passLock) (int, bool) {
	if !n.commit.Pending() {
		return 0, true
	}
	if !l.lock() {
		return 0, false
	}
	failed, err, rose := n.commit.Take()
	for range failed {
		n.syncFailedLocked(err)
	}
	if !rose {
		return 0, true
	}
	n.onDurable(now)
	return 1, true
}

// timerPass runs the tick and the status copy when the clock says they
// are due; false: the node closed.
func (n *Node) timerPass(now int64, l *passLock) bool {
	a := n.agent
	if now >= a.nextTickNs {
		// drainSendOnly runs off the lock (what the pass queued leaves
		// first): it never delays an API caller waiting for the lock.
		l.unlock()
		n.tr.DrainSendOnly()
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
		a.nextStatusNs += status.IntervalNs
		if a.nextStatusNs <= now {
			a.nextStatusNs = now + status.IntervalNs
		}
		if n.cfg.StatusFile != "" {
			if !l.lock() {
				return false
			}
			// A copy of values, made at status cadence (never per command);
			// the writer marshals and writes it on its own goroutine.
			st := n.statusLocked()
			a.status.Publish(&st)
		}
	}
	return true
}

// wakeAgent wakes a parked agent (the fsync thread's call after it
// published; nothing before Start, or for a node driven by hand).
func (n *Node) wakeAgent() {
	if a := n.agent; a != nil {
		a.runner.Wake()
	}
}
