package replica

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/gating"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// OutputReserve is the room kept free in the publisher before a command is
// accepted: one command's outputs (an order that sweeps many levels emits
// an execution per fill) must never find the gate full after the command
// was applied, because an applied command's outputs cannot be dropped.
const OutputReserve = 4096

// MaxOutputBytes is the largest engine output the gate holds (the session
// history keeps outputs up to the same size: session.MaxOutputBytes, which
// the runtime checks is equal); a larger one is dropped and counted.
const MaxOutputBytes = 128

// ErrOutputTooLarge is LeaderReady.Lost's reason for an engine output
// larger than MaxOutputBytes (a configuration error).
var ErrOutputTooLarge = errors.New("replica: engine output larger than the gate's slot; dropped")

// OutSlot is one output waiting in the gate: a value type, so the
// publisher's preallocated ring holds it without allocating.
type OutSlot struct {
	// To is the session the output goes to (engine.MarketData: the
	// market-data group).
	To uint64
	n  uint16
	b  [MaxOutputBytes]byte
}

// Payload is the output's bytes (the slot's; valid while the slot is).
func (s *OutSlot) Payload() []byte { return s.b[:s.n] }

// OutputRecorder keeps the outputs a primary applies (the session
// history, session.Replay): kept across roles, so the runtime owns it and
// the Leader takes it as this one method.
type OutputRecorder interface {
	Record(seq, to uint64, payload []byte)
}

// MarketDataRing keeps the market-data updates (the mdfeed ring, kept
// across roles and published from as released moves): Add reports whether
// it kept the update (false without a ring: the update goes through the
// gate like any output), Full whether the updates not yet released leave
// no room for one more command's.
type MarketDataRing interface {
	Add(cmd uint64, payload []byte) bool
	Full() bool
}

// LeaderConfig configures a Leader for one term.
type LeaderConfig struct {
	// Sequencer is the sequencer's configuration; Epoch the term's and
	// Applied the last seq applied before it (the sequencer continues at
	// Applied+1).
	Sequencer sequencer.Config
	Epoch     uint64
	Applied   uint64
	// PublisherCapacity: how many outputs may wait in the gate (the
	// publisher holds OutputReserve more).
	PublisherCapacity int
	// HashEvery: a HASH frame after every seq that is a multiple of it;
	// SnapshotEvery: a snapshot to cut likewise (both > 0).
	HashEvery, SnapshotEvery uint64
	// JournalBroken: the runtime's journal failed before this term: no
	// command is accepted (NotLeading).
	JournalBroken bool
	// DatagramLen bounds the release's OUTPUT frames (ReleaseFramer);
	// MarketData says there is a market-data group to send the market
	// data outputs to (without one they are dropped at release).
	DatagramLen int
	MarketData  bool
	// Track is the runtime's ReleaseTrack, kept across terms (nil: a
	// track of this term's own that measures no latency).
	Track *ReleaseTrack
	// Memory is the term's large memory, made ahead (NewLeaderMemory) or
	// left by an earlier term (Leader.Memory); the Leader owns it from
	// now on. Nil, or made for another configuration: NewLeader
	// allocates it, on the promotion's path.
	Memory *LeaderMemory
}

// LeaderMemory is a term's large memory: the gate's publisher
// (PublisherCapacity+OutputReserve outputs of MaxOutputBytes, 9.4 MB at
// the defaults) and the sequencer's buffers (its 6 MB retransmit ring).
// Allocated and zeroed at a promotion it cost 1.5–9 ms on a 2-vCPU VM,
// between the grant and the first command the new primary sequences; a
// runtime makes it ahead instead and hands it from term to term.
type LeaderMemory struct {
	pub *gating.Publisher[OutSlot]
	seq *sequencer.Buffers
}

// NewLeaderMemory makes the memory a term of cfg needs, every page of it
// written once.
func NewLeaderMemory(cfg LeaderConfig) (*LeaderMemory, error) {
	pub, err := gating.NewPublisher[OutSlot](cfg.PublisherCapacity + OutputReserve)
	if err != nil {
		return nil, err
	}
	pub.Prefault()
	return &LeaderMemory{pub: pub, seq: sequencer.NewBuffers(cfg.Sequencer)}, nil
}

// Memory is the term's memory, for the next term's LeaderConfig.Memory:
// the Leader must not be used after. Outputs still queued are forgotten.
func (l *Leader[A]) Memory() *LeaderMemory {
	return &LeaderMemory{pub: l.pub, seq: l.seqr.Buffers()}
}

