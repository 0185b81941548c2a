package client

import (
	"hash/crc32"

	"github.com/seqbus/seqbus/wire"
)

// MDRecovery is the market-data consumer's sequencing and recovery core
// (issue 20, items 4-5): pure, no socket or clock, so it is tested step by
// step. Feed it every update in arrival order (from the multicast feed or
// from an MD_REPLAY), every MD_STATUS and MD_SNAPSHOT chunk, and Tick it;
// it delivers each MD seq exactly once, in order, and asks for what it
// missed through Send:
//
//   - a gap is buffered (up to MDPendingUpdates ahead) and asked for as one
//     range, from the first missing seq to the highest seen, from one
//     node; no answer within RetryNs asks the next node; MaxRetries
//     unanswered asks in a row give up and report the gap
//     (MDTracker.Gaps);
//   - a node that answers the gap is not released there yet (MDNotYet) is
//     alive and will serve it: a standby that is about to be promoted
//     after the primary died knows only what the primary's heartbeats
//     said was released, and publishes the rest once it leads. Such an
//     answer resets the count of unanswered asks; the gap is waited on
//     up to WaitNs from its first ask (a failover takes a lease), then
//     given up;
//   - a node that says the range is older than its ring (MDTooOld) is
//     asked for the books instead; once every chunk of one snapshot has
//     arrived, OnSnapshot gets the levels at its MD seq and delivery
//     resumes after it (MDTracker.Resyncs; the updates it covered count as
//     Resynced, never as delivered);
//   - a stream that went quiet for ProbeNs is probed from the next seq, so
//     updates lost at the tail are found too;
//   - an update seen again is dropped (Dups); one whose content differs
//     from what was delivered under its seq is counted as a Conflict.
type MDRecovery struct {
	cfg MDRecoveryConfig

	next    uint64 // next MD seq to deliver; 0 before the first update
	highest uint64 // highest MD seq seen
	pend    []mdPending

	// One request in flight at a time.
	inflight  bool
	probe     bool // the request in flight is a tail probe
	reqFirst  uint64
	reqLast   uint64
	reqSentNs int64
	retries   int // timeouts in a row with no node alive to say not yet
	server    int
	// The gap being asked for starts at gapFirst, first asked at gapNs.
	gapFirst   uint64
	gapNs      int64
	lastSeenNs int64
	// Snapshot being assembled (snapshotting: one was asked for).
	snapshotting bool
	snapSeq      uint64
	snapChunks   uint16
	snapGot      []bool
	snapLevels   [][]wire.MDLevel
	flat         []wire.MDLevel

	// delivered[seq%len] is the CRC32C of the update delivered at seq.
	delivered []mdDelivered

	tracker MDTracker
}

type mdPending struct {
	seq uint64
	n   uint8
	b   [63]byte
}

type mdDelivered struct {
	seq uint64
	crc uint32
}

// MDRecoveryConfig configures MDRecovery. Zero values take the defaults.
type MDRecoveryConfig struct {
	// Servers is how many nodes Send may be asked to address (the index
	// rotates on a timeout); 0 means recovery is off: gaps are reported
	// at once, as by MDTracker.
	Servers int
	// FromStart: deliver from MD seq 1 even when the first update seen is
	// later (a late joiner recovers the rest, from a ring or the books).
	FromStart bool
	// RetryNs: a request unanswered this long is sent to the next server
	// (default 20 ms); MaxRetries such timeouts give the gap up (default
	// 25); ProbeNs: quiet time before a tail probe (default 50 ms);
	// WaitNs: how long a gap that a node answers MDNotYet for is waited
	// on from its first ask (default 10 s: a lease expiry and a
	// promotion, with room).
	RetryNs, ProbeNs, WaitNs int64
	MaxRetries               int
	// Send sends req to server index server (0..Servers-1).
	Send func(server int, req wire.MDRequest)
	// Deliver gets each update, in MD seq order, exactly once; payload is
	// valid during the call. replayed: it came from a re-request.
	Deliver func(seq uint64, payload []byte, replayed bool)
	// OnSnapshot gets the books at mdSeq when the consumer resynchronized
	// from a snapshot; delivery then resumes at mdSeq+1. levels is valid
	// during the call.
	OnSnapshot func(mdSeq uint64, levels []wire.MDLevel)
}

// MDPendingUpdates bounds the updates buffered past a gap (an update
// longer than 63 bytes is not buffered: it is asked for again): 8192 (a
// second of a busy feed would not fit; a gap is asked for at once, so a
// few round trips' worth is what is needed). Updates further ahead are
// dropped and asked for again once the gap is filled.
const MDPendingUpdates = 8192

// DefaultMDWaitNs is MDRecoveryConfig.WaitNs's default: 10 s.
const DefaultMDWaitNs = int64(10_000_000_000)

// mdMaxRequest is the most updates one request asks for (a node answers
// at most 2048).
const mdMaxRequest = 2048

