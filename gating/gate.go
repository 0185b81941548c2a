package gating

import "math"

// MaxStandbys is the largest in-sync set a Gate accepts. It sizes the stack
// array the required ack is computed on, so the hot path never allocates.
const MaxStandbys = 8

// maxTrackedStandbys bounds how many standbys (members and non-members) the
// Gate remembers acks for. Twice MaxStandbys leaves room for every member
// plus as many catching-up or recently removed standbys. At the bound, the
// non-member whose last ack is oldest is forgotten (GateStats.Evicted).
const maxTrackedStandbys = 2 * MaxStandbys

// Config holds the release policy of a Gate.
type Config struct {
	// RequiredAcks is how many members of the in-sync set must have
	// acknowledged a seq before it may be released (k of n). Zero, the
	// default, means every member. When the set has fewer than RequiredAcks
	// members, every member is required: the size of the set is guarded by
	// MinInSync, not by RequiredAcks, so that removing a laggard never stops
	// releasing unless MinInSync says so. Range 0..MaxStandbys.
	RequiredAcks int

	// MinInSync is the smallest in-sync set that may release, like Kafka's
	// min.insync.replicas (counting standbys only, not this primary). While
	// the set is smaller, nothing more is released. Zero lets the primary run
	// alone with an empty set (released = min(applied, durable)).
	// Range 0..MaxStandbys.
	MinInSync int
}

// StandbyState is what a Gate knows about one standby.
type StandbyState struct {
	ID uint32
	// AckSeq is the highest seq the standby acknowledged (0: never).
	AckSeq uint64
	// LastAckNs is the monotonic time of its last accepted ack, or of when
	// the Gate first saw it if it never acknowledged.
	LastAckNs int64
	// ProgressNs is the monotonic time its lag is measured from: the last
	// accepted ack that advanced or covered everything applied, or its
	// joining the in-sync set, whichever is latest (see Lagging).
	ProgressNs int64
	// Member reports whether it is in the in-sync set.
	Member bool
	// Leaving reports that its last ack said it is stopping
	// (OnLeavingAck).
	Leaving bool
	// Unreachable reports that a probe sent after its last ack found no
	// process at its address (OnUnreachable).
	Unreachable bool
}

// GateStats counts what a Gate did with its inputs, for operators.
type GateStats struct {
	// AcksAccepted counts acks that did not regress.
	AcksAccepted uint64
	// AcksRegressed counts acks below the standby's known ack (reordered or
	// duplicated frames), which are ignored.
	AcksRegressed uint64
	// AcksNonMember counts accepted acks from standbys outside the in-sync
	// set: remembered, but not counted towards release.
	AcksNonMember uint64
	// Evicted counts non-member standbys forgotten because the table of
	// maxTrackedStandbys was full.
	Evicted uint64
}

type standbyRecord struct {
	id        uint32
	ackSeq    uint64
	lastAckNs int64
	// progressNs: when the ack last advanced, was last seen covering all
	// of applied, or the standby joined the set. A repeated ack of an old
	// seq refreshes lastAckNs (the standby is alive) but not progressNs
	// (it is not keeping up): see Lagging.
	progressNs int64
	used       bool
	member     bool
	// leaving: its last ack said it is stopping (OnLeavingAck); cleared
	// by its next accepted ack (it came back).
	leaving bool
	// unreachable: its port refused a probe sent after its last ack
	// (OnUnreachable); cleared by its next accepted ack.
	unreachable bool
}

// Gate computes the released watermark. It is not safe for concurrent use;
// one goroutine owns it. Its methods never allocate.
type Gate struct {
	cfg Config

	applied   uint64
	durable   uint64
	released  uint64
	leaseHeld bool

	inSyncVersion uint64
	// members holds indexes into standbys, in the order SetInSync gave them.
	members     [MaxStandbys]uint8
	memberCount int
	standbys    [maxTrackedStandbys]standbyRecord

	stats GateStats
}

// NewGate returns a Gate with nothing applied, durable or released, an empty
// in-sync set (version 0) and the lease not held.
func NewGate(cfg Config) (*Gate, error) {
	if cfg.RequiredAcks < 0 || cfg.RequiredAcks > MaxStandbys ||
		cfg.MinInSync < 0 || cfg.MinInSync > MaxStandbys {
		return nil, ErrInvalidConfig
	}
	return &Gate{cfg: cfg}, nil
}