// LeaderCounts are what the Leader counted since the last Advance, for
// the runtime to add to its counters (the runtime's are kept across
// terms; a Leader lives one term).
type LeaderCounts struct {
	Commands          uint64 // sequenced, journaled and applied
	BadCommands       uint64 // no parsable header, or too large to sequence
	NotLeading        uint64 // refused: the lease does not hold or the journal failed
	SessionsFull      uint64 // refused: a new session and the table is full
	Backpressure      uint64 // refused: the gate or the market-data ring has no room
	AnsweredFromTable uint64 // answered by the dedup table, not sequenced
	OutputsLost       uint64 // outputs dropped (too large, or the gate full after apply)
	OutputsReleased   uint64 // outputs the release took from the gate
}

// any reports whether a count is not zero. HasReady asks it twice a
// command: comparing the struct with its zero value was a call to
// runtime.memequal each time, 3.5 % of a flat-out primary's samples.
// TestLeaderCountsAny checks it sees every field.
func (c *LeaderCounts) any() bool {
	return c.Commands|c.BadCommands|c.NotLeading|c.SessionsFull|c.Backpressure|
		c.AnsweredFromTable|c.OutputsLost|c.OutputsReleased != 0
}

// LeaderReady is what a Leader asks the runtime to do, in the order of
// its fields. It is the Leader's own memory (Ready returns its address,
// and Advance clears it): copy out anything needed later before calling
// Advance. Take it after every input (Next, Apply, EndBatch, Tick, Nak,
// Announce, Heartbeat, a release's last NextFrame) and before the next:
// its Frames must leave before what the next input asks.
type LeaderReady struct {
	// Frames are the sequencer's outbox (DATA, HEARTBEAT, HASH, NEW_EPOCH,
	// RETRANSMIT, NEED_SNAPSHOT), to send in this order: to the group or
	// to the standby named. They go before the Entry that Next returned
	// is appended (the journal's write follows the DATA frames), and
	// their bytes are valid until Advance.
	Frames []sequencer.Out
	// Counts: add them to the runtime's counters.
	Counts LeaderCounts
	// Lost, when not nil, is why the last output counted in OutputsLost
	// was dropped: log it.
	Lost error
	// FirstRelease, when not 0, after the Counts: the release just
	// finished (its last NextFrame) was the first since this term's
	// promotion (Promoted) to send a frame, up to FirstRelease,
	// SincePromotionNs after the promotion: log it. Once per term.
	FirstRelease     uint64
	SincePromotionNs int64
	// Snapshot, when not 0, last: cut a snapshot of the state at this seq
	// (just applied), after the Frames and what the pass queued before
	// them left (the encoding must not hold back the frames sealed so
	// far).
	Snapshot uint64
}

// Entry is a command Next sequenced: append it to the journal at Seq,
// then Apply it. Cmd is the frame's (valid while the frame is).
type Entry struct {
	Seq uint64
	Cmd []byte
}