// NewMDRecovery returns a core with cfg's defaults filled in.
func NewMDRecovery(cfg MDRecoveryConfig) *MDRecovery {
	if cfg.RetryNs <= 0 {
		cfg.RetryNs = 20_000_000
	}
	if cfg.ProbeNs <= 0 {
		cfg.ProbeNs = 50_000_000
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 25
	}
	if cfg.WaitNs <= 0 {
		cfg.WaitNs = DefaultMDWaitNs
	}
	return &MDRecovery{cfg: cfg, pend: make([]mdPending, MDPendingUpdates), delivered: make([]mdDelivered, MDPendingUpdates)}
}

// Tracker returns the counters.
func (r *MDRecovery) Tracker() MDTracker { return r.tracker }

// Next is the next MD seq to be delivered (0 before the first update).
func (r *MDRecovery) Next() uint64 { return r.next }

// Update takes one update seen at nowNs, from the feed or (replayed) from
// an MD_REPLAY.
func (r *MDRecovery) Update(seq uint64, payload []byte, replayed bool, nowNs int64) {
	r.lastSeenNs = nowNs
	if r.next == 0 {
		r.next = seq
		if r.cfg.FromStart && r.cfg.Servers > 0 {
			r.next = 1
		}
	}
	if seq > r.highest {
		r.highest = seq
	}
	switch {
	case seq < r.next:
		r.duplicate(seq, payload)
		return
	case seq == r.next:
		if replayed {
			r.retries = 0 // a node answered: the unanswered asks start over
		}
		r.deliver(seq, payload, replayed)
		r.drain()
	case r.cfg.Servers == 0:
		r.tracker.Gaps++
		r.tracker.Missing += seq - r.next
		r.tracker.LastGapFrom, r.tracker.LastGapTo = r.next, seq-1
		r.next = seq
		r.deliver(seq, payload, replayed)
	default:
		if seq-r.next < uint64(len(r.pend)) && len(payload) <= len(r.pend[0].b) {
			p := &r.pend[seq%uint64(len(r.pend))]
			if p.seq == seq {
				r.duplicate(seq, payload)
				return
			}
			p.seq, p.n = seq, uint8(copy(p.b[:], payload))
		}
	}
	r.settle(nowNs)
}