// Released returns the released watermark: every seq at or below it may be
// handed out while the lease is held. It never decreases.
func (g *Gate) Released() uint64 { return g.released }

// Applied returns the highest applied seq the Gate was told about.
func (g *Gate) Applied() uint64 { return g.applied }

// Durable returns the highest durable seq the Gate was told about.
func (g *Gate) Durable() uint64 { return g.durable }

// LeaseHeld reports whether the Gate believes this node holds the lease.
func (g *Gate) LeaseHeld() bool { return g.leaseHeld }

// InSyncVersion returns the version of the current in-sync set.
func (g *Gate) InSyncVersion() uint64 { return g.inSyncVersion }

// Stats returns the counters.
func (g *Gate) Stats() GateStats { return g.stats }

// SetApplied records that every seq up to seq has been applied here. A lower
// value than already known is ignored: applied is a watermark.
func (g *Gate) SetApplied(seq uint64) {
	if seq <= g.applied {
		return
	}
	g.applied = seq
	g.advance()
}

// SetDurable records that every seq up to seq is durable in the journal. A
// lower value than already known is ignored (a late group-commit callback).
func (g *Gate) SetDurable(seq uint64) {
	if seq <= g.durable {
		return
	}
	g.durable = seq
	g.advance()
}

// SetLease records whether this node may lead. While the lease is not held
// the released watermark stays where it is; when it is held again the
// watermark catches up with the current inputs.
func (g *Gate) SetLease(held bool) {
	g.leaseHeld = held
	g.advance()
}

// OnAck records that standby id has every seq up to ackSeq, as of nowNs. An
// ack below the standby's known ack is a reordered or duplicated frame and
// is ignored entirely. Acks from standbys outside the in-sync set are
// remembered, so a standby can catch up and be re-added, but do not count.
// Any id is accepted: it may come from the network.
func (g *Gate) OnAck(id uint32, ackSeq uint64, nowNs int64) { g.onAck(id, ackSeq, nowNs, false) }

// OnLeavingAck is OnAck of a standby's last ack before a planned stop
// (wire.Ack.Leaving): the standby is marked leaving, so as a member it
// lags at once (Lagging) and the runtime proposes its removal without
// waiting out the timeout, and as a non-member it is not proposed for
// addition; its next accepted plain ack, when it comes back, clears the
// mark. It reports whether a member started leaving (false for a
// repeat of the same word).
func (g *Gate) OnLeavingAck(id uint32, ackSeq uint64, nowNs int64) bool {
	return g.onAck(id, ackSeq, nowNs, true)
}

// OnUnreachable records that a probe sent to standby id at probeNs found
// no process at its address (its host answered "port unreachable": the
// process died, the host is up). Unless an ack was accepted from it at
// or after probeNs (it came back meanwhile), it is marked: as a member it
// lags at once, like a leaving one, and as a non-member it is not
// proposed for addition; its next accepted ack clears the mark. It
// reports whether a member was marked just now (false for a repeat).
func (g *Gate) OnUnreachable(id uint32, probeNs int64) bool {
	i := g.find(id)
	if i < 0 {
		return false // forgotten, or never seen: nothing to remove
	}
	s := &g.standbys[i]
	if s.lastAckNs >= probeNs || s.unreachable {
		return false
	}
	s.unreachable = true
	return s.member
}

// onAck is OnAck, leaving the ack's mark; it reports whether a member
// started leaving with it.
func (g *Gate) onAck(id uint32, ackSeq uint64, nowNs int64, leaving bool) bool {
	i := g.find(id)
	if i < 0 {
		i = g.track(id, nowNs)
	}
	s := &g.standbys[i]
	started := leaving && !s.leaving && s.member
	if ackSeq < s.ackSeq {
		g.stats.AcksRegressed++
		s.leaving = s.leaving || leaving // an old ack clears nothing
		return started
	}
	g.stats.AcksAccepted++
	s.leaving = leaving
	s.unreachable = false
	if ackSeq > s.ackSeq || ackSeq >= g.applied {
		// Progress: the ack moved, or nothing applied is waiting for it.
		// An ack that only repeats an old seq while commands wait above
		// it is not progress, however often it arrives.
		s.progressNs = max(s.progressNs, nowNs)
	}
	s.ackSeq = ackSeq
	s.lastAckNs = max(s.lastAckNs, nowNs)
	if !s.member {
		g.stats.AcksNonMember++
		return started
	}
	g.advance()
	return started
}

