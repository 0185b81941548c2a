package session

import (
	"errors"

	"github.com/seqbus/seqbus/wire"
)

// Config configures a Replay.
type Config struct {
	// History is the number of outputs kept over all sessions; <= 0: none
	// (every request is answered TooOld). The caller bounds it by
	// MaxHistory.
	History int
	// Off (UNSAFE, test only): requests are counted and otherwise ignored.
	Off bool
	// DatagramBytes bounds a replayed OUTPUT frame (0: wire.DefaultDatagramLen).
	DatagramBytes int
}

// Counters are session replay's. Their names are status.json's: node
// embeds them, flat, in its node object.
type Counters struct {
	// Requests received, outputs served in replays, TooOld answers (past
	// the history, or none) and Refused ones (not primary, over the rate
	// bound); outputs recorded in the history and times it was cleared (a
	// snapshot installed, a rebuild).
	ReplayRequests, ReplayServed, ReplayTooOld, ReplayRefused uint64
	ReplayRecorded, ReplayResets                              uint64
	// Requests older than the history answered by recomputing from the
	// journal, the records those recomputes read, requests refused
	// because one was already running, and recomputes that failed (an
	// unreadable journal or snapshot: the client is refused and retries).
	ReplayRecomputed, ReplayRecomputeRecords, ReplayRecomputeBusy, ReplayRecomputeFailed uint64
}

// Replay is one node's session replay: the history every role records
// into, the request budget, and the one recompute slot. One goroutine
// owns it (the node's agent, under its lock).
type Replay struct {
	cfg      Config
	hist     *History
	budget   Budget
	busy     bool // a recompute runs (between StartRecompute and Finish)
	counters Counters
	outs     []Output    // the last answer's outputs (reused)
	batch    *wire.Batch // Frames' (reused)
}

// New returns a Replay with a history of cfg.History outputs (none when
// <= 0).
func New(cfg Config) *Replay {
	return &Replay{cfg: cfg, hist: NewHistory(cfg.History), batch: wire.NewBatch(cfg.DatagramBytes)}
}

// History is the output history, nil when there is none.
func (r *Replay) History() *History { return r.hist }

// Counters returns the counters (a copy).
func (r *Replay) Counters() Counters { return r.counters }

// Busy reports whether a recompute runs.
func (r *Replay) Busy() bool { return r.busy }

// Record keeps an output of the command at seq in the history, if it is
// one the history keeps (History.Record), and counts it.
func (r *Replay) Record(seq, to uint64, payload []byte) {
	if r.hist != nil && r.hist.Record(seq, to, payload) {
		r.counters.ReplayRecorded++
	}
}

// Reset forgets the history (a snapshot replaced the state, a rebuild
// starts over) and counts it.
func (r *Replay) Reset() {
	if r.hist != nil {
		r.hist.Reset()
		r.counters.ReplayResets++
	}
}

// Request is a REPLAY_REQUEST and what the runtime knew when it arrived.
type Request struct {
	Session, From uint64
	NowNs         int64
	// Leading: the node is the primary and may release at NowNs.
	// Released, Durable and Epoch are read only when it is.
	Leading                  bool
	Released, Durable, Epoch uint64
	// Engine is the node's state machine's report of a session's last
	// output seq; nil when it has none.
	Engine OutSeqer
}

// Action is what an Answer asks of the runtime.
type Action uint8

const (
	// None: nothing to send (replay switched off).
	None Action = iota
	// Send: the Outputs, then End.
	Send
	// StartRecompute: run Job (Recompute) off the agent and hand its
	// Result to Finish, which answers.
	StartRecompute
)

// Answer is what to do about a request (or a finished recompute), in this
// order.
type Answer struct {
	Action Action
	// NoteSession: first, point the session's outputs at the requester's
	// address (the client may have moved: a restart).
	NoteSession bool
	// Outputs go first (Send), in the OUTPUT frames Replay.Frames packs.
	// Valid until the Replay's next call.
	Outputs []Output
	// End goes last (Send); the runtime sets its Origin.
	End wire.ReplayEnd
	// Job is the recompute to start (StartRecompute).
	Job Job
	// Err: a recompute failed (counted, answered Refused); the runtime
	// logs it.
	Err error
}

