package witness

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// Core is the witness's logic without a socket, a file, a clock or a
// goroutine: the arbiter core, the authentication checks, the reply cache
// and the counters. The caller owns time (every call takes the witness's
// monotonic clock, nowNs), delivery and the disk. Server drives it with
// a UDP socket, the state file and time.Since; the simulator drives the
// same type with a fake network, clock and disk.
//
// The loop, for each datagram received from `from` at nowNs:
//
//	rd := core.Step(pkt, from, nowNs)
//	reply := rd.Reply
//	if rd.MustPersist {
//		reply = core.Persisted(store.Save(rd.State)) // durable BEFORE the reply
//	}
//	if reply != nil { send(reply, from) }
//
// The write need not finish before the next Step: a caller may run it on
// another goroutine and go on stepping datagrams, as Server does, so a
// slow disk never silences the witness. While a write is outstanding the
// Core asks for no other (requests that would need one are dropped as
// DropPersistPending and retried by their senders, acquires among them,
// undecided), and it answers an extension of a durable epoch at once,
// with the durable in-sync set: the lease needs no disk, only a new epoch
// or set does.
//
// A Core is not safe for concurrent use: one goroutine at a time (Server
// holds a mutex around it).
type Core struct {
	cfg Config
	log *slog.Logger
	arb *arbiter.Arbiter
	// startNs is the clock at construction, so the report's uptime is
	// nowNs - startNs.
	startNs int64
	// durableEpoch and durableInSyncVersion are the highest epoch and
	// in-sync version known to be on disk. No grant of a higher epoch or
	// version is ever sent.
	durableEpoch         uint64
	durableInSyncVersion uint64
	// durableInSync is the in-sync set of durableInSyncVersion. Denies and
	// infos report it when the arbiter's set is newer but not yet durable,
	// so no reply ever names a set a restart could forget.
	durableInSync arbiter.InSyncSet
	// durableHistory is the cluster's history id known to be on disk
	// (0: none yet): replies carry it, never one a restart could forget.
	durableHistory uint64
	// foreignRefused counts the requests refused as of another history
	// (logged the 1st, 2nd, 4th... time).
	foreignRefused uint64
	// persistFailing is true from a persist failure until the next
	// success, so a failing disk is logged once, not per request.
	persistFailing bool
	// pending is the grant Step decided but withheld until Persisted says
	// its state is durable.
	pending   pendingGrant
	cache     replyCache
	lastNowNs int64
	stats     Stats
	// reply is the encode buffer; Step's and Persisted's results alias it
	// (or auth's sealing buffer).
	reply []byte
	auth  *witnessAuth // nil without Config.Key
	// blocked is the last node refused as not in sync since the last
	// grant (NodeNone: none): no node may be promoted (notePromotion).
	blocked arbiter.NodeID
	// The rate-limited log of requests refused by authentication.
	authLogged        bool
	authLoggedAtNs    int64
	authDropsSinceLog uint64
}

// Ready is what Step asks of its caller.
type Ready struct {
	// Reply is the datagram to send back to the sender, or nil to send
	// nothing. It aliases a buffer that the next Step or Persisted call
	// reuses: send it first. Always nil when MustPersist is set.
	Reply []byte
	// MustPersist says a grant is withheld until State is durable: the
	// caller writes State (Store.Save: a crash at any later moment must
	// still load it), and only then calls Persisted with the outcome,
	// which returns the reply. Nothing of that grant is sent before
	// Persisted. Step may be called in between (the write running on
	// another goroutine); it never sets MustPersist again until
	// Persisted.
	MustPersist bool
	State       arbiter.PersistentState
}

// pendingGrant is a fresh decision waiting for its state to be durable,
// with what the reply and the cache need.
type pendingGrant struct {
	active    bool
	state     arbiter.PersistentState
	entry     cacheEntry
	stream    uint16
	sealNode  uint32 // the requester, whose key seals the reply
	isAcquire bool
	// superseded is set when a later request of the same node was
	// decided and cached while the write ran: the cache keeps that one
	// (the node's last request), and this grant is sent uncached.
	superseded bool
	// termPrev, termLapsedNs: for a new epoch, the lease it follows
	// (arbiter.LastTerm), for the log line once it is granted.
	termPrev     arbiter.NodeID
	termLapsedNs int64
}