// Leader is the leading side's command path as one pure core: it
// composes the sequencer, the primary's gate and lease decisions
// (Primary), the gate's publisher and the state machine, holds the
// bounded session table, and implements the engine's Emitter itself
// (outputs are queued in the publisher under the seq applied; session
// history and market data go to the OutputRecorder and the
// MarketDataRing: pure cores too, but taken as narrow interfaces and not
// composed, because they outlive a term and a standby fills them as it
// applies, so the runtime owns them across roles). The
// runtime feeds it what arrives and carries out its LeaderReady; it never
// calls back into the runtime.
//
// The command path, per COMMAND frame:
//
//  1. Commands(frame, from, nowNs).
//  2. Next: it admits the frame's commands in order (a bad header, the
//     lease, the session table, back-pressure: each refusal counted; a
//     command the dedup table answers has its answer queued in the gate
//     under the applied seq and is not sequenced) until one is
//     sequenced, and returns it as an Entry (false: the frame is done).
//  3. Carry out the Ready (the Frames that Submit sealed), then append
//     the Entry to the journal. If the append fails, call JournalFailed
//     and stop: the entry is never applied, and nothing more of the frame
//     is taken.
//  4. Apply(entry), then carry out the Ready (a HASH due, a snapshot
//     due), and go back to 2.
//
// Why the journal is the runtime's and not a records-in-Ready field: the
// rule is sequence, send what was sealed, append, then apply, and an
// append that fails stops the path before the apply. Handing out one
// Entry at a time keeps that order exactly, and the Leader never holds
// the journal; the sequencer alone reads it (sequencer.History) to
// retransmit records its ring no longer holds.
//
// The other inputs: EndBatch and Tick (the batch's frames sealed; a
// heartbeat when idle), Ack, Nak, Durable, Announce, SetReleased and
// Heartbeat, SnapshotWritten, Promoted. The release: Release(nowNs, in)
// returns a ReleaseReady (the in-sync news, the observer's event), then
// NextFrame until it says no more (each finished OUTPUT frame sent
// before the next call), then the Ready (the outputs counted, the first
// release after a promotion).
type Leader[A comparable] struct {
	cfg      LeaderConfig
	seqr     *sequencer.Sequencer
	prim     *Primary
	pub      *gating.Publisher[OutSlot]
	sessions *Sessions[A]
	sm       engine.StateMachine
	dedup    engine.Deduper // sm's, or nil
	rec      OutputRecorder
	md       MarketDataRing
	emitter  leaderEmitter[A]
	applySeq uint64 // the seq whose outputs the emitter queues
	broken   bool   // the journal failed: never accept again

	// the frame Next takes commands from
	msgs  wire.Messages
	from  A
	nowNs int64

	// the release under way (Release, NextFrame)
	framer       *ReleaseFramer
	releaseTo    uint64
	releasing    bool
	flushed      []Frame
	frame        Frame // the frame the framer finished (filled in place)
	releaseNowNs int64
	releaseSent  bool // the release under way handed out a frame

	track       *ReleaseTrack
	latencyLast uint64 // the last seq whose latency was recorded (or applied before the term)
	promoted    bool   // the term began with a promotion (Promoted), at promotedNs
	promotedNs  int64
	firstDone   bool // the first release after the promotion was reported

	// rd is the Ready being gathered: the counts, a lost output, the
	// first release and a snapshot due are written into it in place and
	// Ready hands out its address. A Ready returned by value was built
	// with 8-byte stores and copied with 16-byte loads, which the CPU
	// cannot forward: 9 % of a flat-out primary's agent samples sat on
	// two such loads in node's leaderReady.
	rd LeaderReady
}

// NewLeader starts a term: a sequencer continuing at cfg.Applied+1 that
// reads hist for old retransmits, the primary prim (the Leader owns it
// from now on), an empty publisher, and the state machine sm with its
// dedup table when it has one. sessions, rec and md are the runtime's,
// kept across terms.
func NewLeader[A comparable](cfg LeaderConfig, prim *Primary, sm engine.StateMachine, hist sequencer.History, sessions *Sessions[A], rec OutputRecorder, md MarketDataRing) (*Leader[A], error) {
	if cfg.HashEvery == 0 || cfg.SnapshotEvery == 0 {
		return nil, fmt.Errorf("replica: leader: HashEvery %d and SnapshotEvery %d must be > 0", cfg.HashEvery, cfg.SnapshotEvery)
	}
	mem := cfg.Memory
	cfg.Memory = nil // owned by the Leader, not kept in its configuration
	if mem == nil || mem.pub.Cap() != cfg.PublisherCapacity+OutputReserve {
		pub, err := gating.NewPublisher[OutSlot](cfg.PublisherCapacity + OutputReserve)
		if err != nil {
			return nil, err
		}
		mem = &LeaderMemory{pub: pub, seq: mem.seqBuffers()}
	}
	mem.pub.Reset()
	pub := mem.pub
	l := &Leader[A]{
		cfg: cfg, seqr: sequencer.NewWith(cfg.Sequencer, cfg.Epoch, cfg.Applied, hist, mem.seq),
		prim: prim, pub: pub, sessions: sessions, sm: sm, rec: rec, md: md,
		broken: cfg.JournalBroken, framer: NewReleaseFramer(cmp.Or(cfg.DatagramLen, wire.DefaultDatagramLen)),
		track: cfg.Track, latencyLast: cfg.Applied,
	}
	if l.track == nil {
		l.track = &ReleaseTrack{}
	}
	l.framer.SetEpochStart(cfg.Applied + 1) // what was applied before is an earlier term's
	l.dedup, _ = sm.(engine.Deduper)
	l.emitter.l = l
	return l, nil
}

// Primary is the gate, the in-sync set's upkeep and the lease decisions
// of this term.
func (l *Leader[A]) Primary() *Primary { return l.prim }