// Request answers a REPLAY_REQUEST: from the history when it holds the
// asked outputs (only those of commands at or below Released: a replay
// passes the gate like any release), by a recompute from the journal when
// they left it, Refused when not leading or over the budget, TooOld
// without a history.
func (r *Replay) Request(q Request) Answer {
	r.counters.ReplayRequests++
	if r.cfg.Off {
		return Answer{} // UNSAFE, test-only: replay switched off
	}
	a := Answer{Action: Send, End: wire.ReplayEnd{Session: q.Session, From: q.From, Next: q.From}}
	if !q.Leading || !r.budget.Allow(q.NowNs) {
		r.counters.ReplayRefused++
		a.End.Status = wire.ReplayRefused
		return a
	}
	if r.hist == nil {
		// No history: everything the session had is gone for a replay, so
		// the client skips it rather than waiting for it forever.
		r.counters.ReplayTooOld++
		a.End.Status = wire.ReplayTooOld
		if q.Engine != nil {
			a.End.Highest = q.Engine.SessionOutSeq(q.Session)
			a.End.Next = max(q.From, a.End.Highest+1)
		}
		return a
	}
	a.NoteSession = true
	p := r.hist.Plan(q.Session, q.From, q.Released, MaxReplayOutputs)
	if q.Engine != nil && p.Highest == 0 {
		// Nothing of the session is held: whatever it had left the history.
		if h := q.Engine.SessionOutSeq(q.Session); h >= q.From {
			p.TooOld, p.Next, p.Highest = true, h+1, h
		}
	}
	if p.TooOld {
		return r.startRecompute(q, p, a)
	}
	a.End.Next, a.End.Highest = p.Next, p.Highest
	r.outs = r.hist.AppendOutputs(r.outs[:0], q.Session, p)
	a.Outputs = r.outs
	r.counters.ReplayServed += uint64(len(r.outs))
	return a
}

// startRecompute answers a request the history cannot (plan p says
// TooOld) with a recompute, or Refused while one runs (one at a time: the
// client retries).
func (r *Replay) startRecompute(q Request, p Plan, a Answer) Answer {
	if r.busy {
		r.counters.ReplayRecomputeBusy++
		r.counters.ReplayRefused++
		a.End.Status = wire.ReplayRefused
		return a
	}
	r.busy = true
	a.Action = StartRecompute
	a.Job = Job{Session: q.Session, From: q.From, Upto: min(q.Released, q.Durable), Epoch: q.Epoch, TooOld: p}
	return a
}

// Finish takes back the result of the recompute Request started and
// answers it. current: the node still leads in the job's epoch and may
// release (the runtime need not ask when res.Err is set); a change of
// term meanwhile may have truncated what it read, so the answer is then
// Refused. engine is as in Request.
func (r *Replay) Finish(res *Result, current bool, engine OutSeqer) Answer {
	r.busy = false
	job := res.Job
	a := Answer{Action: Send, End: wire.ReplayEnd{Session: job.Session, From: job.From, Next: job.From}}
	r.counters.ReplayRecomputeRecords += res.Records
	switch {
	case res.Err != nil || !current:
		if res.Err != nil && !errors.Is(res.Err, ErrStopped) {
			r.counters.ReplayRecomputeFailed++
			a.Err = res.Err
		}
		r.counters.ReplayRefused++
		a.End.Status = wire.ReplayRefused
	case res.TooOld:
		r.counters.ReplayTooOld++
		a.End.Status, a.End.Next, a.End.Highest = wire.ReplayTooOld, job.TooOld.Next, job.TooOld.Highest
	default:
		r.counters.ReplayRecomputed++
		r.counters.ReplayServed += uint64(len(res.Outputs))
		a.Outputs = res.Outputs
		if k := len(res.Outputs); k > 0 {
			a.End.Next = res.Outputs[k-1].OutSeq + 1
		}
		a.End.Highest = job.TooOld.Highest
		if engine != nil {
			a.End.Highest = engine.SessionOutSeq(job.Session)
		}
	}
	return a
}