// NewCore builds a witness core at nowNs (the caller's monotonic clock)
// from what the store loaded: found=false means nothing was ever
// persisted and the witness starts fresh at epoch 0, granting at once to
// anyone; found=true restores state and grants nothing for one lease
// duration (the restart quarantine), then state.Epoch+1 to the last
// holder or a member. A state the arbiter refuses fails with
// ErrCorruptState.
func NewCore(cfg Config, state arbiter.PersistentState, found bool, nowNs int64) (*Core, error) {
	arb, err := arbiter.NewArbiter(cfg.Arbiter)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Core{
		cfg:       cfg,
		log:       logger,
		arb:       arb,
		startNs:   nowNs,
		lastNowNs: math.MinInt64,
		reply:     make([]byte, 0, wire.HeaderLen+64+4*wire.MaxMembers),
	}
	if cfg.Key != nil {
		if c.auth, err = newWitnessAuth(cfg); err != nil {
			return nil, err
		}
	}
	if !found {
		c.log.Info("witness: fresh state, epoch 0")
		return c, nil
	}
	// The old lease may still be live somewhere: grant nothing for one
	// lease duration, then epochs above the persisted one.
	restoreAt := c.observe(nowNs)
	if cfg.Unsafe.NoQuarantine {
		// UNSAFE (mutation test): as if the quarantine already ran.
		restoreAt -= cfg.Arbiter.LeaseDurationNs
	}
	if err := c.arb.Restore(state, restoreAt); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptState, err)
	}
	c.durableEpoch, c.durableInSyncVersion, c.durableInSync = state.Epoch, state.InSyncVersion, state.Members
	c.durableHistory = c.arb.History()
	c.log.Info("witness: restored", "epoch", state.Epoch, "in_sync_version", state.InSyncVersion,
		"last_holder", state.LastHolder, "in_sync", state.Members.Slice(), "history", fmt.Sprintf("%016x", c.durableHistory),
		"quarantine", time.Duration(cfg.Arbiter.LeaseDurationNs))
	return c, nil
}

// Stats returns a snapshot of the counters. ReceiveErrors and SendErrors
// are the transport's and stay zero here; Server.Stats adds its own.
func (c *Core) Stats() Stats {
	st := c.stats
	st.CacheNodes = c.cache.len()
	st.DurableEpoch = c.durableEpoch
	st.DurableInSyncVersion = c.durableInSyncVersion
	return st
}

// Status reports who holds the lease at nowNs, as the arbiter sees it.
func (c *Core) Status(nowNs int64) arbiter.Status {
	return c.arb.Query(c.observe(nowNs))
}

// observe clamps time that goes backwards (only a test can make it) to the
// latest seen, as the arbiter does, so cache arithmetic agrees with it.
func (c *Core) observe(nowNs int64) int64 {
	c.lastNowNs = max(c.lastNowNs, nowNs)
	return c.lastNowNs
}

// Step takes one datagram received from `from` at nowNs and says what to
// do: send Ready.Reply, or persist Ready.State and then call Persisted.
// Bad input is dropped and counted, never a panic. While a persist is
// outstanding Step still answers (see Core), and never asks for another.
func (c *Core) Step(pkt []byte, from netip.AddrPort, nowNs int64) Ready {
	wasPending := c.pending.active
	reply := c.step(pkt, from, nowNs)
	if c.pending.active && !wasPending {
		return Ready{MustPersist: true, State: c.pending.state}
	}
	if reply != nil && c.auth != nil {
		h, _ := wire.ParseHeader(pkt) // parsed once already: a reply means it was valid
		reply = c.auth.seal(reply, h.Node)
	}
	return Ready{Reply: reply}
}

