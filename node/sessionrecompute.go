package node

import (
	"net/netip"
	"sync/atomic"

	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/session"
)

// Replay past the history: session.Recompute, a pure function of the job,
// a read-only view of the journal and a scratch state machine, runs on a
// goroutine of its own, never on the agent nor holding n.mu; the agent
// picks the result up on its next pass (doWork) and sends the answer
// session.Replay.Finish gives. The simulator drives the node without an
// agent (drive.go): there it runs inside the request's Deliver, on the
// simulator's one goroutine, so it stays deterministic.

// replayRecompute hands the one recompute's result from its goroutine to
// the agent; to is where the answer goes.
type replayRecompute struct {
	done atomic.Pointer[session.Result]
	to   netip.AddrPort
	// hook, when set (tests only, before Start or under n.mu), runs on the
	// recompute goroutine before it reads anything.
	hook func()
}

func (n *Node) startRecompute(job session.Job, to netip.AddrPort) {
	src, newSM, stop, hook := journal.DirReader{FS: n.cfg.FS, Dir: n.cfg.Dir}, n.cfg.NewScratchStateMachine, n.stop, n.recompute.hook
	run := func() *session.Result {
		if hook != nil {
			hook()
		}
		return session.Recompute(job, src, newSM, stop)
	}
	n.recompute.to = to
	if n.agent == nil {
		n.finishRecompute(run())
		return
	}
	a := n.agent
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.recompute.done.Store(run())
		a.runner.Wake() // after the store: Pending sees it (bus.AgentRunner.Wake)
	}()
}

// recomputePass is the agent's check for a finished recompute: one atomic
// load a pass; false: the node closed.
func (n *Node) recomputePass(l *passLock) (int, bool) {
	if n.recompute.done.Load() == nil {
		return 0, true
	}
	if !l.lock() {
		return 0, false
	}
	n.finishRecompute(n.recompute.done.Swap(nil))
	return 1, true
}

// finishRecompute sends a recompute's answer (under n.mu, on the agent or
// the simulator's goroutine): Refused after a change of term meanwhile,
// which may have truncated what it read.
func (n *Node) finishRecompute(r *session.Result) {
	current := r.Err == nil && n.rep.Roles().Epoch() == r.Job.Epoch && n.rep.MayLeadNow(n.nowNs())
	q, _ := n.eng().(session.OutSeqer)
	a := n.replay.Finish(r, current, q)
	if a.Err != nil {
		n.cfg.Log.Warn("replay from the journal failed", "session", r.Job.Session, "from", r.Job.From, "err", a.Err)
	}
	n.carryOut(a, n.recompute.to)
}