// SetInSync replaces the in-sync set. version must be greater than the
// current version so a late, older decision cannot undo a newer one. The set
// holds at most MaxStandbys distinct ids. A member the Gate has never seen
// starts with ack 0 and last ack time nowNs, so Lagging reports it one
// timeout later if it never acknowledges; a standby that joins the set
// (new or not) is measured for lag from nowNs at the earliest. On error
// nothing changes.
func (g *Gate) SetInSync(version uint64, members []uint32, nowNs int64) error {
	if version <= g.inSyncVersion {
		return ErrStaleInSyncVersion
	}
	if len(members) > MaxStandbys {
		return ErrTooManyStandbys
	}
	for i := range members {
		for j := i + 1; j < len(members); j++ {
			if members[i] == members[j] {
				return ErrDuplicateStandby
			}
		}
	}
	var wasMember [maxTrackedStandbys]bool
	for i := range g.standbys {
		wasMember[i] = g.standbys[i].member
		g.standbys[i].member = false
	}
	// Mark known members first so that tracking an unknown member below can
	// only evict a standby that is not in the new set.
	for _, id := range members {
		if i := g.find(id); i >= 0 {
			g.standbys[i].member = true
			if !wasMember[i] {
				// A joining member's lag starts now, not at an ack from
				// before it was required.
				g.standbys[i].progressNs = max(g.standbys[i].progressNs, nowNs)
			}
		}
	}
	for m, id := range members {
		i := g.find(id)
		if i < 0 {
			i = g.track(id, nowNs)
			g.standbys[i].member = true
		}
		g.members[m] = uint8(i)
	}
	g.memberCount = len(members)
	g.inSyncVersion = version
	g.advance()
	return nil
}

// InSync appends the members of the in-sync set to dst, in the order
// SetInSync gave them, and returns the extended slice.
func (g *Gate) InSync(dst []uint32) []uint32 {
	for _, m := range g.members[:g.memberCount] {
		dst = append(dst, g.standbys[m].id)
	}
	return dst
}

// Standby returns what the Gate knows about standby id; ok is false if it
// does not remember it.
func (g *Gate) Standby(id uint32) (state StandbyState, ok bool) {
	i := g.find(id)
	if i < 0 {
		return StandbyState{}, false
	}
	s := &g.standbys[i]
	return StandbyState{ID: s.id, AckSeq: s.ackSeq, LastAckNs: s.lastAckNs, ProgressNs: s.progressNs,
		Member: s.member, Leaving: s.leaving, Unreachable: s.unreachable}, true
}

// Lagging appends to dst the members of the in-sync set that hold back
// release, or would, and returns the extended slice. A member lags when
// either:
//
//   - it is silent: its last accepted ack (or, if none, its joining) is
//     more than timeoutNs before nowNs (a dead standby, or one whose acks
//     no longer arrive); or
//   - it is stalled: an output waits for release above its ack (applied >
//     released and applied > its ack) and its ack has not progressed for
//     more than timeoutNs: measured from progressNs, the later of its last
//     ack that advanced, its last ack that covered everything applied
//     (so, for a caught-up standby acking periodically, within one ack
//     interval of when the oldest waiting output became blocked on it),
//     and its joining the set. A standby cut off from the primary's DATA
//     keeps acking the same old seq: alive, but behind, and never
//     catching up by itself.
//
// A member that said it is stopping (OnLeavingAck) or whose port refused
// a probe (OnUnreachable) lags at once. While nothing waits (idle), only
// silence (or those marks) makes a member lag. The runtime removes
// laggards with SetInSync, so neither a dead nor a cut-off standby holds
// back release for more than about timeoutNs. It does not allocate when
// dst has room for MaxStandbys ids.
func (g *Gate) Lagging(nowNs, timeoutNs int64, dst []uint32) []uint32 {
	return g.overdue(nowNs, timeoutNs, timeoutNs, true, dst)
}

