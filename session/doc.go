// Package session is session replay as a pure core: the bounded history of
// outputs to client sessions every node keeps, the answer to a
// REPLAY_REQUEST, the request rate budget, and the recompute from the
// journal of outputs older than the history. No clock, socket, file, lock
// or goroutine: time arrives as nowNs, the journal through small
// read-only interfaces, a recompute's cancellation as a channel it polls
// without blocking, and every call returns what to do.
//
// Why every node keeps a history: the primary records as it applies, a
// standby as it applies the same commands (outputs are deterministic, so
// it holds the very same ones), a restarted node as it replays its
// journal (FillBelowSnapshot, then the rebuild's own replay). A client
// that reconnects (a failover) or sees a gap in its session's output seqs
// sends REPLAY_REQUEST(session, from); the primary answers with the
// session's outputs from that output seq on, in OUTPUT frames marked
// wire.FlagReplay, then REPLAY_END. Only outputs of commands at or below
// the released watermark are replayed: a replay passes the gate like any
// release. So an execution the old primary applied but never released (a
// resting order filled just before it died) reaches its client from the
// new primary.
//
// Bounds, each with its behaviour: the history holds Config.History
// outputs over all sessions (DefaultHistory, about 10 MB), oldest dropped
// first; a request for older outputs is recomputed from the journal, and
// answered TooOld with the oldest it could replay when the journal and
// its snapshots no longer reach back. One answer sends at most
// MaxReplayOutputs outputs (the client asks on from where it stopped); at
// most RequestBudget requests per RequestBudgetNs are answered (over
// that: Refused, counted); one recompute runs at a time (a request
// meanwhile: Refused, counted ReplayRecomputeBusy) and reads at most
// MaxRecomputeRecords records (reached before the asked output: TooOld).
// Without a history every request is TooOld: the client skips what it
// missed (counted) instead of waiting for it.
//
// # Usage contract
//
//  1. New(Config) once per node. On the goroutine that applies commands,
//     Record every output of every command applied (any role), and Reset
//     when a snapshot replaces the state. Record does not allocate.
//  2. Before a rebuild from the disk creates its state machine, call
//     FillBelowSnapshot with emitters that Record (and keep market data
//     where the runtime keeps it), so a restart does not shorten the
//     history while the journal reaches back.
//  3. For each REPLAY_REQUEST call Request with the monotonic time and,
//     when the node leads, the released and durable watermarks and its
//     epoch; carry out the Answer in order: NoteSession, then the Outputs,
//     then End (Action Send).
//  4. On Action StartRecompute run Recompute(Answer.Job, ...) on another
//     goroutine (or inline, in a simulator) over a read-only view of the
//     journal; hand the Result back to Finish on the owning goroutine,
//     with whether the node still leads in the job's epoch, and carry out
//     its Answer as in 3. Log Answer.Err when set.
//
// Example loop (one goroutine owns the Replay):
//
//	r := session.New(session.Config{History: session.DefaultHistory})
//	for ev := range events {
//		switch ev.kind {
//		case applied:
//			r.Record(ev.seq, ev.to, ev.payload)
//		case request:
//			a := r.Request(session.Request{Session: ev.session, From: ev.from, NowNs: ev.nowNs,
//				Leading: leading, Released: released, Durable: durable, Epoch: epoch})
//			if a.Action == session.StartRecompute {
//				go func() { done <- session.Recompute(a.Job, dir, newScratch, closing) }()
//				continue
//			}
//			send(a)
//		case recomputed:
//			send(r.Finish(ev.result, stillLeading(ev.result.Job.Epoch), nil))
//		}
//	}
package session
