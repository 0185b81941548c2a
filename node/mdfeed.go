package node

import (
	"fmt"
	"net/netip"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// Market data across failovers and lost datagrams (issue 20, items 3-5).
//
// Every node keeps a ring of the most recent market-data updates of the
// commands it applied, by MD seq, contiguous, each with its command's seq
// (a standby's engine used to apply with a nil emitter, discarding them;
// the journal replay at start-up refills it too). md.released is the MD
// seq of the last update published on the market-data group.
//
// The primary does not queue market data in the gate's publisher: it
// publishes from the ring, in MD seq order, every update whose command seq
// is at or below the gate's released watermark (mdPublish, after every
// release). So an update is never dropped: a primary that loses its lease
// drops its queued outputs (clients resend), and its market data waits in
// the ring until it leads again; nothing is published past an update not
// yet released. The ring applies back-pressure (mdFull): commands are
// refused before its unpublished updates could be overwritten.
//
// The primary's HEARTBEAT carries the gate's released watermark and
// md.released; a standby remembers the highest. A standby promoted after
// the primary died continues publishing from there: what the old primary
// applied but never released, and what it released after its last
// heartbeat (exact duplicates, which consumers drop by MD seq). The MD
// sequence continues; nothing is skipped.
//
// Both roles answer MD_REQUESTs on their unicast socket: a range from the
// ring, never above md.released (the gate's rule: nothing unreleased leaves
// a node), or the books (engine.BookExporter) at an MD seq, held back
// until that MD seq is released.

const (
	// DefaultMDRingUpdates: 64k updates (4.5 MB of 72-byte slots) is
	// about five seconds of the demo's market data (93k updates in 8 s):
	// room for a consumer to notice a gap, ask, and be answered many times
	// over, and for a failover's unreleased tail; a consumer further behind
	// resynchronizes from a book snapshot.
	DefaultMDRingUpdates = 1 << 16
	// MinMDRingUpdates and MaxMDRingUpdates bound Config.MDRingUpdates
	// (MaxMDRingUpdates is 288 MB of slots).
	MinMDRingUpdates = 16
	MaxMDRingUpdates = 1 << 22
	// mdSlotBytes is the largest market-data payload the ring holds (the
	// reference engine's are 39 bytes); a larger one resets the ring
	// (counted as MD.TooLarge).
	mdSlotBytes = 63
	// mdMaxPerRequest bounds one range answer: 2048 updates, ~60
	// datagrams of 34 updates each.
	mdMaxPerRequest = 2048
	// A requester has a bucket of mdBurst tokens, one more every
	// mdRefillNs. A request costs one, plus one per mdUpdatesPerToken
	// updates served, plus mdSnapshotTokens for a book snapshot: at most
	// ~64k updates a second per requester after a burst of ~4k, so the
	// service cannot be turned into an amplifier (a 49-byte request
	// answered by 60 datagrams) at more than that rate. A consumer with
	// one request in flight at a time never reaches it; a flood costs one
	// MD_STATUS per request. Snapshots are also spaced node-wide by
	// mdSnapshotEveryNs (waiters join the pending one for free).
	mdBurst           = 64
	mdRefillNs        = 1_000_000
	mdUpdatesPerToken = 64
	mdSnapshotTokens  = 16
	mdSnapshotEveryNs = 50_000_000
	// mdMaxRequesters bounds the rate limiter's table; entries idle for
	// mdRequesterIdleNs make room, otherwise a new requester is refused.
	mdMaxRequesters   = 1024
	mdRequesterIdleNs = 1_000_000_000
	// mdMaxSnapshotLevels bounds one book snapshot: 16384 levels, ~250
	// chunks. Books larger than that are refused (MDUnavailable).
	mdMaxSnapshotLevels = 16384
	// mdMaxSnapshotWaiters: requesters one pending snapshot is sent to;
	// more wait for the next (MDUnavailable, retry).
	mdMaxSnapshotWaiters = 16
	// mdSnapshotWaitNs: a snapshot whose MD seq is not released within
	// this is dropped (this node was deposed); the requester asks again.
	mdSnapshotWaitNs = 1_000_000_000
	// mdHeartbeatEveryNs: while releases move, the primary sends a
	// HEARTBEAT at least this often (the sequencer alone sends them only
	// when idle), so standbys learn the released MD seq under load too.
	mdHeartbeatEveryNs = sequencer.DefaultHeartbeatIntervalNs
)

// MDStats are the market-data recovery counters (status.json "md").
type MDStats struct {
	// RingFirst..RingLast are the MD seqs the ring holds (0, 0: none);
	// Released the MD seq known released (learned from heartbeats on a
	// standby).
	RingFirst, RingLast, Released uint64
	// Requests: MD_REQUESTs received; Served: updates sent in answer;
	// Refused: requests answered with an MD_STATUS (too old, not yet,
	// rate limited, unavailable), RateLimited of them for the rate limit.
	Requests, Served, Refused, RateLimited uint64
	// SnapshotsServed: book snapshots sent (each to every waiter);
	// SnapshotChunks: their chunks; SnapshotsExpired: dropped unreleased.
	SnapshotsServed, SnapshotChunks, SnapshotsExpired uint64
	// Republished: updates above the last released MD seq this node knew
	// of when it was promoted (published as the new epoch releases);
	// RepublishMissed: updates a primary had to publish that its ring no
	// longer held: a hole only another node's ring or a snapshot fills.
	// Backpressure: commands refused because the ring's unpublished
	// updates neared its size.
	Republished, RepublishMissed, Backpressure uint64
	// TooLarge: updates larger than a ring slot (the ring restarts);
	// Resets: times the ring restarted (a snapshot installed, a history
	// discarded, an update out of sequence).
	TooLarge, Resets uint64
}

type mdSlot struct {
	cmd uint64 // seq of the command that emitted it
	n   uint8
	b   [mdSlotBytes]byte
}

type mdBucket struct {
	tokens int64
	lastNs int64
}

type mdSnapshotWait struct {
	active     bool
	mdSeq      uint64
	instrument uint32
	takenNs    int64
	waiters    []netip.AddrPort
}

// mdFeed is the node's market-data ring and recovery service state.
type mdFeed struct {
	ring        []mdSlot // nil: disabled (no market-data group)
	first, last uint64   // MD seqs held; last == 0: none
	released    uint64
	hbReleased  uint64 // gate released as of the last heartbeat sent
	lastHBNs    int64
	buckets     map[netip.AddrPort]mdBucket
	snap        mdSnapshotWait
	lastSnapNs  int64 // when the last snapshot was exported
	levels      []engine.BookLevel
	wlevels     []wire.MDLevel
	batch       *wire.Batch
	standbyEm   mdStandbyEmitter
	stats       MDStats
}

// mdDefaults validates and defaults Config.MDRingUpdates.
func (c *Config) mdDefaults() error {
	if c.MDRingUpdates == 0 {
		c.MDRingUpdates = DefaultMDRingUpdates
	}
	if c.MDRingUpdates < MinMDRingUpdates || c.MDRingUpdates > MaxMDRingUpdates {
		return fmt.Errorf("%w: market-data ring of %d updates not in %d..%d", ErrConfig, c.MDRingUpdates, MinMDRingUpdates, MaxMDRingUpdates)
	}
	return nil
}

// mdInit allocates the ring when the node publishes market data.
func (n *Node) mdInit() {
	n.md.standbyEm.n = n
	if !n.cfg.MarketData.IsValid() {
		return
	}
	n.md.ring = make([]mdSlot, n.cfg.MDRingUpdates)
	n.md.buckets = make(map[netip.AddrPort]mdBucket)
	n.md.batch = wire.NewBatch(datagramLen(n.cfg.Key != nil)) // n.auth is not set yet
}

func (m *mdFeed) held(seq uint64) bool { return m.last != 0 && seq >= m.first && seq <= m.last }

func (m *mdFeed) slot(seq uint64) *mdSlot { return &m.ring[seq%uint64(len(m.ring))] }

func (m *mdFeed) reset() {
	if m.last != 0 {
		m.stats.Resets++
	}
	m.first, m.last = 0, 0
}

// add appends one market-data payload emitted by command cmd and reports
// whether it kept it. The ring stays contiguous: an update at or below the
// last held one replaces the history from there (a discarded suffix
// re-applied differently); one past a hole restarts the ring. It never
// allocates.
func (m *mdFeed) add(cmd uint64, payload []byte) bool {
	if m.ring == nil {
		return false
	}
	o, err := engine.ParseOutput(payload)
	if err != nil || o.Kind != engine.KindMarketData {
		return false // not the reference engine's market data: nothing to number it by
	}
	if len(payload) > mdSlotBytes {
		m.stats.TooLarge++
		m.reset()
		return false
	}
	seq := o.MDSeq
	switch {
	case m.last == 0:
		m.first = seq
	case seq == m.last+1:
	case seq >= m.first && seq <= m.last:
		m.last = seq - 1
	default:
		m.reset()
		m.first = seq
	}
	s := m.slot(seq)
	s.cmd, s.n = cmd, uint8(copy(s.b[:], payload))
	m.last = seq
	if m.last-m.first >= uint64(len(m.ring)) {
		m.first = m.last - uint64(len(m.ring)) + 1
	}
	return true
}

// mdStandbyEmitter keeps a standby's market data in the ring.
type mdStandbyEmitter struct{ n *Node }

func (e *mdStandbyEmitter) Emit(to uint64, payload []byte) {
	if to == engine.MarketData {
		e.n.md.add(e.n.eng.AppliedSeq(), payload) // Apply sets AppliedSeq first
	}
}

// mdStandbyEmitter is the emitter a standby applies with: nil (outputs
// discarded) without a market-data ring.
func (n *Node) mdStandbyEmitter() engine.Emitter {
	if n.md.ring == nil {
		return nil
	}
	return &n.md.standbyEm
}

// mdApplied keeps one market-data update the primary's engine emitted; it
// reports false when the ring cannot (none, an update that is not the
// reference engine's or too large for a slot): the update then goes
// through the gate's publisher, as all did before the ring.
func (n *Node) mdApplied(payload []byte) bool {
	return n.md.add(n.eng.AppliedSeq(), payload)
}

// mdReserve is the room kept free in the ring for one command's market
// data (a sweep emits a trade and a level per fill), as outputReserve is in
// the gate; a quarter of a small ring.
func (m *mdFeed) reserve() uint64 { return uint64(min(outputReserve, len(m.ring)/4)) }

// mdFull reports (and counts) that the ring's unpublished updates are
// within a command's worth of its size: the command is refused.
func (n *Node) mdFull() bool {
	m := &n.md
	if m.ring == nil || m.last <= m.released {
		return false
	}
	if m.last-m.released+m.reserve() <= uint64(len(m.ring)) {
		return false
	}
	m.stats.Backpressure++
	return true
}

// mdPublish sends, in MD seq order, every update of the ring after
// md.released whose command is released (seq <= released), packed into
// OUTPUT frames on the market-data group.
func (n *Node) mdPublish(released uint64) {
	m := &n.md
	if m.ring == nil || n.mdSend == nil || m.last == 0 || m.released >= m.last {
		return
	}
	seq := m.released + 1
	if seq < m.first {
		m.stats.RepublishMissed += m.first - seq
		seq = m.first
		m.released = seq - 1
	}
	top := min(m.last, n.engineMDSeq())
	for ; seq <= top; seq++ {
		s := m.slot(seq)
		if s.cmd > released {
			break
		}
		if n.mdBatch.Count() == 0 || !n.mdBatch.Fits(int(s.n)) {
			n.flushMarketData()
			n.mdBatch.Reset(wire.TypeOutput, n.origin(), s.cmd)
		}
		n.mdBatch.Add(s.b[:s.n])
		m.released = seq
		n.stats.OutputsReleased++
	}
	n.flushMarketData()
}

// mdAfterRelease publishes the released market data, tells the sequencer
// what its heartbeats carry, sends one when releases moved and none went
// for mdHeartbeatEveryNs, and sends a waiting book snapshot once its MD
// seq is released.
func (n *Node) mdAfterRelease(now int64) {
	if n.role != RolePrimary {
		return
	}
	r := n.prim.Gate().Released()
	n.mdPublish(r)
	n.seqr.SetReleased(r, n.md.released)
	if r != n.md.hbReleased && now-n.md.lastHBNs >= mdHeartbeatEveryNs {
		n.md.hbReleased, n.md.lastHBNs = r, now
		n.seqr.Heartbeat(now)
	}
	if n.md.snap.active {
		n.mdServeSnapshot(now)
	}
}

// mdOnHeartbeat learns the primary's released MD seq.
func (n *Node) mdOnHeartbeat(f *wire.Frame, now int64) {
	hb, err := wire.DecodeHeartbeat(f)
	if err != nil {
		return
	}
	if hb.MDSeq > n.md.released {
		n.md.released = hb.MDSeq
	}
	if n.md.snap.active {
		n.mdServeSnapshot(now)
	}
}

// mdPromoted counts, when this node starts to lead, the updates of its
// ring above the last MD seq it knows was released: mdPublish sends them
// as the new epoch releases their commands (which the gate allows once a
// standby acknowledges them in this epoch).
func (n *Node) mdPromoted() {
	m := &n.md
	if m.ring == nil || m.last == 0 {
		return
	}
	top := min(m.last, n.engineMDSeq()) // above it: a discarded history's
	if n.cfg.Unsafe.NoMDRepublish {
		m.released = max(m.released, top) // UNSAFE: the old primary's unreleased market data is never published
		return
	}
	if m.released >= top {
		return
	}
	from := m.released + 1
	if from < m.first {
		m.stats.RepublishMissed += m.first - from
		from = m.first
		m.released = from - 1
	}
	m.stats.Republished += top - from + 1
	n.cfg.Log.Info("market data above the last known release will be published again", "md_from", from, "md_to", top)
}

// mdServable is what this node may send: held, released, and at or below
// its state machine's MD seq. The last bound matters after a discarded
// suffix: the state is rebuilt to the fork point while the ring still
// holds the discarded history's updates above it, until the new
// history's updates replace them as they are applied.
func (n *Node) mdServable() (oldest, newest uint64) {
	m := &n.md
	if m.last == 0 {
		return 1, 0
	}
	return m.first, min(m.last, m.released, n.engineMDSeq())
}

// engineMDSeq is the state machine's MD seq (all of the ring without a
// BookExporter to ask).
func (n *Node) engineMDSeq() uint64 {
	if ex, ok := n.eng.(engine.BookExporter); ok {
		return ex.MDSeq()
	}
	return ^uint64(0)
}

// mdAllow is the per-requester token bucket.
func (n *Node) mdAllow(from netip.AddrPort, now int64) bool {
	m := &n.md
	b, ok := m.buckets[from]
	if !ok {
		if len(m.buckets) >= mdMaxRequesters {
			for k, v := range m.buckets {
				if now-v.lastNs > mdRequesterIdleNs {
					delete(m.buckets, k)
				}
			}
			if len(m.buckets) >= mdMaxRequesters {
				return false
			}
		}
		b = mdBucket{tokens: mdBurst, lastNs: now}
	}
	if gained := (now - b.lastNs) / mdRefillNs; gained > 0 {
		b.tokens = min(mdBurst, b.tokens+gained)
		b.lastNs += gained * mdRefillNs
	}
	ok = b.tokens > 0
	if ok {
		b.tokens--
	}
	m.buckets[from] = b
	return ok
}

// mdCharge takes tokens more from an allowed requester's bucket (it may
// go below zero: the requester waits until it refills).
func (n *Node) mdCharge(from netip.AddrPort, tokens int64) {
	if b, ok := n.md.buckets[from]; ok {
		b.tokens -= tokens
		n.md.buckets[from] = b
	}
}

// onMDRecovery serves one market-data recovery frame (client traffic,
// from anyone: the MAC, when configured, was checked).
func (n *Node) onMDRecovery(f *wire.Frame, from netip.AddrPort, now int64) {
	if f.Type != wire.TypeMDRequest {
		n.stats.DropUnexpected++
		return
	}
	if f.Stream != n.cfg.Stream {
		n.stats.DropWrongStream++
		return
	}
	m := &n.md
	m.stats.Requests++
	req, _ := wire.DecodeMDRequest(f)
	if m.ring == nil {
		n.mdRefuse(from, req.First, wire.MDUnavailable)
		return
	}
	if !n.mdAllow(from, now) {
		m.stats.RateLimited++
		n.mdRefuse(from, req.First, wire.MDRateLimited)
		return
	}
	if req.Kind == wire.MDRequestSnapshot {
		n.mdSnapshotRequest(from, req.Instrument, now)
		return
	}
	oldest, newest := n.mdServable()
	switch {
	case req.First < oldest:
		n.mdRefuse(from, req.First, wire.MDTooOld)
		return
	case req.First > newest:
		n.mdRefuse(from, req.First, wire.MDNotYet)
		return
	}
	last := min(newest, req.First+uint64(min(req.Count, mdMaxPerRequest))-1)
	o := n.origin()
	b := m.batch
	b.Reset(wire.TypeMDReplay, o, req.First)
	for seq := req.First; seq <= last; seq++ {
		s := m.slot(seq)
		if !b.Fits(int(s.n)) {
			n.send(b.Bytes(), from)
			b.Reset(wire.TypeMDReplay, o, seq)
		}
		b.Add(s.b[:s.n])
		m.stats.Served++
	}
	n.send(b.Bytes(), from)
	n.mdCharge(from, int64(last-req.First+1)/mdUpdatesPerToken)
}

func (n *Node) mdRefuse(to netip.AddrPort, first uint64, code wire.MDStatusCode) {
	n.md.stats.Refused++
	oldest, newest := n.mdServable()
	st := wire.MDStatus{Origin: n.origin(), First: first, Code: code, Oldest: oldest, Newest: newest}
	n.frameBuf = st.Append(n.frameBuf[:0])
	n.send(n.frameBuf, to)
}

// mdSnapshotRequest exports the books now (or joins the export already
// waiting for the same instrument) and sends it once its MD seq is
// released.
func (n *Node) mdSnapshotRequest(from netip.AddrPort, instrument uint32, now int64) {
	m := &n.md
	w := &m.snap
	if w.active && now-w.takenNs > mdSnapshotWaitNs {
		w.active, w.waiters = false, w.waiters[:0]
		m.stats.SnapshotsExpired++
	}
	if w.active {
		if w.instrument != instrument || len(w.waiters) >= mdMaxSnapshotWaiters {
			n.mdRefuse(from, 0, wire.MDUnavailable)
			return
		}
		for _, a := range w.waiters {
			if a == from {
				return // asked again while waiting: one copy
			}
		}
		w.waiters = append(w.waiters, from)
		return
	}
	ex, ok := n.eng.(engine.BookExporter)
	if !ok || (m.lastSnapNs != 0 && now-m.lastSnapNs < mdSnapshotEveryNs) {
		n.mdRefuse(from, 0, wire.MDUnavailable)
		return
	}
	m.lastSnapNs = now
	n.mdCharge(from, mdSnapshotTokens)
	m.levels = ex.AppendBook(m.levels[:0], instrument)
	if len(m.levels) > mdMaxSnapshotLevels {
		m.levels = m.levels[:0]
		n.mdRefuse(from, 0, wire.MDUnavailable)
		return
	}
	w.active, w.mdSeq, w.instrument, w.takenNs = true, ex.MDSeq(), instrument, now
	w.waiters = append(w.waiters[:0], from)
	n.mdServeSnapshot(now)
}

// mdServeSnapshot sends the waiting snapshot to its waiters if its MD seq
// is released (and drops it if it waited too long).
func (n *Node) mdServeSnapshot(now int64) {
	m := &n.md
	w := &m.snap
	if w.mdSeq > m.released {
		if now-w.takenNs > mdSnapshotWaitNs {
			w.active, w.waiters = false, w.waiters[:0]
			m.stats.SnapshotsExpired++
		}
		return
	}
	per := wire.MaxMDSnapshotLevels(n.datagramLen())
	chunks := max((len(m.levels)+per-1)/per, 1)
	for _, to := range w.waiters {
		for c := range chunks {
			lv := m.levels[min(c*per, len(m.levels)):min((c+1)*per, len(m.levels))]
			m.wlevels = m.wlevels[:0]
			for _, l := range lv {
				m.wlevels = append(m.wlevels, wire.MDLevel{Instrument: l.Instrument, Side: uint8(l.Side), Price: l.Price, Qty: l.Qty})
			}
			s := wire.MDSnapshot{Origin: n.origin(), MDSeq: w.mdSeq, Instrument: w.instrument,
				Chunk: uint16(c), Chunks: uint16(chunks), Levels: m.wlevels}
			b, err := s.Append(n.frameBuf[:0])
			if err != nil {
				continue // never: per fits a datagram and chunks <= 16384/per
			}
			n.frameBuf = b
			n.send(b, to)
			m.stats.SnapshotChunks++
		}
		m.stats.SnapshotsServed++
	}
	w.active, w.waiters = false, w.waiters[:0]
}

// mdStats is the MD counters with the ring's bounds, for Status.
func (n *Node) mdStats() MDStats {
	s := n.md.stats
	s.RingFirst, s.RingLast, s.Released = n.md.first, n.md.last, n.md.released
	if s.RingLast == 0 {
		s.RingFirst = 0
	}
	return s
}