// Sequencer is the term's sequencer, for status (read it; feed it only
// through the Leader).
func (l *Leader[A]) Sequencer() *sequencer.Sequencer { return l.seqr }

// Epoch is the term's epoch.
func (l *Leader[A]) Epoch() uint64 { return l.cfg.Epoch }

// MayLead is the pure query before a command is accepted: the journal
// works and the lease holds at nowNs. It changes nothing.
func (l *Leader[A]) MayLead(nowNs int64) bool { return !l.broken && l.prim.MayRelease(nowNs) }

// Commands takes a COMMAND frame from a client at from; its commands come
// out of Next. fr's payload must stay valid until Next reports no more.
func (l *Leader[A]) Commands(fr *wire.Frame, from A, nowNs int64) {
	l.msgs, l.from, l.nowNs = fr.Messages(), from, nowNs
}

// Next admits the frame's commands in order until one is sequenced and
// returns it (false: the frame is done, or JournalFailed dropped its
// rest).
func (l *Leader[A]) Next() (Entry, bool) {
	for {
		_, cmd, ok := l.msgs.Next()
		if !ok {
			return Entry{}, false
		}
		if seq, ok := l.admit(cmd); ok {
			return Entry{Seq: seq, Cmd: cmd}, true
		}
	}
}

// admit runs a command's admission checks, in order, and sequences it.
func (l *Leader[A]) admit(cmd []byte) (uint64, bool) {
	var h engine.CommandHeader
	err := h.Parse(cmd)
	switch {
	case err != nil:
		l.rd.Counts.BadCommands++
		return 0, false
	case !l.prim.Gate().LeaseHeld() || !l.MayLead(l.nowNs):
		l.rd.Counts.NotLeading++
		return 0, false
	case !l.sessions.Note(h.Session, l.from):
		l.rd.Counts.SessionsFull++
		return 0, false
	case l.pub.Len()+OutputReserve > l.pub.Cap() || l.md.Full():
		l.rd.Counts.Backpressure++
		return 0, false
	case l.answer(cmd):
		return 0, false
	}
	seq, err := l.seqr.Submit(cmd, l.nowNs)
	if err != nil {
		l.rd.Counts.BadCommands++
		return 0, false
	}
	return seq, true
}

// answer answers a command the state machine's dedup table can answer by
// itself (engine.Deduper: a replay or resend of an applied id, an id
// below the window, ...) without sequencing, journaling or replicating
// it, so a replay flood costs a lookup instead of capacity. It reports
// whether it answered.
//
// The answer reveals the original's result, so it passes the gate like
// any output: it is queued under the last applied seq, which is at or
// above the original's, and leaves once everything applied so far is
// released (at once when nothing is in flight; after one replication
// round trip under load, or after a promotion once the new epoch has
// released up to here). A resend of a command still in flight (applied
// here, not yet released) is answered the same way: never sequenced
// twice, never answered before the original is released. Answer does not
// record the seq of each result, so the answer may wait for later seqs
// than the original's; it never leaves early.
func (l *Leader[A]) answer(cmd []byte) bool {
	if l.dedup == nil {
		return false
	}
	at := l.sm.AppliedSeq()
	if at == 0 {
		return false // nothing applied: nothing to answer from, no seq to gate on
	}
	l.applySeq = at
	if !l.dedup.Answer(cmd, &l.emitter) {
		return false
	}
	l.rd.Counts.AnsweredFromTable++
	return true
}

// Apply applies e, which the runtime appended to the journal: its outputs
// are queued in the gate under e.Seq, the gate learns it is applied, and
// a HASH or a snapshot due at e.Seq is added to the Ready. The
// assign -> release latency of e is measured from the frame's nowNs.
func (l *Leader[A]) Apply(e Entry) {
	if t := l.track; t.assignNs != nil {
		t.assignNs[e.Seq&t.mask] = l.nowNs
	}
	l.applySeq = e.Seq
	l.sm.Apply(e.Seq, e.Cmd, &l.emitter)
	l.prim.Applied(e.Seq)
	l.rd.Counts.Commands++
	if e.Seq%l.cfg.HashEvery == 0 {
		l.seqr.SendHash(e.Seq, l.sm.StateHash(), l.nowNs)
	}
	if e.Seq%l.cfg.SnapshotEvery == 0 {
		l.rd.Snapshot = e.Seq
	}
}

