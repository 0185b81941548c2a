package client

import "github.com/seqbus/seqbus/engine"

// Session output sequence (issue 20). Every output to a session carries
// that session's output seq (engine.Output.OutSeq, 1, 2, 3, ... assigned by
// the replicated engine). The core delivers to the application only the
// next one (LastOutSeq+1): a repeat is dropped, one beyond the next is a
// gap, dropped too, and the core asks the primary to replay the session's
// outputs from LastOutSeq+1 (REPLAY_REQUEST), which delivers them, the
// dropped ones included, in order. The same request follows every
// reconnect (a failover): the new primary holds, from applying the same
// commands as a standby, the outputs the old one never released. So the
// application sees every output of its session's history exactly once and
// in order, as far as the primary's history reaches (see the README's
// guarantees for its bounds).

// DefaultReplayEveryNs paces replay requests: at most one per 50 ms while
// a replay is wanted (a gap not yet filled, or outputs the primary still
// withholds behind its gate), a twentieth of a lease.
const DefaultReplayEveryNs = 50_000_000

// DefaultProbeEveryNs: with no replay wanted, the core still asks once a
// second from LastOutSeq+1 (a probe, one small datagram). The answer's
// Highest reveals outputs lost at the tail of the session's stream, which
// no later output would reveal as a gap (SoupBinTCP's heartbeats carry the
// next sequence number for the same reason).
const DefaultProbeEveryNs = 1_000_000_000

// SessionStats counts the session-sequence work.
type SessionStats struct {
	// LastOutSeq is the output seq of the last output delivered.
	LastOutSeq uint64
	// Gaps: outputs that arrived beyond the next expected one (each asked
	// for a replay); Repeats: outputs dropped as already delivered.
	Gaps, Repeats uint64
	// ReplayRequests sent; ReplayDelivered outputs delivered from replay
	// frames, ReplayExecutions of them executions (fills the application
	// would not have learnt of without the replay).
	ReplayRequests, ReplayDelivered, ReplayExecutions uint64
	// TooOld answers, and the outputs they skipped (lost for good).
	TooOld, Skipped uint64
	// Refused answers (not the primary, or over its rate bound).
	Refused uint64
	// LateResults: repeats delivered because they answer a command still
	// in flight (its original was skipped).
	LateResults uint64
}

// answersPending reports whether o is a result (or a duplicate of one) of
// a command still in flight.
func (c *Core) answersPending(o *engine.Output) bool {
	switch o.Kind {
	case engine.KindAck, engine.KindReject, engine.KindCancelled, engine.KindDuplicate:
	default:
		return false
	}
	p := c.slot(o.ClientOrderID)
	return p.used && p.id == o.ClientOrderID
}

// replayState is the core's part of session replay.
type replayState struct {
	lastOut uint64
	wanted  bool
	// behind: the primary reported outputs up to target that are not
	// delivered yet. Normally they are on their way (released, in
	// flight): the core asks again only if nothing arrived for a pacing
	// interval (behindAt: LastOutSeq when last looked, at noteNs), so a
	// busy session is not replayed what it is about to receive anyway.
	behind   bool
	behindAt uint64
	noteNs   int64
	// target: the session's highest output the primary reported in its last
	// Done answer; the replay is complete once it is delivered.
	target uint64
	sentNs int64
	every  int64
	// rejoining: Reconnected ran and no output has been admitted since,
	// so a refusal comes from a node that does not lead yet (the arbiter
	// names a holder a few ms before it promotes). answered: the last
	// request was answered (not refused), so a gap seen after it is news
	// its answer did not cover: a new primary answered before its gate
	// had released the outputs the old one never did, which only a
	// replay delivers. soon: either came, and the next request goes a
	// tenth of the pacing after the last instead of a whole one.
	rejoining, answered, soon bool
	// probeEvery paces the probes (<= 0: none).
	probeEvery int64
	stats      SessionStats
}

// LastOutSeq is the output seq of the last output delivered.
func (c *Core) LastOutSeq() uint64 { return c.rs.lastOut }

// SessionStats returns the session-sequence counters.
func (c *Core) SessionStats() SessionStats {
	s := c.rs.stats
	s.LastOutSeq = c.rs.lastOut
	return s
}

// ReplayWanted reports whether the core is asking for a replay.
func (c *Core) ReplayWanted() bool { return c.rs.wanted || c.rs.behind }

