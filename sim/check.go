package sim

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/nodeconfig"
)

// The checker observes the cluster from outside wherever it can: the
// commands every replica applies (through a wrapper around its state
// machine), the outputs clients and the market-data observer receive, the
// witness's grants, and the nodes' Observer callbacks for releases.
//
// History identity. Every applied command extends a chain value,
// chain(seq) = mix(chain(seq-1), seq, command). Equal chain values at a
// seq mean equal histories up to it, so comparing one 64-bit value proves
// a whole prefix identical. The checker keeps every chain value it ever
// saw with its predecessor and command, so any node's history can be read
// back, even one restored from a snapshot (whose chain is found through
// the state hash the snapshot restores: the engine's hash depends only on
// the state, and every state at a seq was produced by some apply).

// chainLink is one applied command in the global history graph.
type chainLink struct {
	seq  uint64
	prev uint64
	cmd  []byte
}

func chainNext(prev, seq uint64, cmd []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range cmd {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return mix64(mix64(prev^seq) + h)
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// chainUnknown marks a history the checker could not identify.
const chainUnknown uint64 = math.MaxUint64

// trackedSM wraps one state machine instance of one node. A node builds a
// fresh one at start-up and on every rebuild; the latest is current.
type trackedSM struct {
	c      *checker
	node   int
	inner  engine.StateMachine
	base   uint64   // seq the instance started from (0, or a restored snapshot)
	chains []uint64 // chains[i] is the chain at base+1+i
	head   uint64   // chain at AppliedSeq
}

var (
	_ engine.StateMachine = (*trackedSM)(nil)
	_ engine.Deduper      = (*trackedSM)(nil)
)

// Answer forwards to the engine's Deduper, so a simulated primary answers
// resends from the dedup table as a real one does.
func (t *trackedSM) Answer(cmd []byte, out engine.Emitter) bool {
	d, ok := t.inner.(engine.Deduper)
	return ok && d.Answer(cmd, out)
}

func (t *trackedSM) Apply(seq uint64, cmd []byte, out engine.Emitter) {
	c := t.c
	if want := t.inner.AppliedSeq() + 1; seq != want {
		c.taint = DiagAppliedGap
		c.violate(3, "%s: node %d applied seq %d after %d: a gap or a duplicate in its applied log", DiagAppliedGap, t.node, seq, t.inner.AppliedSeq())
		// Track what follows as a history of unknown origin.
		t.base, t.chains, t.head = seq-1, t.chains[:0], chainUnknown
	}
	if c.curFrameOld && c.curNode == t.node {
		c.violate(5, "node %d applied seq %d from a DATA frame of epoch %d after accepting epoch %d", t.node, seq, c.curFrameEpoch, c.accepted[t.node])
	}
	t.inner.Apply(seq, cmd, out)
	prev := t.head
	next := chainUnknown
	if prev != chainUnknown {
		next = chainNext(prev, seq, cmd)
		if _, ok := c.links[next]; !ok {
			c.links[next] = chainLink{seq: seq, prev: prev, cmd: append([]byte(nil), cmd...)}
		}
		c.noteState(t.node, seq, next, t.inner.StateHash())
	}
	t.head = next
	t.chains = append(t.chains, next)
}

func (t *trackedSM) Snapshot(w io.Writer) error { return t.inner.Snapshot(w) }

func (t *trackedSM) Restore(r io.Reader) error {
	if err := t.inner.Restore(r); err != nil {
		return err
	}
	seq := t.inner.AppliedSeq()
	t.base, t.chains = seq, t.chains[:0]
	t.head = t.c.chainForState(seq, t.inner.StateHash())
	if t.head == chainUnknown {
		t.c.unknownRestores++
	}
	return nil
}

// SessionOutSeq forwards the engine's, which a primary reads to answer a
// replay request for a session its history no longer holds.
func (t *trackedSM) SessionOutSeq(session uint64) uint64 {
	q, ok := t.inner.(interface{ SessionOutSeq(uint64) uint64 })
	if !ok {
		return 0
	}
	return q.SessionOutSeq(session)
}

func (t *trackedSM) StateHash() uint64  { return t.inner.StateHash() }
func (t *trackedSM) AppliedSeq() uint64 { return t.inner.AppliedSeq() }

// chainAt is the node's chain at seq (chainUnknown when seq is above what
// it applied or its history is unknown).
func (t *trackedSM) chainAt(seq uint64) uint64 {
	applied := t.inner.AppliedSeq()
	if seq > applied {
		return chainUnknown
	}
	if seq > t.base {
		return t.chains[seq-t.base-1]
	}
	h := t.head
	if len(t.chains) > 0 {
		h = t.c.baseChain(t)
	}
	return t.c.walkBack(h, t.base, seq)
}

type stateKey struct{ seq, hash uint64 }

// checker holds every invariant's bookkeeping for one run.
type checker struct {
	s     *sim
	links map[uint64]chainLink
	// stateOf: chain -> state hash; chainOf: (seq, state hash) -> chain.
	stateOf map[uint64]uint64
	chainOf map[stateKey]uint64

	cur []*trackedSM // current state machine per node (index = node id)

	// The canonical released history, replayed into a reference engine.
	ref        *engine.Engine
	refApplied uint64
	canon      []uint64 // canon[s-1]: chain at s
	canonCmd   [][]byte
	outputs    map[string]int // session|payload -> released count
	mdBySeq    map[uint64]string
	// publishedMD: every MD seq some node sent to the market-data group,
	// before the network's loss (mdcheck.go).
	publishedMD map[uint64]bool
	// mdPastRing sums the nodes' md.RepublishMissed (mdcheck.go).
	mdPastRing uint64
	results    map[[2]uint64]string // (session, id) -> first result payload

	lastReleaseEpoch uint64
	accepted         []uint64 // per node: highest epoch seen applied or released
	// epochAt: seq -> the epoch of the record last applied at it (only
	// under a scenario's crashAfterInstallNs: installRecord.epochBelow).
	epochAt   map[uint64]uint64
	replaying []bool

	// The witness's grants as issued: (holder, epoch) -> expiry (witness
	// time = simulated time).
	grants        map[[2]uint64]int64
	grantOrder    [][2]uint64 // keys of grants in the order first issued
	witnessSet    []uint32
	witnessVer    uint64
	acks          map[[3]uint64]uint64 // (to, from, epoch) -> highest ack delivered
	curNode       int
	curFrameOld   bool
	curFrameEpoch uint64

	received   []string // session|payload of every output clients received
	receivedMD []string
	// Session histories (invariant 9): per session, the payloads of its
	// numbered outputs in the released history (index OutSeq-1), and those
	// its client delivered, in order (a duplicate answer as its original).
	history   map[uint64][]string
	delivered map[uint64][]string
	// historySeq: per session, the seq of the command that emitted each
	// output of history (checkTooOld).
	historySeq map[uint64][]uint64

	leaders map[uint64][2]uint64 // epoch -> (node, incarnation) that led it
	// taint is the diagnosis of a known open bug seen in this run; later
	// violations are marked as following from it.
	taint string

	divergence      bool // noteState found two states for one history
	unknownRestores int
	violations      []string
	releases        uint64
}

func newChecker(s *sim) *checker {
	ref, err := engine.New(engineConfig())
	if err != nil {
		panic(err)
	}
	n := s.numNodes + 1
	c := &checker{
		s: s, links: map[uint64]chainLink{}, stateOf: map[uint64]uint64{}, chainOf: map[stateKey]uint64{},
		cur: make([]*trackedSM, n), ref: ref, outputs: map[string]int{}, mdBySeq: map[uint64]string{}, publishedMD: map[uint64]bool{},
		results: map[[2]uint64]string{}, accepted: make([]uint64, n), replaying: make([]bool, n),
		grants: map[[2]uint64]int64{}, acks: map[[3]uint64]uint64{}, leaders: map[uint64][2]uint64{},
		history: map[uint64][]string{}, delivered: map[uint64][]string{}, historySeq: map[uint64][]uint64{},
	}
	if sc := s.opts.scenario; sc != nil && sc.crashAfterInstallNs != 0 {
		c.epochAt = map[uint64]uint64{}
	}
	return c
}

func engineConfig() engine.Config {
	return engine.Config{MaxInstruments: 4, MaxOrders: 4096, MaxSessions: 16, DedupWindow: 64, MaxOrderQty: 1 << 20}
}

// newStateMachine is the NewStateMachine of node id.
func (c *checker) newStateMachine(id int) func() (engine.StateMachine, error) {
	return func() (engine.StateMachine, error) {
		e, err := engine.New(engineConfig())
		if err != nil {
			return nil, err
		}
		t := &trackedSM{c: c, node: id, inner: e}
		c.cur[id] = t
		return t, nil
	}
}

// newScratchStateMachine is every node's NewScratchStateMachine: an
// engine the checker does not watch (a recompute for session replay is
// not the node's state).
func newScratchStateMachine() (engine.StateMachine, error) {
	return engine.New(engineConfig())
}

const maxViolations = 8

func (c *checker) violate(inv int, format string, args ...any) {
	msg := fmt.Sprintf("invariant %d at %s: %s", inv, fmtNs(c.s.now), fmt.Sprintf(format, args...))
	if c.taint != "" && !strings.Contains(msg, c.taint) {
		// Downstream of a recognised open bug: attributed to it.
		msg += " [after " + c.taint + "]"
	}
	c.s.logf("VIOLATION %s", msg)
	if len(c.violations) < maxViolations {
		c.violations = append(c.violations, msg)
	}
}

func (c *checker) noteState(node int, seq, chain, state uint64) {
	if prev, ok := c.stateOf[chain]; ok {
		if prev != state {
			c.divergence = true
			c.violate(3, "node %d has state hash %x at seq %d where another replica with the same history had %x", node, state, seq, prev)
		}
		return
	}
	c.stateOf[chain] = state
	if _, ok := c.chainOf[stateKey{seq, state}]; !ok {
		c.chainOf[stateKey{seq, state}] = chain
	}
}

func (c *checker) chainForState(seq, state uint64) uint64 {
	if seq == 0 {
		return 0
	}
	if ch, ok := c.chainOf[stateKey{seq, state}]; ok {
		return ch
	}
	return chainUnknown
}

// baseChain is the chain at t.base: the predecessor of its first apply.
func (c *checker) baseChain(t *trackedSM) uint64 {
	first := t.chains[0]
	if first == chainUnknown {
		return chainUnknown
	}
	return c.links[first].prev
}

// walkBack follows predecessors from chain h at seq from down to seq to.
func (c *checker) walkBack(h, from, to uint64) uint64 {
	for s := from; s > to; s-- {
		if h == chainUnknown {
			return h
		}
		l, ok := c.links[h]
		if !ok {
			return chainUnknown
		}
		h = l.prev
	}
	return h
}

// --- nodeconfig.Observer ---------------------------------------------------

type observer struct{ c *checker }

var _ nodeconfig.Observer = observer{}

func (o observer) Applied(id uint32, epoch, seq uint64, cmd []byte) {
	c := o.c
	if !c.replaying[id] {
		c.accepted[id] = max(c.accepted[id], epoch)
		if c.epochAt != nil {
			c.epochAt[seq] = epoch
		}
	}
}

func (o observer) Rebuilt(id uint32, fromSnapshot uint64) { o.c.replaying[id] = true }

func (o observer) Installed(id uint32, seq uint64) { o.c.s.installed(int(id), seq) }

func (o observer) Released(r nodeconfig.ReleaseEvent) {
	o.c.s.nodes[r.Node].observed = true
	o.c.onRelease(r)
}

// stepDone is called after every call into a node returns.
func (c *checker) stepDone(id int) { c.replaying[id] = false }

func (c *checker) onRelease(r nodeconfig.ReleaseEvent) {
	c.releases++
	id := int(r.Node)
	s := c.s
	s.logf("node %d RELEASED %d epoch %d (applied %d durable %d required-ack %d ok=%v lease=%v)",
		id, r.Released, r.Epoch, r.Applied, r.Durable, r.RequiredAck, r.RequiredOK, r.LeaseHeld)
	// 4: the gate's inputs, as the node reports them.
	if !c.s.opts.externalOnly && (r.Released > r.Applied || r.Released > r.Durable || !r.RequiredOK || r.Released > r.RequiredAck || !r.LeaseHeld) {
		c.violate(4, "node %d released %d with applied %d durable %d required ack %d (ok %v) lease %v",
			id, r.Released, r.Applied, r.Durable, r.RequiredAck, r.RequiredOK, r.LeaseHeld)
	}
	// 4, from outside: every standby the witness lists as in sync must
	// have acknowledged what is released (acks as delivered).
	for _, m := range c.witnessSet {
		if int(m) == id {
			continue
		}
		if got := c.acks[[3]uint64{uint64(id), uint64(m), r.Epoch}]; got < r.Released {
			c.violate(4, "node %d released %d at epoch %d but in-sync standby %d had acknowledged only %d", id, r.Released, r.Epoch, m, got)
			break
		}
	}
	// Lease safety: a release happens inside a live grant of the witness
	// to this node and epoch (witness time is simulated time).
	if exp, ok := c.grants[[2]uint64{uint64(id), r.Epoch}]; !ok || s.now >= exp {
		c.violate(2, "node %d released at epoch %d outside the witness's grant (granted %v, expired at %s)", id, r.Epoch, ok, fmtNs(exp))
	}
	// 2: epochs of releases never decrease; 5: not below what the node accepted.
	if r.Epoch < c.lastReleaseEpoch {
		c.violate(2, "node %d released at epoch %d after epoch %d had released", id, r.Epoch, c.lastReleaseEpoch)
	}
	c.lastReleaseEpoch = max(c.lastReleaseEpoch, r.Epoch)
	if r.Epoch < c.accepted[id] {
		c.violate(5, "node %d released for epoch %d after accepting epoch %d", id, r.Epoch, c.accepted[id])
	}
	c.accepted[id] = max(c.accepted[id], r.Epoch)
	t := c.cur[id]
	if t == nil {
		return
	}
	// 2 and 1: what is released agrees with everything released before,
	// then extends the canonical history.
	upto := min(r.Released, c.refApplied)
	if upto > 0 {
		if got := t.chainAt(upto); got != c.canon[upto-1] {
			c.violate(2, "node %d released up to %d but its history differs from the released history at seq %d", id, r.Released, upto)
			return
		}
	}
	for seq := c.refApplied + 1; seq <= r.Released; seq++ {
		ch := t.chainAt(seq)
		l, ok := c.links[ch]
		if ch == chainUnknown || !ok {
			c.violate(2, "node %d released seq %d whose command the checker cannot identify", id, seq)
			return
		}
		c.extendCanon(seq, ch, l.cmd)
	}
}

// extendCanon applies one released command to the reference engine and
// records its outputs as released.
func (c *checker) extendCanon(seq, chain uint64, cmd []byte) {
	c.canon = append(c.canon, chain)
	c.canonCmd = append(c.canonCmd, cmd)
	c.refApplied = seq
	c.ref.Apply(seq, cmd, refEmitter{c})
}

type refEmitter struct{ c *checker }

func (e refEmitter) Emit(to uint64, payload []byte) {
	c := e.c
	if to == engine.MarketData {
		o, err := engine.ParseOutput(payload)
		if err == nil {
			c.mdBySeq[o.MDSeq] = string(payload)
		}
		return
	}
	c.outputs[outKey(to, payload)]++
	if _, ok := engine.SessionOutSeq(payload); ok {
		c.history[to] = append(c.history[to], string(payload))
		c.historySeq[to] = append(c.historySeq[to], c.refApplied)
	}
}

func outKey(session uint64, payload []byte) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], session)
	return string(b[:]) + string(payload)
}

