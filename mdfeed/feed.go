package mdfeed

import (
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// Limits (see doc.go for the reasoning behind each).
const (
	// DefaultRingUpdates: 64k updates (4.5 MB of 72-byte slots) is about
	// five seconds of the demo's market data (93k updates in 8 s): room for
	// a consumer to notice a gap, ask, and be answered many times over, and
	// for a failover's unreleased tail; a consumer further behind
	// resynchronizes from a book snapshot.
	DefaultRingUpdates = 1 << 16
	// MinRingUpdates and MaxRingUpdates bound Config.RingUpdates
	// (MaxRingUpdates is 288 MB of slots).
	MinRingUpdates = 16
	MaxRingUpdates = 1 << 22
	// SlotBytes is the largest market-data payload the ring holds (the
	// reference engine's are 39 bytes); a larger one resets the ring
	// (counted as Stats.TooLarge).
	SlotBytes = 63
	// MaxPerRequest bounds one range answer: 2048 updates, ~60 datagrams
	// of 34 updates each.
	MaxPerRequest = 2048
	// A requester has a bucket of Burst tokens, one more every RefillNs. A
	// request costs one, plus one per UpdatesPerToken updates served, plus
	// SnapshotTokens for a book snapshot: at most ~64k updates a second per
	// requester after a burst of ~4k, so the service cannot be turned into
	// an amplifier (a 49-byte request answered by 60 datagrams) at more
	// than that rate. A consumer with one request in flight at a time never
	// reaches it; a flood costs one MD_STATUS per request. Snapshots are
	// also spaced feed-wide by SnapshotEveryNs (waiters join the pending
	// one for free).
	Burst           = 64
	RefillNs        = 1_000_000
	UpdatesPerToken = 64
	SnapshotTokens  = 16
	SnapshotEveryNs = 50_000_000
	// MaxRequesters bounds the rate limiter's table; entries idle for
	// RequesterIdleNs make room, otherwise a new requester is refused
	// (MDRateLimited).
	MaxRequesters   = 1024
	RequesterIdleNs = 1_000_000_000
	// MaxSnapshotLevels bounds one book snapshot: 16384 levels, ~250
	// chunks. Books larger than that are refused (MDUnavailable).
	MaxSnapshotLevels = 16384
	// MaxSnapshotWaiters: requesters one pending snapshot is sent to; more
	// wait for the next (MDUnavailable, retry).
	MaxSnapshotWaiters = 16
	// SnapshotWaitNs: a snapshot whose MD seq is not released within this
	// is dropped (this node was deposed); the requester asks again.
	SnapshotWaitNs = 1_000_000_000
)

// ErrConfig is returned by New when a Config field is out of range.
var ErrConfig = errors.New("mdfeed: invalid config")

// Config sizes a Feed. The zero value is a disabled feed (no market-data
// group): it keeps nothing and refuses every request with MDUnavailable.
type Config struct {
	// RingUpdates is how many recent updates the ring holds: 0 (disabled)
	// or MinRingUpdates..MaxRingUpdates.
	RingUpdates int
	// DatagramLen is the largest frame the feed builds (0:
	// wire.DefaultDatagramLen); the caller's sealing tag must fit after it.
	DatagramLen int
	// ReserveUpdates is the room Full keeps free for one command's market
	// data (a sweep emits a trade and a level per fill); at most a quarter
	// of the ring is kept.
	ReserveUpdates int
	// HeartbeatEveryNs: while releases move, HeartbeatDue says a heartbeat
	// is due at least this often (0: never).
	HeartbeatEveryNs int64
	// NoRepublish (UNSAFE, for the simulator's mutation knob): Promoted
	// counts the old primary's unreleased market data as released, so it
	// is never published.
	NoRepublish bool
}

// Stats are the market-data recovery counters (a node's status.json
// "md"). The field names are the JSON names: do not rename.
type Stats struct {
	// RingFirst..RingLast are the MD seqs the ring holds (0, 0: none);
	// Released the MD seq known released (learned from heartbeats on a
	// standby).
	RingFirst, RingLast, Released uint64
	// Requests: MD_REQUESTs received; Served: updates sent in answer;
	// Refused: requests answered with an MD_STATUS (too old, not yet,
	// rate limited, unavailable, malformed), RateLimited of them for the
	// rate limit.
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
	// Malformed: requests of an unknown kind, or a range from MD seq 0 or
	// of 0 updates (refused with MDUnavailable; wire.Parse already drops
	// them, so only a caller that builds requests itself sees any).
	Malformed uint64
}

type slot struct {
	cmd uint64 // seq of the command that emitted it
	n   uint8
	b   [SlotBytes]byte
}

// Feed is one node's market-data ring and recovery service. A is the
// requester's address type (netip.AddrPort in a node); the core only
// compares it. One goroutine owns a Feed; it is not safe for concurrent
// use.
type Feed[A comparable] struct {
	cfg         Config
	ring        []slot // nil: disabled
	first, last uint64 // MD seqs held; last == 0: none
	released    uint64
	hbReleased  uint64 // gate released as of the last heartbeat due
	lastHBNs    int64
	stats       Stats
	server[A]
}

// New returns a Feed for cfg.
func New[A comparable](cfg Config) (*Feed[A], error) {
	if cfg.RingUpdates != 0 && (cfg.RingUpdates < MinRingUpdates || cfg.RingUpdates > MaxRingUpdates) {
		return nil, fmt.Errorf("%w: market-data ring of %d updates not in %d..%d", ErrConfig, cfg.RingUpdates, MinRingUpdates, MaxRingUpdates)
	}
	if cfg.DatagramLen == 0 {
		cfg.DatagramLen = wire.DefaultDatagramLen
	}
	if cfg.DatagramLen < wire.HeaderLen+wire.MessageOverhead+SlotBytes || cfg.DatagramLen > wire.MaxFrameLen {
		return nil, fmt.Errorf("%w: datagram of %d bytes not in %d..%d", ErrConfig, cfg.DatagramLen, wire.HeaderLen+wire.MessageOverhead+SlotBytes, wire.MaxFrameLen)
	}
	if cfg.ReserveUpdates < 0 || cfg.HeartbeatEveryNs < 0 {
		return nil, fmt.Errorf("%w: negative reserve (%d) or heartbeat interval (%d ns)", ErrConfig, cfg.ReserveUpdates, cfg.HeartbeatEveryNs)
	}
	f := &Feed[A]{cfg: cfg}
	if cfg.RingUpdates > 0 {
		f.ring = make([]slot, cfg.RingUpdates)
	}
	f.server.init(cfg.DatagramLen)
	return f, nil
}

// Enabled reports whether the feed keeps a ring (Config.RingUpdates > 0).
func (f *Feed[A]) Enabled() bool { return f.ring != nil }

// Released is the MD seq known released: published by this node as
// primary, or learned from the primary's heartbeats.
func (f *Feed[A]) Released() uint64 { return f.released }

// KnownReleased raises Released to an MD seq known released by other
// means: what this node's previous run knew (its last status file). A
// node restarted and promoted before it hears a heartbeat then publishes
// again only the ring's updates above it, not the whole ring (up to
// 65,536 updates at once, measured with seqbus chaos's restart-primary).
// It never lowers Released.
func (f *Feed[A]) KnownReleased(seq uint64) { f.released = max(f.released, seq) }

// Entry is the ring's update at MD seq (ok false when not held): the seq
// of the command that emitted it and its payload, valid until the slot is
// overwritten.
func (f *Feed[A]) Entry(seq uint64) (cmd uint64, payload []byte, ok bool) {
	if !f.held(seq) {
		return 0, nil, false
	}
	s := f.slot(seq)
	return s.cmd, s.b[:s.n], true
}

func (f *Feed[A]) held(seq uint64) bool { return f.last != 0 && seq >= f.first && seq <= f.last }

func (f *Feed[A]) slot(seq uint64) *slot { return &f.ring[seq%uint64(len(f.ring))] }

func (f *Feed[A]) reset() {
	if f.last != 0 {
		f.stats.Resets++
	}
	f.first, f.last = 0, 0
}

// Add appends one market-data payload emitted by command cmd and reports
// whether it kept it: false without a ring, for a payload that is not the
// reference engine's market data (nothing to number it by) and for one
// larger than a slot (counted as TooLarge; the ring restarts). The ring
// stays contiguous: an update at or below the last held one replaces the
// history from there (a discarded suffix re-applied differently); one past
// a hole restarts the ring. It never allocates.
func (f *Feed[A]) Add(cmd uint64, payload []byte) bool {
	if f.ring == nil {
		return false
	}
	var o engine.Output
	if err := o.Parse(payload); err != nil || o.Kind != engine.KindMarketData {
		return false
	}
	if len(payload) > SlotBytes {
		f.stats.TooLarge++
		f.reset()
		return false
	}
	seq := o.MDSeq
	switch {
	case f.last == 0:
		f.first = seq
	case seq == f.last+1:
	case seq >= f.first && seq <= f.last:
		f.last = seq - 1
	default:
		f.reset()
		f.first = seq
	}
	s := f.slot(seq)
	s.cmd, s.n = cmd, uint8(copy(s.b[:], payload))
	f.last = seq
	if f.last-f.first >= uint64(len(f.ring)) {
		f.first = f.last - uint64(len(f.ring)) + 1
	}
	return true
}

// reserve is the room kept free in the ring for one command's market
// data; a quarter of a small ring.
func (f *Feed[A]) reserve() uint64 { return uint64(min(f.cfg.ReserveUpdates, len(f.ring)/4)) }

// Full reports (and counts as Backpressure) that the ring's unpublished
// updates are within a command's worth of its size: the caller refuses
// the command, so an unpublished update is never overwritten.
func (f *Feed[A]) Full() bool {
	if f.ring == nil || f.last <= f.released {
		return false
	}
	if f.last-f.released+f.reserve() <= uint64(len(f.ring)) {
		return false
	}
	f.stats.Backpressure++
	return true
}

// Publish packs into b, as one OUTPUT frame of origin o whose seq is the
// first update's command seq, the next updates after Released in MD seq
// order whose command is released (at or below released) and whose MD seq
// is at or below stateMDSeq (the state machine's; above it the ring holds
// a discarded history's updates). It returns how many it packed and
// advances Released past them; 0: nothing to publish, and b is untouched.
// The caller sends b.Bytes() on the market-data group and calls Publish
// again until it returns 0. It never allocates.
func (f *Feed[A]) Publish(b *wire.Batch, o wire.Origin, released, stateMDSeq uint64) int {
	if f.ring == nil || f.last == 0 || f.released >= f.last {
		return 0
	}
	seq := f.released + 1
	if seq < f.first {
		f.stats.RepublishMissed += f.first - seq
		seq = f.first
		f.released = seq - 1
	}
	top := min(f.last, stateMDSeq)
	packed := 0
	for ; seq <= top; seq++ {
		s := f.slot(seq)
		if s.cmd > released {
			break
		}
		if packed == 0 {
			b.Reset(wire.TypeOutput, o, s.cmd)
		} else if !b.Fits(int(s.n)) {
			break
		}
		b.Add(s.b[:s.n])
		f.released = seq
		packed++
	}
	return packed
}

// HeartbeatDue reports whether the primary should send a HEARTBEAT now
// (carrying released and Released): the gate's released watermark moved
// since the last one this reported and none was due for
// Config.HeartbeatEveryNs. Call it after every release.
func (f *Feed[A]) HeartbeatDue(released uint64, nowNs int64) bool {
	if released == f.hbReleased || nowNs-f.lastHBNs < f.cfg.HeartbeatEveryNs {
		return false
	}
	f.hbReleased, f.lastHBNs = released, nowNs
	return true
}

// OnHeartbeat learns the primary's released MD seq from a HEARTBEAT frame
// (a standby) and makes a waiting snapshot servable once its MD seq is
// released: drain Next afterwards.
func (f *Feed[A]) OnHeartbeat(fr *wire.Frame, nowNs int64) {
	hb, err := wire.DecodeHeartbeat(fr)
	if err != nil {
		return
	}
	f.released = max(f.released, hb.MDSeq)
	f.ServeSnapshot(nowNs)
}

// Promoted is called when this node starts to lead. The updates of the
// ring above Released, up to stateMDSeq, are published again (Publish
// sends them as the new epoch releases their commands); it counts them as
// Republished and returns their range (to < from: none). Updates below
// the ring are counted as RepublishMissed. With Config.NoRepublish they
// are marked released instead (never published) and nothing is returned.
func (f *Feed[A]) Promoted(stateMDSeq uint64) (from, to uint64) {
	if f.ring == nil || f.last == 0 {
		return 1, 0
	}
	top := min(f.last, stateMDSeq) // above it: a discarded history's
	if f.cfg.NoRepublish {
		f.released = max(f.released, top)
		return 1, 0
	}
	if f.released >= top {
		return 1, 0
	}
	from = f.released + 1
	if from < f.first {
		f.stats.RepublishMissed += f.first - from
		from = f.first
		f.released = from - 1
	}
	f.stats.Republished += top - from + 1
	return from, top
}

// servable is what this node may send: held, released, and at or below
// its state machine's MD seq. The last bound matters after a discarded
// suffix: the state is rebuilt to the fork point while the ring still
// holds the discarded history's updates above it, until the new history's
// updates replace them as they are applied.
func (f *Feed[A]) servable(stateMDSeq uint64) (oldest, newest uint64) {
	if f.last == 0 {
		return 1, 0
	}
	return f.first, min(f.last, f.released, stateMDSeq)
}

// Stats is the counters with the ring's bounds.
func (f *Feed[A]) Stats() Stats {
	s := f.stats
	s.RingFirst, s.RingLast, s.Released = f.first, f.last, f.released
	if s.RingLast == 0 {
		s.RingFirst = 0
	}
	return s
}