// Persisted finishes the withheld grant of the last Step: err is what
// writing Ready.State returned. On nil the grant is cached and its reply
// returned; on an error nothing is sent or cached (a resend retries the
// write) and the failure is counted and logged once per failing spell.
// Calling it with no persist outstanding panics.
func (c *Core) Persisted(err error) []byte {
	p := c.pending
	if !p.active {
		panic("witness: Core.Persisted called with no persist outstanding")
	}
	c.pending = pendingGrant{}
	if !c.persisted(p.state, err) {
		c.stats.Drops[DropPersistFailed]++
		return nil
	}
	if d := &p.entry.decision; d.PersistEpoch {
		c.stats.GrantsNewEpoch++
		after := any(time.Duration(p.termLapsedNs))
		if p.termLapsedNs < 0 {
			after = "unknown (the witness restarted since)"
		}
		c.log.Info("witness: new epoch granted", "node", d.Holder, "epoch", d.Epoch, "prev_holder", p.termPrev, "after_prev_lease_ended", after)
	}
	grantsBefore := c.stats.Grants
	var reply []byte
	if p.superseded {
		reply = c.answer(p.entry.decision, p.entry.requestID, p.stream, p.entry.decision.RemainingNs)
	} else {
		reply = c.decided(p.entry, p.stream)
	}
	if c.stats.Grants > grantsBefore {
		c.countGrant(p.isAcquire)
	}
	if c.auth != nil {
		reply = c.auth.seal(reply, p.sealNode)
	}
	return reply
}

// countGrant counts a grant sent under the request's kind.
func (c *Core) countGrant(isAcquire bool) {
	if isAcquire {
		c.stats.AcquireGrants++
	} else {
		c.stats.RenewGrants++
	}
}

// step answers one datagram: the reply, or nil to send nothing (dropped,
// or a grant now pending on a persist).
func (c *Core) step(pkt []byte, from netip.AddrPort, nowNs int64) []byte {
	nowNs = c.observe(nowNs)
	if !from.IsValid() || from.Port() == 0 {
		c.stats.Drops[DropNoAddress]++
		return nil
	}
	f, n, err := wire.Parse(pkt)
	if err != nil {
		c.stats.Drops[parseDropReason(err)]++
		return nil
	}
	if n != len(pkt) {
		c.stats.Drops[DropTrailing]++
		return nil
	}
	if c.auth != nil {
		if r := c.auth.verify(&f); r != dropNone {
			c.stats.Drops[r]++
			if f.Type != wire.TypeLeaseQuery {
				c.noteAuthDrop(r, f.Node, nowNs)
			}
			return nil
		}
	}
	switch f.Type {
	case wire.TypeLeaseAcquire:
		c.stats.Acquires++
	case wire.TypeLeaseRenew:
		c.stats.Renews++
	case wire.TypeLeaseQuery:
		c.stats.Queries++
		return c.info(&f, nowNs)
	case wire.TypeLeaseRelease:
		c.stats.Releases++
		c.release(&f, nowNs)
		return nil
	default:
		c.stats.Drops[DropNotRequest]++
		return nil
	}
	grantsBefore := c.stats.Grants
	reply := c.request(&f, nowNs)
	if c.stats.Grants > grantsBefore {
		c.countGrant(f.Type == wire.TypeLeaseAcquire)
	}
	return reply
}

// request decides a LEASE_ACQUIRE or LEASE_RENEW (answering a resend from
// the cache) and returns the reply, or nil to send nothing (including a
// grant left pending on a persist).
func (c *Core) request(f *wire.Frame, nowNs int64) []byte {
	// Parse validated the layout, so DecodeLease cannot fail here. A
	// request needs the request ID and, for a renew, the proposal.
	req, _ := wire.DecodeLease(f)
	node := arbiter.NodeID(f.Node)
	reqEpoch := f.Epoch
	if f.Type == wire.TypeLeaseAcquire {
		// An acquire's header epoch is informational; ignoring it keeps a
		// resend with a different stale epoch a resend.
		reqEpoch = 0
	}
	if e := c.cache.lookup(node); e != nil && e.matches(req.RequestID, f.Type, reqEpoch) {
		e.usedAtNs = nowNs
		return c.resend(e, f.Stream, nowNs)
	}
	if c.waitsForWrite(f.Type, node, req.RequestID, reqEpoch) {
		c.stats.Drops[DropPersistPending]++
		return nil
	}
	if c.auth != nil && !c.auth.fresh(node, req.RequestID) {
		// A captured request replayed: deciding it afresh could extend a
		// dead primary's lease.
		c.stats.Drops[DropReplay]++
		return nil
	}
	d := c.decide(f.Type, node, reqEpoch, &req, nowNs)
	entry := cacheEntry{
		node: node, requestID: req.RequestID, reqType: f.Type, reqEpoch: reqEpoch,
		decision: d, decidedAtNs: nowNs, usedAtNs: nowNs,
	}
	return c.outcome(entry, f.Stream, f.Node)
}

