package node

import (
	"fmt"
	"net/netip"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/wire"
)

// Session replay (issue 20, item 2). Every node, primary or standby, keeps
// the recent outputs to client sessions in a bounded history: the primary
// as it applies, a standby as it applies the same commands (the outputs
// are deterministic, so it holds the very same ones), a restarted node as
// it replays its journal. A client that reconnects (a failover) or sees a
// gap in its session's output seqs sends REPLAY_REQUEST(session, from);
// the primary answers with the session's outputs from that output seq on,
// in OUTPUT frames marked wire.FlagReplay, then REPLAY_END. Only outputs of
// commands at or below the released watermark are replayed: a replay
// passes the gate like any release. So an execution the old primary
// applied but never released (a resting order filled just before it
// died) reaches its client from the new primary.
//
// With no history (Config.SessionHistory < 0) every request is TooOld:
// the client skips what it missed (counted) instead of waiting for it.
//
// Bounds: the history holds Config.SessionHistory outputs over all
// sessions (default 65536, about 10 MB), oldest dropped first; a request
// for outputs older than that is recomputed from the journal
// (sessionrecompute.go), and answered TooOld with the oldest it could
// replay when the journal and its snapshots no longer reach back. A node
// rebuilding from its disk recomputes the outputs below its newest
// snapshot from the older one and the journal after it
// (historyBelowSnapshot), so a restart does not shorten the history while
// the journal reaches back.
// One request sends at most replayMaxOutputs outputs (the client asks on
// from where it stopped) and the node answers at most replayBudget
// requests per replayBudgetNs (over that: Refused, counted), so a flood
// of requests costs a bounded share of the agent.

// DefaultSessionHistory is the default Config.SessionHistory: 64k outputs,
// several seconds of a busy session's outputs at the rates measured here,
// far more than a failover's in-flight window (the publisher's 64k bound
// on outputs waiting for release is the same size, so everything a dead
// primary can have held back fits).
const DefaultSessionHistory = 1 << 16

// MaxSessionHistory bounds Config.SessionHistory (16M outputs, ~2.4 GB).
const MaxSessionHistory = 1 << 24

const (
	// replayMaxOutputs bounds the outputs one request sends.
	replayMaxOutputs = 4096
	// replayBudget requests per replayBudgetNs: 8 per 10 ms. A request
	// scans the history's session column (8 bytes an entry, ~30 µs for
	// 64k), so the worst case is a few percent of the agent.
	replayBudget   = 8
	replayBudgetNs = 10_000_000
)

// sessionHistory is the bounded history: parallel columns indexed by
// entry number mod capacity, so a scan for one session reads 8 bytes an
// entry. It never allocates after newSessionHistory.
type sessionHistory struct {
	session []uint64
	outSeq  []uint64
	seq     []uint64 // the command's seq (the gate's watermark is in seqs)
	size    []uint16
	payload [][MaxOutputBytes]byte
	next    uint64 // entries ever recorded: the newest is next-1
}

func newSessionHistory(capacity int) *sessionHistory {
	if capacity <= 0 {
		return nil
	}
	return &sessionHistory{
		session: make([]uint64, capacity), outSeq: make([]uint64, capacity), seq: make([]uint64, capacity),
		size: make([]uint16, capacity), payload: make([][MaxOutputBytes]byte, capacity),
	}
}

// record keeps one output of the command at seq if it is numbered in a
// session's history (not market data, not an unnumbered reject, not a
// duplicate answer, which repeats an output already held).
func (h *sessionHistory) record(seq, to uint64, payload []byte) bool {
	if to == engine.MarketData || len(payload) > MaxOutputBytes {
		return false
	}
	out, ok := engine.SessionOutSeq(payload)
	if !ok || out == 0 {
		return false
	}
	i := h.next % uint64(len(h.session))
	h.session[i], h.outSeq[i], h.seq[i] = to, out, seq
	h.size[i] = uint16(copy(h.payload[i][:], payload))
	h.next++
	return true
}

func (h *sessionHistory) reset() { h.next = 0 }

// oldest is the entry number of the oldest entry held.
func (h *sessionHistory) oldest() uint64 {
	return h.next - min(h.next, uint64(len(h.session)))
}

// replayPlan is what the history can answer for (session, from) under the
// released watermark: entries first..end (entry numbers, end exclusive)
// hold the session's outputs from..next-1, at most max of them.
type replayPlan struct {
	first, end    uint64
	next, highest uint64
	tooOld        bool
}