// Overdue appends to dst the members that are stalled for more than
// stalledNs or silent for more than silentNs (Lagging's two tests with
// their own bounds) and carry no mark yet: the ones worth asking whether
// they are still there (a probe, replica.Primary.Probes), long before
// they lag. It does not allocate when dst has room for MaxStandbys ids.
func (g *Gate) Overdue(nowNs, stalledNs, silentNs int64, dst []uint32) []uint32 {
	return g.overdue(nowNs, stalledNs, silentNs, false, dst)
}

// overdue is Lagging (lagging: the marked members too) and Overdue (the
// unmarked only).
func (g *Gate) overdue(nowNs, stalledNs, silentNs int64, lagging bool, dst []uint32) []uint32 {
	stalledAfter, silentAfter := uint64(max(stalledNs, 0)), uint64(max(silentNs, 0))
	waiting := g.applied > g.released
	for _, m := range g.members[:g.memberCount] {
		s := &g.standbys[m]
		silent := nowNs > s.lastAckNs && uint64(nowNs-s.lastAckNs) > silentAfter
		stalled := waiting && s.ackSeq < g.applied &&
			nowNs > s.progressNs && uint64(nowNs-s.progressNs) > stalledAfter
		marked := s.leaving || s.unreachable
		if lagging && (silent || stalled || marked) || !lagging && !marked && (silent || stalled) {
			dst = append(dst, s.id)
		}
	}
	return dst
}

// advance moves the released watermark up to the current bound, if the lease
// is held and the in-sync set is large enough. It never moves it down.
func (g *Gate) advance() {
	if !g.leaseHeld {
		return
	}
	ack, ok := g.requiredAck()
	if !ok {
		return
	}
	bound := min(g.applied, g.durable, ack)
	if bound > g.released {
		g.released = bound
	}
}

// RequiredAck returns the ack the in-sync set requires now (see
// requiredAck), for observers and invariant checkers.
func (g *Gate) RequiredAck() (ack uint64, ok bool) { return g.requiredAck() }

// requiredAck returns the highest seq that enough in-sync standbys have
// acknowledged, or ok false when the set is smaller than MinInSync. An empty
// set (allowed by MinInSync 0) requires nothing: math.MaxUint64.
//
// Like etcd raft's MajorityConfig.CommittedIndex, it copies the acks to an
// array on the stack, sorts it and picks the k-th highest.
func (g *Gate) requiredAck() (ack uint64, ok bool) {
	n := g.memberCount
	if n < g.cfg.MinInSync {
		return 0, false
	}
	if n == 0 {
		return math.MaxUint64, true
	}
	k := g.cfg.RequiredAcks
	if k == 0 || k > n {
		k = n
	}
	if k == n {
		// Every member is required (the default): the minimum, no sort.
		lowest := uint64(math.MaxUint64)
		for _, m := range g.members[:n] {
			lowest = min(lowest, g.standbys[m].ackSeq)
		}
		return lowest, true
	}
	var stack [MaxStandbys]uint64
	acks := stack[:n]
	for i := range acks {
		acks[i] = g.standbys[g.members[i]].ackSeq
	}
	insertionSort(acks)
	// Ascending order: the k-th highest is at n-k.
	return acks[n-k], true
}

// insertionSort sorts a short slice ascending; at most MaxStandbys elements,
// where it beats sort.Slice and does not allocate.
func insertionSort(a []uint64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// find returns the index of id's record, or -1.
func (g *Gate) find(id uint32) int {
	for i := range g.standbys {
		if s := &g.standbys[i]; s.used && s.id == id {
			return i
		}
	}
	return -1
}

// track adds a record for id, first seen at nowNs, and returns its index. When the table is full it
// forgets the non-member whose last ack is oldest: only non-members' acks are
// expendable, since they do not count towards release.
func (g *Gate) track(id uint32, nowNs int64) int {
	victim := -1
	for i := range g.standbys {
		s := &g.standbys[i]
		if !s.used {
			victim = i
			break
		}
		if !s.member && (victim < 0 || s.lastAckNs < g.standbys[victim].lastAckNs) {
			victim = i
		}
	}
	if victim < 0 {
		// Members are at most MaxStandbys < maxTrackedStandbys, so a
		// non-member slot always exists.
		panic("gating: standby table full of members")
	}
	if g.standbys[victim].used {
		g.stats.Evicted++
	}
	g.standbys[victim] = standbyRecord{id: id, lastAckNs: nowNs, progressNs: nowNs, used: true}
	return victim
}