// onPromoted checks invariant 1 when a node becomes primary: its history
// holds everything ever released, identical.
func (c *checker) onPromoted(id int, epoch uint64, incarnation uint64) {
	t := c.cur[id]
	c.s.logf("node %d is PRIMARY at epoch %d (applied %d, released so far %d)", id, epoch, t.AppliedSeq(), c.refApplied)
	// One primary per epoch: the log-matching rule (equal epoch at a seq
	// means equal history) rests on it. A restarted process is a new
	// primary even under the same node id: it may have lost what its
	// previous incarnation sequenced.
	me := [2]uint64{uint64(id), incarnation}
	if prev, ok := c.leaders[epoch]; ok && prev != me {
		c.taint = DiagEpochReused
		c.violate(2, "%s: epoch %d is led a second time, by node %d (start %d) after node %d (start %d): two histories under one epoch",
			DiagEpochReused, epoch, id, incarnation, prev[0], prev[1])
	} else if !ok {
		c.leaders[epoch] = me
	}
	if c.refApplied == 0 {
		return
	}
	if t.AppliedSeq() < c.refApplied {
		c.taint = DiagPromotedBehind
		c.violate(1, "%s: node %d leads epoch %d with applied %d below the released %d", DiagPromotedBehind, id, epoch, t.AppliedSeq(), c.refApplied)
		return
	}
	if t.chainAt(c.refApplied) != c.canon[c.refApplied-1] {
		c.violate(1, "node %d leads epoch %d with a history that differs from the released one at or below %d", id, epoch, c.refApplied)
	}
}