// plan finds what to replay. It walks back from the newest entry to the
// one holding output from (so a reconnect, which asks for recent outputs,
// reads little), then forward under released.
func (h *sessionHistory) plan(session, from, released uint64, max int) replayPlan {
	p := replayPlan{next: from}
	lo := h.oldest()
	start := h.next // entry number of output `from`, if held
	lowest := uint64(0)
	c := uint64(len(h.session))
	for e := h.next; e > lo; e-- {
		i := (e - 1) % c
		if h.session[i] != session {
			continue
		}
		if p.highest == 0 {
			p.highest = h.outSeq[i]
		} else if h.outSeq[i] != lowest-1 {
			// A hole (a rebuild whose journal ended below its snapshot):
			// only the run above it can be replayed.
			break
		}
		lowest = h.outSeq[i]
		if h.outSeq[i] < from {
			break
		}
		start = e - 1
	}
	switch {
	case p.highest == 0 || from > p.highest:
		// Nothing of the session at or after from: nothing to send.
		p.first, p.end = start, start
		return p
	case lowest > from:
		// The outputs from..lowest-1 left the history.
		p.tooOld, p.next = true, lowest
		return p
	}
	p.first = start
	e, sent := start, 0
	for ; e < h.next && sent < max; e++ {
		i := e % c
		if h.seq[i] > released {
			break
		}
		if h.session[i] == session {
			p.next = h.outSeq[i] + 1
			sent++
		}
	}
	p.end = e
	return p
}

// historyEmitter records a standby's (or a rebuilding node's) outputs:
// those to sessions in the history, market data in the market-data ring
// (mdfeed.go) when there is one; seq is the command being applied (the
// scratch state machine of historyBelowSnapshot is not the node's, so the
// seq comes from here, not from the node's engine).
type historyEmitter struct {
	n     *Node
	seq   uint64
	mdToo bool
}

func (e *historyEmitter) Emit(to uint64, payload []byte) {
	if to == engine.MarketData {
		if e.mdToo {
			e.n.md.Add(e.seq, payload) // false without a ring: dropped
		}
		return
	}
	e.n.recordHistory(e.seq, to, payload)
}

// applyOut returns the emitter a node that does not release (a standby,
// a rebuild from the journal) applies seq with: the history's (which
// passes market data on to the ring), the ring's alone without a history,
// or nil without either (then the engine skips encoding its outputs).
func (n *Node) applyOut(seq uint64) engine.Emitter {
	if n.outHist == nil {
		return n.mdStandbyEmitter()
	}
	n.histEmitter.n, n.histEmitter.seq, n.histEmitter.mdToo = n, seq, true
	return &n.histEmitter
}

func (n *Node) recordHistory(seq, to uint64, payload []byte) {
	if n.outHist != nil && n.outHist.record(seq, to, payload) {
		n.stats.ReplayRecorded++
	}
}

// resetHistory forgets the history (a snapshot replaced the state: the
// outputs of the commands it skipped were never seen here).
func (n *Node) resetSessionHistory() {
	if n.outHist != nil {
		n.outHist.reset()
		n.stats.ReplayResets++
	}
}

// newScratch builds a state machine for a recompute (never the node's).
func (c *Config) newScratch() (engine.StateMachine, error) {
	if c.NewScratchStateMachine != nil {
		return c.NewScratchStateMachine()
	}
	return c.NewStateMachine()
}

// sessionOutSeqer is the engine's optional report of a session's last
// output seq (engine.Engine.SessionOutSeq).
type sessionOutSeqer interface{ SessionOutSeq(session uint64) uint64 }

// historyRebuildMax bounds the commands a rebuild replays a second time to
// fill the history below its snapshot: 1M, a fraction of a second.
const historyRebuildMax = 1 << 20

// historyBelowSnapshot fills the history and the market-data ring with
// the outputs of the journal's commands at and below the latest snapshot
// (which the rebuild that follows restores rather than replays),
// recomputed in a scratch state machine: outputs are deterministic. It
// starts from the older kept snapshot when the journal continues right
// after it (the journal keeps that much, journal.Compact), else from the
// empty state when the journal starts at seq 1, else not at all (those
// outputs are TooOld), and replays at most historyRebuildMax commands. It
// runs before the rebuild creates its own state machine, so the ring
// holds the updates in MD-seq order.
func (n *Node) historyBelowSnapshot() error {
	if n.outHist == nil && !n.md.Enabled() {
		return nil
	}
	snap, _, r, err := n.j.OpenLatestSnapshot()
	if err != nil {
		return nil // none (or unreadable: the rebuild reports it)
	}
	r.Close()
	_, last := n.j.Last()
	upto := min(snap, last)
	if upto == 0 || upto < snap {
		return nil
	}
	scratch, base, err := n.belowSnapshotBase(snap)
	if err != nil || scratch == nil || upto-base > historyRebuildMax {
		return err
	}
	em := &historyEmitter{n: n, mdToo: true}
	err = n.j.ReadFrom(base+1, func(_, seq uint64, payload []byte) bool {
		if seq > upto {
			return false
		}
		em.seq = seq
		scratch.Apply(seq, payload, em)
		return true
	})
	if err != nil {
		return fmt.Errorf("node: history from the journal: %w", err)
	}
	return nil
}