// release takes a holder's LEASE_RELEASE (arbiter.Keeper.Release): the
// lease of its epoch ends now (arbiter.Release), so the next acquire by
// an in-sync member is granted at once. It is never answered. A release
// of a lease that is not live, not the sender's or of another epoch
// changes nothing; with a key, a replayed one is dropped like a replayed
// request. The sender's cached grant is cut off at the release, so a late
// copy of its last renew is not answered with it.
func (c *Core) release(f *wire.Frame, nowNs int64) {
	req, _ := wire.DecodeLease(f)
	node := arbiter.NodeID(f.Node)
	if c.auth != nil && !c.auth.fresh(node, req.RequestID) {
		c.stats.Drops[DropReplay]++
		return
	}
	released := c.arb.Release(node, f.Epoch, nowNs)
	if released {
		c.stats.ReleasesTaken++
		if e := c.cache.lookup(node); e != nil && e.decision.Granted {
			e.decision.ExpiresAtNs = min(e.decision.ExpiresAtNs, nowNs)
		}
	}
	switch {
	case req.Declined && c.arb.Decline(node, f.Epoch, nowNs):
		c.stats.GrantsUndone++
		c.blocked = arbiter.NodeNone // the way out notePromotion logged is no longer needed
		q := c.arb.Query(nowNs)
		c.log.Warn("witness: grant undone: its node declined to lead (its directory is new: replaced or wiped) and released nothing; "+
			"the previous holder may lead again", "node", node, "epoch", f.Epoch, "last_holder", q.LastHolder, "in_sync", q.Members.Slice())
	case released:
		c.log.Info("witness: lease released by its holder", "node", node, "epoch", f.Epoch)
	}
}

// waitsForWrite reports whether a request must wait, undecided, for the
// write under way: a resend of the request whose grant waits for it (its
// reply goes out when the write is done), or an acquire, which is a new
// term (a write) or a deny. Leaving an acquire undecided keeps the arbiter
// from running ahead of the disk, and the requester's resend of the same
// request ID still fresh to the replay check.
func (c *Core) waitsForWrite(t wire.Type, node arbiter.NodeID, requestID, reqEpoch uint64) bool {
	p := &c.pending
	if !p.active {
		return false
	}
	return t == wire.TypeLeaseAcquire || (p.entry.node == node && p.entry.matches(requestID, t, reqEpoch))
}

// decide asks the arbiter about a request and counts the decision: a
// request of another history than the cluster's pinned one is refused
// (arbiter.Arbiter.ForeignHistory), and a granted one pins its history if
// none is yet (arbiter.Arbiter.PinHistory).
func (c *Core) decide(t wire.Type, node arbiter.NodeID, reqEpoch uint64, req *wire.Lease, nowNs int64) arbiter.Decision {
	c.stats.Decisions++
	if c.arb.ForeignHistory(req.History) {
		c.foreign(node, req.History)
		return c.arb.DenyForeign(node, nowNs)
	}
	d := c.decideLease(t, node, reqEpoch, req, nowNs)
	c.arb.PinHistory(&d, req.History)
	return d
}

// historyHex is a history id as 16 hex digits, "" for none.
func historyHex(id uint64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("%016x", id)
}

// foreign counts and logs (the 1st, 2nd, 4th... time) a request refused
// as of another history than the cluster's.
func (c *Core) foreign(node arbiter.NodeID, history uint64) {
	if c.foreignRefused++; c.foreignRefused&(c.foreignRefused-1) == 0 {
		c.log.Error("witness: FOREIGN HISTORY: a node asks for the lease with another history than the cluster's "+
			"(its directory is another cluster's, or a copy): refused; stop it, empty its directory, restart it",
			"node", node, "its_history", fmt.Sprintf("%016x", history), "cluster_history", fmt.Sprintf("%016x", c.arb.History()), "refused", c.foreignRefused)
	}
}