// onStepDown checks that a node never steps down in favour of an epoch
// it was granted itself and its own keeper holds (issue 15 item 3): that
// is a new term of the same process, and stepping down for it drops the
// outputs waiting to be released for nothing.
func (c *checker) onStepDown(id int, from, to, keeperEpoch uint64) {
	c.s.logf("node %d STEPPED DOWN from epoch %d for epoch %d (its keeper holds %d)", id, from, to, keeperEpoch)
	if _, granted := c.grants[[2]uint64{uint64(id), to}]; granted && keeperEpoch >= to {
		c.violate(2, "%s: node %d stepped down from epoch %d for epoch %d, which the witness granted to it and its keeper holds",
			DiagOwnStepDown, id, from, to)
	}
}

// onClientOutput checks one output a client delivered to its application.
func (c *checker) onClientOutput(session uint64, payload []byte) {
	c.received = append(c.received, outKey(session, payload))
	o, err := engine.ParseOutput(payload)
	if err != nil {
		c.violate(1, "client %d received an output that does not parse: %v", session, err)
		return
	}
	if o.OutSeq != 0 {
		// 8: a gap-free prefix at every moment: the next output, once.
		orig := payload
		if o.Kind == engine.KindDuplicate {
			orig = payload[1:]
		}
		d := c.delivered[session]
		if o.OutSeq != uint64(len(d))+1 {
			c.violate(9, "%sclient %d delivered its output %d after %d: not a gap-free prefix of its session's history", c.sessionDiag(session), session, o.OutSeq, len(d))
		}
		c.delivered[session] = append(d, string(orig))
	}
	res := payload
	switch o.Kind {
	case engine.KindDuplicate:
		res = payload[1:]
	case engine.KindAck, engine.KindReject:
	case engine.KindCancelled:
		if o.Reason != engine.ReasonCancelRequested {
			return
		}
	default:
		return
	}
	k := [2]uint64{session, o.ClientOrderID}
	if prev, ok := c.results[k]; !ok {
		c.results[k] = string(res)
	} else if prev != string(res) {
		c.violate(6, "session %d client order %d answered twice with different results: applied more than once", session, o.ClientOrderID)
	}
}