// belowSnapshotBase is the state historyBelowSnapshot replays from: the
// newest snapshot below snap that the journal continues from, restored in
// a scratch state machine, or the empty state when the journal starts at
// seq 1; nil when neither.
func (n *Node) belowSnapshotBase(snap uint64) (engine.StateMachine, uint64, error) {
	first := n.j.First()
	seqs, err := journal.SnapshotSeqs(n.cfg.FS, n.cfg.Dir)
	if err != nil {
		return nil, 0, nil
	}
	for _, s := range seqs {
		if s >= snap || first > s+1 {
			continue
		}
		_, sr, err := journal.OpenSnapshotReadOnly(n.cfg.FS, n.cfg.Dir, s)
		if err != nil {
			continue // damaged: an older one, or the empty state
		}
		sm, err := n.cfg.newScratch()
		if err != nil {
			sr.Close()
			return nil, 0, err
		}
		err = sm.Restore(sr)
		sr.Close()
		if err == nil {
			return sm, s, nil
		}
	}
	if first != 1 {
		return nil, 0, nil
	}
	sm, err := n.cfg.newScratch()
	return sm, 0, err
}

// onReplayRequest answers a REPLAY_REQUEST (MAC already verified with the
// client key when one is configured).
func (n *Node) onReplayRequest(f *wire.Frame, from netip.AddrPort, now int64) {
	req, err := wire.DecodeReplayRequest(f)
	if err != nil {
		n.stats.DropUnexpected++
		return
	}
	n.stats.ReplayRequests++
	if n.cfg.Unsafe.NoSessionReplay {
		return // UNSAFE, test-only: replay switched off
	}
	end := wire.ReplayEnd{Origin: n.origin(), Session: req.Session, From: req.From, Next: req.From}
	if n.role != RolePrimary || !n.mayLeadNow(now) || !n.replayAllowed(now) {
		n.stats.ReplayRefused++
		end.Status = wire.ReplayRefused
		n.send(end.Append(n.frameBuf[:0]), from)
		return
	}
	if n.outHist == nil {
		// No history: everything the session had is gone for a replay, so
		// the client skips it rather than waiting for it forever.
		n.stats.ReplayTooOld++
		end.Status = wire.ReplayTooOld
		if q, ok := n.eng.(sessionOutSeqer); ok {
			end.Highest = q.SessionOutSeq(req.Session)
			end.Next = max(req.From, end.Highest+1)
		}
		n.send(end.Append(n.frameBuf[:0]), from)
		return
	}
	// The client may have moved (a restart): its outputs go where it is.
	if !n.noteSession(req.Session, from) {
		n.stats.SessionsFull++
	}
	p := n.outHist.plan(req.Session, req.From, n.prim.Gate().Released(), replayMaxOutputs)
	if q, ok := n.eng.(sessionOutSeqer); ok && p.highest == 0 {
		// Nothing of the session is held: whatever it had left the history.
		if h := q.SessionOutSeq(req.Session); h >= req.From {
			p.tooOld, p.next, p.highest = true, h+1, h
		}
	}
	if p.tooOld {
		n.startRecompute(req.Session, req.From, p, from)
		return
	}
	end.Next, end.Highest = p.next, p.highest
	if p.tooOld {
		n.stats.ReplayTooOld++
		end.Status = wire.ReplayTooOld
	} else {
		n.sendReplay(req.Session, p, from)
	}
	n.send(end.Append(n.frameBuf[:0]), from)
}

// replayAllowed spends one of the request budget's tokens.
func (n *Node) replayAllowed(now int64) bool {
	r := &n.replayRate
	if now-r.windowNs >= replayBudgetNs {
		r.windowNs, r.used = now, 0
	}
	if r.used >= replayBudget {
		return false
	}
	r.used++
	return true
}

// sendReplay packs the planned outputs into OUTPUT frames marked replay:
// each frame's seq is its first output's command seq and holds
// consecutive outputs of the session, as a first release does.
func (n *Node) sendReplay(session uint64, p replayPlan, to netip.AddrPort) {
	h := n.outHist
	c := uint64(len(h.session))
	b := n.replayBatch
	flush := func() {
		if b.Count() == 0 {
			return
		}
		frame := b.Bytes()
		if err := wire.MarkReplay(frame); err == nil {
			n.send(frame, to)
		}
	}
	for e := p.first; e < p.end; e++ {
		i := e % c
		if h.session[i] != session {
			continue
		}
		pl := h.payload[i][:h.size[i]]
		if b.Count() == 0 || !b.Fits(len(pl)) {
			flush()
			b.Reset(wire.TypeOutput, n.origin(), h.seq[i])
		}
		b.Add(pl)
		n.stats.ReplayServed++
	}
	flush()
	b.Reset(wire.TypeOutput, n.origin(), 1)
}