// decideLease is decide's lease decision, once the request's history is
// the cluster's (or either is unknown).
func (c *Core) decideLease(t wire.Type, node arbiter.NodeID, reqEpoch uint64, req *wire.Lease, nowNs int64) arbiter.Decision {
	switch {
	case t == wire.TypeLeaseAcquire:
		return c.arb.AcquireRequest(node, req.RequestID, nowNs)
	case req.InSyncVersion != 0 && !c.pending.active:
		// A renew carrying a proposal: InSyncVersion is the base version,
		// Members the proposed set. A fixed array converts it without
		// allocating. While a write is under way the proposal is not
		// considered (the renew is decided alone): accepting it would
		// need a second write, and the holder proposes again with its
		// next renew, whose reply carries the set in force.
		var members [wire.MaxMembers]arbiter.NodeID
		for i, m := range req.Members[:req.NMembers] {
			members[i] = arbiter.NodeID(m)
		}
		d := c.arb.RenewWithInSync(node, reqEpoch, req.InSyncVersion, members[:req.NMembers], nowNs)
		c.stats.InSyncProposals++
		if d.Granted && d.InSyncReason != arbiter.ReasonNone {
			c.stats.InSyncRefused++
		}
		return d
	default:
		return c.arb.Renew(node, reqEpoch, nowNs)
	}
}

// outcome carries out a fresh decision: its reply now, or nothing while
// its state is written first (pending), or nothing at all.
func (c *Core) outcome(entry cacheEntry, stream uint16, sealNode uint32) []byte {
	d := entry.decision
	if d.Granted && c.pending.active && !d.Persist && d.Epoch <= c.durableEpoch {
		// A write is under way and this is an extension of a durable
		// epoch (most often the holder's next renew while its in-sync
		// proposal is being written). The lease needs no disk: grant it
		// now, with the durable set, so a slow write cannot cost the
		// holder its lease. The set in force (the one being written, or
		// one whose write failed) is reported once it is durable.
		entry.decision.InSyncVersion, entry.decision.Members = c.durableInSyncVersion, c.durableInSync
		c.stats.GrantsWhilePersisting++
		return c.decided(entry, stream)
	}
	if !d.Granted || !(d.Persist || d.Epoch > c.durableEpoch || d.InSyncVersion > c.durableInSyncVersion) {
		return c.decided(entry, stream)
	}
	if c.pending.active {
		// One write at a time: this grant (a renew of the epoch being
		// written, which no well-behaved holder sends before its grant)
		// is not sent; the requester retries.
		c.stats.Drops[DropPersistPending]++
		return nil
	}
	// Persist BEFORE granting (arbiter.Decision.Persist). The other
	// conditions also cover an extension after a new epoch or set whose
	// first grant failed to persist: the arbiter counts it as in force, but
	// it was never sent, and must not be until it is durable. Nothing is
	// cached until then either, so a resend after a failed write retries
	// it.
	c.pending = pendingGrant{
		active: true, state: d.PersistentState(), entry: entry, stream: stream,
		sealNode: sealNode, isAcquire: entry.reqType == wire.TypeLeaseAcquire,
	}
	if d.PersistEpoch {
		c.pending.termPrev, c.pending.termLapsedNs = c.arb.LastTerm()
	}
	return nil
}

// decided caches a fresh decision (durable if it needed to be) and
// returns its reply.
func (c *Core) decided(e cacheEntry, stream uint16) []byte {
	if c.pending.active && c.pending.entry.node == e.node {
		c.pending.superseded = true
	}
	if c.cache.put(e) {
		c.stats.CacheEvictions++
	}
	c.notePromotion(e.node, &e.decision)
	return c.answer(e.decision, e.requestID, stream, e.decision.RemainingNs)
}

// notePromotion follows the in-sync rule's dead end: a node refused as
// not in sync while the set is empty means only the last holder may lead
// (a refusal while the set has members is a lagging standby in an
// ordinary failover: a member leads). That is logged once per episode,
// with the way out if the last holder is lost for good, and reported in
// the status (PromotionBlocked) until the next grant.
func (c *Core) notePromotion(node arbiter.NodeID, d *arbiter.Decision) {
	switch {
	case d.Granted:
		c.blocked = arbiter.NodeNone
	case d.Reason == arbiter.ReasonNotInSync && d.Members.N == 0:
		if c.blocked == arbiter.NodeNone {
			c.log.Warn("witness: NO NODE MAY BE PROMOTED: the in-sync set is empty, so only the last holder may lead; "+
				"if it is lost for good, an operator may accept the loss of what only it had: seqbus witness override (docs/witness.md)",
				"refused", node, "last_holder", c.arb.Query(c.lastNowNs).LastHolder, "epoch", d.Epoch)
		}
		c.blocked = node
	}
}