// onMarketData checks one market-data output the observer received.
func (c *checker) onMarketData(payload []byte) {
	o, err := engine.ParseOutput(payload)
	if err != nil || o.Kind != engine.KindMarketData {
		c.violate(1, "market data that does not parse: %x", payload)
		return
	}
	c.receivedMD = append(c.receivedMD, string(payload))
}

// checkReceived runs at the end of a live run, when the released history
// is the whole history: every output a client or the market-data observer
// received is in it, identical (invariant 1 from the receivers' side).
func (c *checker) checkReceived() {
	for _, k := range c.received {
		if c.outputs[k] == 0 && !c.answeredFromTable(k) {
			c.violate(1, "client %d received an output that is not in the released history: %x",
				binary.LittleEndian.Uint64([]byte(k[:8])), k[8:])
			return
		}
	}
	for _, p := range c.receivedMD {
		o, _ := engine.ParseOutput([]byte(p))
		if want, ok := c.mdBySeq[o.MDSeq]; !ok || want != p {
			c.violate(1, "market data %d differs from the released history (known %v)", o.MDSeq, ok)
			return
		}
	}
}

// checkSessions is invariant 9 at the end of a live run: every session's
// delivered outputs are its outputs in the final history, in order, each
// once, all of them (the released history is then the whole history).
func (c *checker) checkSessions(sessions []uint64) {
	for _, s := range sessions {
		d, h := c.delivered[s], c.history[s]
		for i := range d {
			if i >= len(h) || d[i] != h[i] {
				c.violate(9, "%sclient %d delivered as its output %d something else than the final history's (history holds %d)", c.sessionDiag(s), s, i+1, len(h))
				return
			}
		}
		if len(d) < len(h) {
			c.violate(9, "%sclient %d delivered %d of its session's %d outputs in the final history: %d missing from output %d on",
				c.sessionDiag(s), s, len(d), len(h), len(h)-len(d), len(d)+1)
			return
		}
	}
}