// Admit decides whether an output of this session is delivered to the
// application (then pass it on to OnOutput): market data and the
// unnumbered rejects (OutSeq 0) always are; a numbered output only when it
// is the next one. replay says the output came in a replay frame. A
// Duplicate (the answer to a resend) carries its original's seq and is
// delivered in that place when it is the next one, so its command is
// answered; as a repeat it is dropped like any other.
func (c *Core) Admit(o *engine.Output, replay bool) bool {
	if o.Kind == engine.KindMarketData || o.OutSeq == 0 {
		return true
	}
	r := &c.rs
	switch {
	case o.OutSeq <= r.lastOut:
		if c.answersPending(o) {
			// The result of a command still in flight whose original was
			// skipped (TooOld): its only chance to be answered.
			r.stats.LateResults++
			return true
		}
		r.stats.Repeats++
		return false
	case o.OutSeq > r.lastOut+1:
		r.stats.Gaps++
		r.wanted = true
		r.soon = r.soon || r.answered
		return false
	}
	r.lastOut = o.OutSeq
	r.rejoining = false
	if replay {
		r.stats.ReplayDelivered++
		if o.Kind == engine.KindExecution {
			r.stats.ReplayExecutions++
		}
	}
	if (r.wanted || r.behind) && r.target != 0 && r.lastOut >= r.target {
		r.wanted, r.behind = false, false
	}
	return true
}

// Reconnected asks for a replay from LastOutSeq+1 at the next PollReplay:
// call it when the client changes primary (a failover) or restarts.
func (c *Core) Reconnected() {
	c.rs.wanted, c.rs.behind, c.rs.target, c.rs.sentNs = true, false, 0, 0
	c.rs.rejoining = true
}

// PollReplay calls send(from) when a replay is wanted and the last request
// is at least the replay pacing old (DefaultReplayEveryNs), or, with none
// wanted, when the last request is a probe interval old
// (DefaultProbeEveryNs); it reports whether it asked.
func (c *Core) PollReplay(nowNs int64, send func(from uint64)) bool {
	r := &c.rs
	switch {
	case r.wanted:
		every := r.every
		if r.soon {
			every /= 10
		}
		if r.sentNs != 0 && nowNs-r.sentNs < every {
			return false
		}
	case r.behind:
		if nowNs-r.noteNs < r.every {
			return false
		}
		if r.lastOut != r.behindAt {
			r.behindAt, r.noteNs = r.lastOut, nowNs // still arriving
			return false
		}
		// Nothing arrived for a pacing interval: ask for it, and not
		// again before another interval (an answer resets it too).
		r.noteNs = nowNs
	case r.probeEvery <= 0 || nowNs-r.sentNs < r.probeEvery:
		return false
	}
	r.sentNs, r.soon, r.answered = nowNs, false, false
	r.stats.ReplayRequests++
	send(r.lastOut + 1)
	return true
}

// ReplayAnswer is what a REPLAY_END says (wire.ReplayEnd's fields).
type ReplayAnswer struct {
	From, Next, Highest uint64
	TooOld, Refused     bool
}

// OnReplayEnd takes the primary's answer to a replay request. Done: the
// replay is complete once the session's Highest output (which the primary
// may still withhold behind its gate) is delivered; until then the core
// asks again whenever nothing arrived for a pacing interval. TooOld: the outputs below Next are gone; the
// core skips them (counted in Skipped) and asks on from Next.
func (c *Core) OnReplayEnd(a ReplayAnswer) {
	r := &c.rs
	switch {
	case a.Refused:
		r.stats.Refused++
		// Refused by a node that has delivered nothing since the switch
		// to it: it does not lead yet and will within ms, so ask again
		// soon. A primary over its rate bound has delivered before: it
		// gets the whole pacing.
		r.soon = r.rejoining
		return
	case a.TooOld:
		r.stats.TooOld++
		if a.Next > r.lastOut+1 && a.From == r.lastOut+1 {
			r.stats.Skipped += a.Next - 1 - r.lastOut
			r.lastOut = a.Next - 1
			r.sentNs = 0 // ask on from Next at once
		}
		// What is left from Next to Highest is held: ask for it; nothing
		// left (a node without history): stop asking.
		r.target = a.Highest
		r.wanted, r.behind = r.lastOut < r.target, false
	default:
		// A probe's answer too: outputs up to Highest exist; they are
		// usually on their way, so the core asks again only if they stop
		// coming (see behind).
		r.target = max(r.target, a.Highest)
		r.wanted = false
		r.behind = r.lastOut < r.target
		r.behindAt, r.noteNs = r.lastOut, r.sentNs
	}
	r.answered = true
}