// persisted records the outcome of writing state and reports success.
func (c *Core) persisted(state arbiter.PersistentState, err error) bool {
	if err != nil {
		c.stats.PersistFailures++
		if !c.persistFailing {
			c.log.Error("witness: grant withheld, state not persisted", "epoch", state.Epoch, "in_sync_version", state.InSyncVersion, "err", err)
		}
		c.persistFailing = true
		return false
	}
	if c.persistFailing {
		c.log.Info("witness: persisting again", "epoch", state.Epoch, "in_sync_version", state.InSyncVersion)
	}
	c.persistFailing = false
	c.stats.Persists++
	c.durableEpoch = max(c.durableEpoch, state.Epoch)
	if state.History != 0 && c.durableHistory == 0 {
		c.durableHistory = state.History
		c.log.Info("witness: the cluster's history pinned: a node whose directory holds another is refused the lease", "history", fmt.Sprintf("%016x", state.History))
	}
	if state.InSyncVersion >= c.durableInSyncVersion {
		c.durableInSyncVersion, c.durableInSync = state.InSyncVersion, state.Members
	}
	return true
}

// resend answers a repeat of the cached request without asking the
// arbiter. The reply is the same grant or deny, described at nowNs: its
// time left is what remains of the original, not a fresh duration. A
// requester that restarted and reused the request ID times the lease from
// its new send time, so a full duration could outlast the witness's lease;
// what remains cannot. A grant whose lease has run out is not answered at
// all: the requester will ask again with a new ID.
func (c *Core) resend(e *cacheEntry, stream uint16, nowNs int64) []byte {
	d := e.decision
	if d.Granted {
		left := d.ExpiresAtNs - nowNs
		if left <= 0 {
			c.stats.Drops[DropResendExpired]++
			return nil
		}
		c.stats.ResendsAnswered++
		return c.answer(d, e.requestID, stream, left)
	}
	c.stats.ResendsAnswered++
	return c.answer(d, e.requestID, stream, max(0, d.RemainingNs-(nowNs-e.decidedAtNs)))
}

// answer encodes a grant (epoch in the header, duration = leftNs) or a
// deny (holder, highest epoch, leftNs remaining) echoing requestID; both
// carry the in-sync version and set in force at the decision.
func (c *Core) answer(d arbiter.Decision, requestID uint64, stream uint16, leftNs int64) []byte {
	l := wire.Lease{
		Origin:        wire.Origin{Stream: stream, Node: c.cfg.Node, Epoch: d.Epoch},
		RequestID:     requestID,
		Holder:        uint32(d.Holder),
		InSyncVersion: d.InSyncVersion,
		History:       c.durableHistory,
	}
	set := &d.Members
	if !d.Granted && d.InSyncVersion > c.durableInSyncVersion {
		// A grant is only ever sent durable; a deny reports the durable
		// set rather than one a crash could still take back.
		l.InSyncVersion, set = c.durableInSyncVersion, &c.durableInSync
	}
	setMembers(&l, set)
	if d.Granted {
		l.Type = wire.TypeLeaseGrant
		l.DurationNs = durationToWireClamped(leftNs)
		c.stats.Grants++
	} else {
		l.Type = wire.TypeLeaseDeny
		l.RemainingNs = durationToWireClamped(leftNs)
		l.Run = uint32(min(d.Run, math.MaxUint32))
		reason := int(d.Reason)
		if reason >= denyReasonsMax {
			reason = 0
		}
		c.stats.Denies[reason]++
	}
	c.reply = l.Append(c.reply[:0])
	return c.reply
}