// sessionDiag names the known bound behind a session violation: the
// client was told TooOld and skipped what the history no longer held.
func (c *checker) sessionDiag(session uint64) string {
	for _, cl := range c.s.clients {
		if cl.session == session && cl.core.SessionStats().TooOld > 0 {
			if c.taint == "" {
				c.taint = DiagSessionTooOld
			}
			return DiagSessionTooOld + ": "
		}
	}
	return ""
}

// caughtUp reports whether every session delivered its whole history.
func (c *checker) caughtUp(sessions []uint64) bool {
	for _, s := range sessions {
		if len(c.delivered[s]) < len(c.history[s]) {
			return false
		}
	}
	return true
}

// answeredFromTable reports whether a client output that no released
// command emitted is an answer a primary gave from its dedup table without
// sequencing the command (engine.Deduper): a Duplicate whose original
// result is in the released history, or a reject that the released
// history's dedup table gives by itself (too old, table full, id 0; the
// table only moves towards these answers, so the final one still gives
// them).
func (c *checker) answeredFromTable(k string) bool {
	session := binary.LittleEndian.Uint64([]byte(k[:8]))
	payload := []byte(k[8:])
	o, err := engine.ParseOutput(payload)
	if err != nil {
		return false
	}
	if o.Kind == engine.KindDuplicate {
		return c.outputs[outKey(session, payload[1:])] > 0
	}
	if o.Kind != engine.KindReject {
		return false
	}
	var got answerRecorder
	if !c.ref.Answer(engine.AppendCommand(nil, session, o.ClientOrderID, nil), &got) {
		return false
	}
	return len(got.outs) == 1 && got.outs[0] == k
}