func (r *MDRecovery) duplicate(seq uint64, payload []byte) {
	r.tracker.Dups++
	if d := r.delivered[seq%uint64(len(r.delivered))]; d.seq == seq && d.crc != crc32.Checksum(payload, castagnoli) {
		r.tracker.Conflicts++
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (r *MDRecovery) deliver(seq uint64, payload []byte, replayed bool) {
	r.tracker.Updates++
	if replayed {
		r.tracker.Filled++
	}
	r.delivered[seq%uint64(len(r.delivered))] = mdDelivered{seq, crc32.Checksum(payload, castagnoli)}
	r.next = seq + 1
	if r.cfg.Deliver != nil {
		r.cfg.Deliver(seq, payload, replayed)
	}
}

// drain delivers the buffered updates that are now contiguous.
func (r *MDRecovery) drain() {
	for {
		p := &r.pend[r.next%uint64(len(r.pend))]
		if p.seq != r.next {
			return
		}
		p.seq = 0
		r.deliver(r.next, p.b[:p.n], false)
	}
}

// settle clears a satisfied request and asks for a gap not yet asked for.
func (r *MDRecovery) settle(nowNs int64) {
	if r.inflight && !r.snapshotting && (r.next > r.reqLast || r.next > r.highest) {
		r.inflight, r.retries = false, 0 // answered (or the feed filled it)
		if r.probe && r.next > r.reqLast {
			r.ask(true, nowNs) // a probe answered in full: there may be more
			return
		}
	}
	if r.inflight || r.cfg.Servers == 0 || r.highest < r.next {
		return
	}
	r.ask(false, nowNs)
}

func (r *MDRecovery) ask(probe bool, nowNs int64) {
	r.inflight, r.probe, r.reqFirst, r.reqSentNs = true, probe, r.next, nowNs
	if r.snapshotting {
		r.cfg.Send(r.server, wire.MDRequest{Kind: wire.MDRequestSnapshot, Instrument: wire.AllInstruments})
		return
	}
	count := uint64(mdMaxRequest)
	if !probe {
		count = min(r.highest-r.next+1, mdMaxRequest)
		if r.gapFirst != r.next {
			r.gapFirst, r.gapNs = r.next, nowNs // a new gap (or progress on one)
		}
	}
	r.reqLast = r.next + count - 1
	r.cfg.Send(r.server, wire.MDRequest{Kind: wire.MDRequestRange, First: r.next, Count: uint32(count)})
}

// Tick runs the timers: a request unanswered for RetryNs goes to the
// next server (or, after MaxRetries, the gap is reported and skipped), and
// a quiet stream is probed.
func (r *MDRecovery) Tick(nowNs int64) {
	if r.cfg.Servers == 0 {
		return
	}
	if r.next == 0 {
		if !r.cfg.FromStart {
			return
		}
		r.next = 1 // a late joiner on a quiet feed: probe from the start
	}
	if !r.inflight {
		if nowNs-r.lastSeenNs >= r.cfg.ProbeNs && nowNs-r.reqSentNs >= r.cfg.ProbeNs {
			r.ask(true, nowNs)
		}
		return
	}
	if nowNs-r.reqSentNs < r.cfg.RetryNs {
		return
	}
	if r.probe {
		// A lost probe: the next one follows ProbeNs, to the next node
		// (this one may be dead).
		r.inflight = false
		r.server = (r.server + 1) % r.cfg.Servers
		return
	}
	r.retries++
	r.server = (r.server + 1) % r.cfg.Servers
	if r.retries <= r.cfg.MaxRetries && nowNs-r.gapNs < r.cfg.WaitNs {
		r.ask(false, nowNs)
		return
	}
	r.giveUp(nowNs)
}

// DeadlineNs is when Tick next has something to do: the timeout of the
// request in flight, or the probe of a quiet feed. false: nothing until
// an update or an answer arrives (recovery off, or no update seen and
// not delivering from the start). A Tick before it changes nothing, so
// an agent may sleep until it; it moves only when an update, an answer
// or a Tick does.
func (r *MDRecovery) DeadlineNs() (int64, bool) {
	if r.cfg.Servers == 0 || (r.next == 0 && !r.cfg.FromStart) {
		return 0, false
	}
	if r.inflight {
		return r.reqSentNs + r.cfg.RetryNs, true
	}
	return max(r.lastSeenNs, r.reqSentNs) + r.cfg.ProbeNs, true
}

// giveUp reports the gap at next and resumes at the first buffered update.
func (r *MDRecovery) giveUp(nowNs int64) {
	r.inflight, r.retries, r.snapshotting = false, 0, false
	to := r.highest
	for s := r.next; s <= r.highest && s-r.next < uint64(len(r.pend)); s++ {
		if r.pend[s%uint64(len(r.pend))].seq == s {
			to = s - 1
			break
		}
	}
	if to < r.next {
		return
	}
	r.tracker.Gaps++
	r.tracker.Missing += to - r.next + 1
	r.tracker.LastGapFrom, r.tracker.LastGapTo = r.next, to
	r.next = to + 1
	r.drain()
	r.settle(nowNs)
}

// Status takes an MD_STATUS answer.
func (r *MDRecovery) Status(st wire.MDStatus, nowNs int64) {
	if !r.inflight {
		return
	}
	switch st.Code {
	case wire.MDTooOld:
		if !r.snapshotting && st.First == r.reqFirst && st.First == r.next {
			r.snapshotting = true
			r.ask(false, nowNs)
		}
	case wire.MDNotYet:
		if st.First != r.reqFirst {
			break // the answer to an older request
		}
		if r.probe {
			r.inflight = false // nothing more anywhere yet: caught up
			break
		}
		// A gap not yet released at that node: the node is alive and
		// will serve it once it is (WaitNs bounds that); the retry
		// timer asks the next one meanwhile.
		r.retries = 0
	}
	// MDRateLimited and MDUnavailable: the retry timer moves on.
}

// SnapshotChunk takes one MD_SNAPSHOT chunk.
func (r *MDRecovery) SnapshotChunk(s *wire.MDSnapshot, nowNs int64) {
	if !r.snapshotting || s.Chunks == 0 || s.Chunk >= s.Chunks {
		return // not asked for, or malformed (wire.Parse refuses those)
	}
	if s.MDSeq != r.snapSeq || s.Chunks != r.snapChunks || len(r.snapGot) != int(s.Chunks) {
		r.snapSeq, r.snapChunks = s.MDSeq, s.Chunks
		r.snapGot = make([]bool, s.Chunks)
		r.snapLevels = make([][]wire.MDLevel, s.Chunks)
	}
	if r.snapGot[s.Chunk] {
		return
	}
	r.snapGot[s.Chunk] = true
	r.snapLevels[s.Chunk] = append([]wire.MDLevel(nil), s.Levels...)
	for _, got := range r.snapGot {
		if !got {
			return
		}
	}
	r.snapshotting, r.inflight, r.retries = false, false, 0
	r.snapGot = nil
	seq := r.snapSeq
	if seq+1 < r.next {
		r.settle(nowNs) // older than what we have: ask for the range again
		return
	}
	r.flat = r.flat[:0]
	for _, l := range r.snapLevels {
		r.flat = append(r.flat, l...)
	}
	r.tracker.Resyncs++
	if seq >= r.next {
		r.tracker.Resynced += seq - r.next + 1
		for s := r.next; s <= seq && s-r.next < uint64(len(r.pend)); s++ {
			if p := &r.pend[s%uint64(len(r.pend))]; p.seq == s {
				p.seq = 0
			}
		}
		r.next = seq + 1
	}
	if r.cfg.OnSnapshot != nil {
		r.cfg.OnSnapshot(seq, r.flat)
	}
	r.highest = max(r.highest, seq)
	r.drain()
	r.settle(nowNs)
}