// info answers a query: the live holder (0 for none), the highest epoch,
// and the live lease's time left, or, with no holder, the restart
// quarantine's time left (the earliest a new holder can be granted), as a
// deny reports it.
func (c *Core) info(f *wire.Frame, nowNs int64) []byte {
	q, _ := wire.DecodeLease(f)
	st := c.arb.Query(nowNs)
	left := st.RemainingNs
	if st.Holder == arbiter.NodeNone {
		left = st.QuarantineRemainingNs
	}
	l := wire.Lease{
		Type:          wire.TypeLeaseInfo,
		Origin:        wire.Origin{Stream: f.Stream, Node: c.cfg.Node, Epoch: st.Epoch},
		RequestID:     q.RequestID,
		Holder:        uint32(st.Holder),
		RemainingNs:   durationToWireClamped(left),
		InSyncVersion: st.InSyncVersion,
		History:       c.durableHistory,
	}
	set := &st.Members
	if st.InSyncVersion > c.durableInSyncVersion {
		l.InSyncVersion, set = c.durableInSyncVersion, &c.durableInSync
	}
	setMembers(&l, set)
	c.stats.Infos++
	c.reply = l.Append(c.reply[:0])
	return c.reply
}

// The arbiter's set must fit a lease frame: a compile-time check that the
// two bounds are equal.
var _ [arbiter.MaxInSyncMembers - wire.MaxMembers]struct{}
var _ [wire.MaxMembers - arbiter.MaxInSyncMembers]struct{}

// setMembers copies the in-sync set into a lease frame.
func setMembers(l *wire.Lease, set *arbiter.InSyncSet) {
	l.NMembers = set.N
	for i, m := range set.Slice() {
		l.Members[i] = uint32(m)
	}
}

// noteAuthDrop counts a request refused by authentication towards the
// rate-limited log: the first one at once, then one record per
// macLogEvery with the counts since the last.
func (c *Core) noteAuthDrop(r DropReason, node uint32, nowNs int64) {
	c.authDropsSinceLog++
	if c.authLogged && nowNs-c.authLoggedAtNs < macLogEvery {
		return
	}
	c.log.Warn("witness: lease requests fail authentication (a node with another key file, or forged datagrams); dropped",
		"reason", r.String(), "node", node, "dropped_since_last_log", c.authDropsSinceLog,
		"bad_mac", c.stats.Drops[DropBadMAC], "no_mac", c.stats.Drops[DropNoMAC], "unknown_node", c.stats.Drops[DropUnknownNode])
	c.authLogged, c.authLoggedAtNs, c.authDropsSinceLog = true, nowNs, 0
}

// Report returns the status as the status file holds it, at nowNs. The
// transport counters (ReceiveErrors, SendErrors) are the server's and
// zero here.
func (c *Core) Report(nowNs int64) StatusReport {
	now := c.observe(nowNs)
	q := c.arb.Query(now)
	st := c.stats
	r := StatusReport{
		Role: "witness", ID: c.cfg.Node, UptimeNs: nowNs - c.startNs,
		Holder: uint32(q.Holder), Epoch: q.Epoch, LeaseRemainingNs: q.RemainingNs,
		QuarantineRemainingNs: q.QuarantineRemainingNs, LastHolder: uint32(q.LastHolder),
		InSyncVersion: q.InSyncVersion, InSync: []uint32{}, DurableEpoch: c.durableEpoch,
		History:  historyHex(c.durableHistory),
		Requests: map[string]uint64{"acquire": st.Acquires, "renew": st.Renews, "query": st.Queries, "release": st.Releases, "release_taken": st.ReleasesTaken},
		Grants: map[string]uint64{"acquire": st.AcquireGrants, "renew": st.RenewGrants,
			"new_epoch": st.GrantsNewEpoch, "resent": st.ResendsAnswered, "while_persisting": st.GrantsWhilePersisting, "undone": st.GrantsUndone},
		Denies: map[string]uint64{}, Drops: map[string]uint64{},
		Persists: st.Persists, PersistFailures: st.PersistFailures, PromotionBlocked: uint32(c.blocked),
	}
	for _, m := range q.Members.Slice() {
		r.InSync = append(r.InSync, uint32(m))
	}
	for i, n := range st.Denies {
		if i != 0 {
			r.Denies[arbiter.DenyReason(i).String()] = n
		}
	}
	for i, n := range st.Drops {
		r.Drops[DropReason(i).String()] = n
	}
	return r
}