type answerRecorder struct{ outs []string }

func (r *answerRecorder) Emit(to uint64, payload []byte) {
	r.outs = append(r.outs, outKey(to, payload))
}

// onLeaseGivenUp records that the witness took node's release of epoch: that
// lease ended now, so a grant to another node after it is no split
// brain (the holder stopped leading before it asked: arbiter.Keeper's
// Release; what it released before is checked as any output is).
//
// The witness holds one lease: a holder's new term replaced its older
// one there, so every grant of node up to epoch ends with it.
func (c *checker) onLeaseGivenUp(node uint32, epoch uint64) {
	for k, exp := range c.grants {
		if k[0] == uint64(node) && k[1] <= epoch {
			c.grants[k] = min(exp, c.s.now)
		}
	}
}

// onWitnessReply records what the witness decided: grants (holder, epoch,
// expiry on the witness's clock) and the in-sync set in force. A grant to
// a new holder while another holder's grant is live is a split brain at
// the source.
func (c *checker) onWitnessReply(requester uint32, r *arbiter.Reply) {
	if r.InSyncVersion >= c.witnessVer && r.Kind != arbiter.ReplyInfo {
		c.witnessVer = r.InSyncVersion
		c.witnessSet = c.witnessSet[:0]
		for _, m := range r.Members.Slice() {
			c.witnessSet = append(c.witnessSet, uint32(m))
		}
	}
	if !r.Granted() {
		return
	}
	k := [2]uint64{uint64(requester), r.Epoch}
	exp := c.s.now + r.DurationNs
	if _, ok := c.grants[k]; !ok {
		for _, o := range c.grantOrder {
			if o[0] != k[0] && c.grants[o] > c.s.now {
				c.violate(2, "the witness granted epoch %d to node %d while node %d's lease of epoch %d is live until %s",
					r.Epoch, requester, o[0], o[1], fmtNs(c.grants[o]))
			}
		}
		c.grantOrder = append(c.grantOrder, k)
	}
	c.grants[k] = max(c.grants[k], exp)
}