// Emitter is the emitter that queues outputs under seq, for a runtime or
// test that applies by hand (Apply uses it).
func (l *Leader[A]) Emitter(seq uint64) engine.Emitter {
	l.applySeq = seq
	return &l.emitter
}

// leaderEmitter queues the engine's outputs in the gate under the seq of
// the command being applied (or answered).
type leaderEmitter[A comparable] struct{ l *Leader[A] }

func (e *leaderEmitter[A]) Emit(to uint64, payload []byte) {
	l := e.l
	if to == engine.MarketData && l.md.Add(l.sm.AppliedSeq(), payload) {
		return // kept in the ring; published from it as released moves
	}
	if len(payload) > MaxOutputBytes {
		l.rd.Counts.OutputsLost++
		l.rd.Lost = fmt.Errorf("%w: %d bytes", ErrOutputTooLarge, len(payload))
		return
	}
	l.rec.Record(l.applySeq, to, payload)
	s, err := l.pub.EnqueueSlot(l.applySeq) // filled in place: no copy of the slot
	if err != nil {
		l.rd.Counts.OutputsLost++
		l.rd.Lost = fmt.Errorf("replica: gate full after apply; output of seq %d dropped: %w", l.applySeq, err)
		return
	}
	s.To = to
	s.n = uint16(copy(s.b[:], payload))
}

// JournalFailed stops the term for good: no command is accepted, nothing
// is released, and what is queued is dropped (it returns how many).
func (l *Leader[A]) JournalFailed() int {
	l.broken = true
	l.msgs = wire.Messages{} // the rest of the frame is not taken
	l.prim.JournalFailed()
	return l.pub.DropAll()
}

// DropQueued drops every output waiting in the gate (the lease lapsed, or
// the term ends) and returns how many.
func (l *Leader[A]) DropQueued() int { return l.pub.DropAll() }

// Queued is how many outputs wait in the gate.
func (l *Leader[A]) Queued() int { return l.pub.Len() }

// TakeQueued keeps, for this new term of the same process, the outputs
// that old's term left waiting: they are part of the history this term
// continues (NewTerm). The publisher this term had goes to old, whose
// Memory the runtime keeps for the next term.
func (l *Leader[A]) TakeQueued(old *Leader[A]) { l.pub, old.pub = old.pub, l.pub }

// NextFrame returns the release's next finished frame (false: the
// release is done). Send each before the next call: its bytes are valid
// until then. A client's frame goes to its session's address in the
// table (Sessions.Addr; none: dropped), market data to its group. The
// frames are every queued output at or below ReleaseReady.Released
// (release only <= released), packed by the ReleaseFramer's rules, and
// the Ready counts the outputs taken (OutputsReleased).
func (l *Leader[A]) NextFrame() (Frame, bool) {
	for l.releasing {
		seq, out, ok := l.pub.Next(l.releaseTo)
		if !ok {
			l.releasing = false
			l.flushed = l.framer.Flush() // every client's open frame, then the market data's
			break
		}
		l.rd.Counts.OutputsReleased++
		switch {
		case out.To != engine.MarketData:
			ok = l.framer.Output(seq, out.To, out.Payload(), &l.frame)
		case l.cfg.MarketData:
			ok = l.framer.MarketData(seq, out.Payload(), &l.frame)
		default:
			ok = false // no market-data group: dropped
		}
		if ok {
			l.releaseSent = true
			return l.frame, true
		}
	}
	if len(l.flushed) == 0 {
		l.releaseDone()
		return Frame{}, false
	}
	fr := l.flushed[0]
	l.flushed = l.flushed[1:]
	l.releaseSent = true
	return fr, true
}

// Ack records standby from's ACK (Primary.Ack) stamped with history id
// history, unless it is of another history (AckForeign: its id is
// another's, or it acknowledges a seq of our epoch beyond the last we
// sequenced, AckAhead).
func (l *Leader[A]) Ack(from uint32, epoch, seq, history uint64, nowNs int64) AckVerdict {
	if v := l.foreign(epoch, seq, history); v != AckCounted {
		return v
	}
	return l.prim.Ack(from, epoch, seq, nowNs)
}

// AckLeaving records a standby's last ack before a planned stop
// (Primary.AckLeaving), refused as Ack's.
func (l *Leader[A]) AckLeaving(from uint32, epoch, seq, history uint64, nowNs int64) (AckVerdict, bool) {
	if v := l.foreign(epoch, seq, history); v != AckCounted {
		return v, false
	}
	return l.prim.AckLeaving(from, epoch, seq, nowNs)
}

// foreign judges an ack's history: AckForeign for another history's id
// (Identity.Judge; an ack with no id, from a directory that has none
// yet, is not judged), AckAhead for one ahead of what we sequenced, else
// AckCounted.
func (l *Leader[A]) foreign(epoch, seq, history uint64) AckVerdict {
	switch {
	case history != 0 && l.cfg.Sequencer.History != 0 && history != l.cfg.Sequencer.History:
		return AckForeign
	case l.ahead(epoch, seq):
		return AckAhead
	}
	return AckCounted
}

// ahead reports an ack of our epoch beyond the last seq we sequenced: a
// standby of this history has only what we sent it (an older epoch's
// suffix is cut by NEW_EPOCH before it acks ours), so its directory holds
// another history, with the same epochs (another cluster's, a copy).
func (l *Leader[A]) ahead(epoch, seq uint64) bool {
	return epoch == l.seqr.Epoch() && seq > l.seqr.LastAssigned()
}

// Durable records the journal's durable watermark (Primary.Durable).
func (l *Leader[A]) Durable(seq uint64) { l.prim.Durable(seq) }

// Nak answers standby's NAK: RETRANSMIT or NEED_SNAPSHOT frames in the
// Ready.
func (l *Leader[A]) Nak(nak *wire.Nak, nowNs int64) { l.seqr.OnNak(nak, nowNs) }

// EndBatch seals the batch's open DATA frame into the Ready.
func (l *Leader[A]) EndBatch(nowNs int64) { l.seqr.Flush(nowNs) }

// Tick seals the open DATA frame and adds a HEARTBEAT when nothing was
// multicast for the heartbeat interval.
func (l *Leader[A]) Tick(nowNs int64) {
	l.seqr.Flush(nowNs)
	l.seqr.Tick(nowNs)
}

// Announce adds NEW_EPOCH (where this epoch's history forks) to the
// Ready.
func (l *Leader[A]) Announce(prevEpoch, lastSeq uint64, nowNs int64) {
	l.seqr.AnnounceEpoch(prevEpoch, lastSeq, nowNs)
}

// SetReleased records what later HEARTBEATs carry: the released watermark
// and the MD seq released.
func (l *Leader[A]) SetReleased(released, mdSeq uint64) { l.seqr.SetReleased(released, mdSeq) }

// ProbeFrame appends to dst the HEARTBEAT to send as a probe of one
// standby (Ready.Probe; sequencer.Sequencer.ProbeFrame).
func (l *Leader[A]) ProbeFrame(dst []byte) []byte { return l.seqr.ProbeFrame(dst) }

// Heartbeat adds a HEARTBEAT now.
func (l *Leader[A]) Heartbeat(nowNs int64) { l.seqr.Heartbeat(nowNs) }

// LeaseReleased puts in the Ready a HEARTBEAT telling the standbys that
// this primary gave its lease up (wire.FlagLeaseReleased): they ask the
// arbiter for it at once.
func (l *Leader[A]) LeaseReleased(nowNs int64) { l.seqr.LeaseReleased(nowNs) }

// SnapshotWritten records the latest snapshot on disk: a NAK below what
// the journal still holds is answered with NEED_SNAPSHOT.
func (l *Leader[A]) SnapshotWritten(seq uint64) { l.seqr.SetSnapshotSeq(seq) }

// HasReady reports whether there is a LeaderReady to carry out.
func (l *Leader[A]) HasReady() bool {
	r := &l.rd
	return len(l.seqr.Outbox()) > 0 || r.Counts.any() || r.Lost != nil || r.FirstRelease != 0 || r.Snapshot != 0
}

// Ready returns what to do; carry it out in field order, then Advance.
// It is the Leader's own: valid until Advance, which clears it (copy
// what is needed after Advance first).
func (l *Leader[A]) Ready() *LeaderReady {
	l.rd.Frames = l.seqr.Outbox()
	return &l.rd
}

// Advance says the last Ready was carried out.
func (l *Leader[A]) Advance() {
	l.seqr.ClearOutbox()
	l.rd = LeaderReady{}
}

// seqBuffers is m's sequencer memory (nil for a nil m).
func (m *LeaderMemory) seqBuffers() *sequencer.Buffers {
	if m == nil {
		return nil
	}
	return m.seq
}
