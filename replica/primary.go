package replica

import (
	"fmt"
	"slices"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/gating"
)

// PrimaryConfig configures a Primary.
type PrimaryConfig struct {
	// Self is this node.
	Self arbiter.NodeID
	// Epoch is the epoch this primary leads.
	Epoch uint64
	// Peers are the configured standbys, sorted. Without a lease (static
	// mode) every one is required; with one, the in-sync set is.
	Peers []uint32
	// MinInSync: below it the gate releases nothing (gating.Config).
	MinInSync int
	// InSyncTimeoutNs and RetryNs: see MaintainConfig.
	InSyncTimeoutNs, RetryNs int64
	// NoGating (UNSAFE, mutation tests): no standby ack is ever required
	// and outputs count as durable at apply.
	NoGating bool
	// NoFencing (UNSAFE, mutation tests): the lease is never consulted;
	// the primary never steps down or stops releasing.
	NoFencing bool
	// ProbeAfterNs, when not 0: a member that holds a release back for
	// this long without its ack advancing, or that is silent for
	// ProbeSilentNs, is probed (Ready.Probe), again at most once per
	// ProbeAfterNs while it stays so. A probe whose refusal comes back
	// (Unreachable) marks the member, which is then proposed for removal
	// at once instead of after InSyncTimeoutNs. With a lease only.
	ProbeAfterNs, ProbeSilentNs int64
}

// Primary is the leading role's protocol state: the gate that decides
// what may be released (durable here, acked by every in-sync standby,
// under a held lease), the in-sync set's maintenance, and the lease
// decisions. Inputs are method calls with nowNs; what to do comes back as
// a Decision (leadership) or from Ready. It has no clock, socket, file or
// lock: the runtime feeds it between (and during) batches and carries
// out what it returns.
type Primary struct {
	cfg     PrimaryConfig
	gate    *gating.Gate
	isr     *InSync
	lease   Lease // nil: static primary
	gateVer uint64
	// inherited is the applied seq the term began with: everything up to
	// it may have been released by an earlier primary (MaintainConfig).
	inherited uint64
	alone     bool // running with an empty required set (reported once per episode)
	broken    bool // the journal failed: never release again

	// pending parts of the next Ready
	aloneStarted bool
	propose      []arbiter.NodeID
	proposeBase  uint64
	lagging      []uint32
	inSyncErr    error
	probe        []uint32 // backed by probeBuf

	// probes: when each member was last probed (Tick), and the scratch
	// the Ready's Probe is built in, so probing allocates nothing.
	probes   [gating.MaxStandbys]probeRecord
	probeBuf [gating.MaxStandbys]uint32
	overdue  [gating.MaxStandbys]uint32
}

// probeRecord is when standby id was last probed, and how long to wait
// before the next probe: ProbeAfterNs at first, doubled by each probe up
// to maxProbeBackoff times it, and back to ProbeAfterNs once the
// standby's ack progresses (a new episode).
type probeRecord struct {
	id       uint32
	atNs     int64
	interval int64
	used     bool
}

// maxProbeBackoff bounds the wait between probes of one episode, in
// ProbeAfterNs: 2 ms, 4, 8, 16, then every 32 ms by default, so a member
// lagging for the whole 200 ms in-sync timeout is probed about ten
// times (a lost probe or refusal is made good within 32 ms).
const maxProbeBackoff = 16

// Ready is what a Primary asks the runtime to do, in the order of the
// fields.
type Ready struct {
	// RunningAlone: the required set just became empty; releases are
	// durable on this node's disk only (log it, count it).
	RunningAlone bool
	// Propose, when non-nil, is an in-sync proposal to hand to the arbiter
	// (base version ProposeBase), then report with Proposed. The gate
	// already requires any standby it adds, so it may go at any time.
	// Lagging are the members it removes for lagging (for the log).
	Propose     []arbiter.NodeID
	ProposeBase uint64
	Lagging     []uint32
	// InSyncError: the gate refused the required set (it keeps the one
	// in force); log it.
	InSyncError error
	// Probe: members to probe (PrimaryConfig.ProbeAfterNs): send each a
	// HEARTBEAT from a socket that hears its host's "port unreachable",
	// and report a refusal with Unreachable. Any time; valid until the
	// next Tick.
	Probe []uint32
	// Release: hand out every queued output with seq <= Release, and only
	// those (release only <= released). The gate counted them durable in
	// this node's journal (durable before release), acknowledged by every
	// in-sync standby, and the lease held at the Ready's nowNs. 0:
	// nothing may leave now.
	Release uint64
}

// NewPrimary starts a term at cfg.Epoch with applied and durable as the
// journal has them, requiring the set isr holds (confirmed members; a new
// term drops pending additions). lease nil is a static primary: every
// peer is required and the lease always held.
func NewPrimary(cfg PrimaryConfig, isr *InSync, lease Lease, applied, durable uint64, nowNs int64) (*Primary, error) {
	g, err := gating.NewGate(gating.Config{MinInSync: cfg.MinInSync})
	if err != nil {
		return nil, err
	}
	p := &Primary{cfg: cfg, gate: g, isr: isr, lease: lease, inherited: applied}
	members := make([]uint32, 0, len(cfg.Peers))
	if lease == nil {
		members = append(members, cfg.Peers...)
	} else {
		isr.StartTerm(cfg.Epoch)
		members = isr.Required(members)
	}
	if cfg.NoGating {
		members = members[:0]
	}
	p.gateVer = 1
	if err := g.SetInSync(p.gateVer, members, nowNs); err != nil {
		return nil, fmt.Errorf("replica: in-sync set: %w", err)
	}
	if len(members) == 0 && lease != nil {
		p.alone, p.aloneStarted = true, true
	}
	g.SetApplied(applied)
	p.Durable(durable)
	g.SetLease(lease == nil) // with a lease, LeaseChanged decides
	return p, nil
}

// Gate is the gate, for status and observers only (read it, never change
// it).
func (p *Primary) Gate() *gating.Gate { return p.gate }

// Epoch is the epoch this primary leads.
func (p *Primary) Epoch() uint64 { return p.cfg.Epoch }

// Applied records that every seq up to seq is applied (and journaled).
func (p *Primary) Applied(seq uint64) { p.gate.SetApplied(seq) }

// Durable records that the journal is durable up to seq.
func (p *Primary) Durable(seq uint64) {
	if p.cfg.NoGating {
		seq = p.gate.Applied() // UNSAFE: outputs leave at apply
	}
	p.gate.SetDurable(seq)
}

// AckVerdict is what a primary did with an ACK.
type AckVerdict uint8

const (
	// AckCounted: an ack of our epoch, given to the gate.
	AckCounted AckVerdict = iota
	// AckOlderEpoch: a standby still follows an older epoch: dropped;
	// the runtime repeats NEW_EPOCH soon (History.StaleAck).
	AckOlderEpoch
	// AckOtherEpoch: stamped with a newer epoch than ours: dropped.
	AckOtherEpoch
	// AckAhead: an ack of our epoch beyond the last seq we sequenced,
	// which no standby of this history can send (Leader.Ack): its
	// directory holds another history (another cluster's, or one restored
	// from elsewhere). Dropped: it never counts towards a release nor
	// towards the in-sync set.
	AckAhead
	// AckForeign: an ack stamped with another history's id than ours
	// (Identity): the standby's directory holds another history, however
	// long. Dropped, as AckAhead.
	AckForeign
)

// Ack records standby from's ack of seq at nowNs; an ack stamped with
// another epoch than ours counts for nothing.
func (p *Primary) Ack(from uint32, epoch, seq uint64, nowNs int64) AckVerdict {
	switch {
	case epoch < p.cfg.Epoch:
		return AckOlderEpoch
	case epoch > p.cfg.Epoch:
		return AckOtherEpoch
	}
	p.gate.OnAck(from, seq, nowNs)
	return AckCounted
}

// AckLeaving is Ack of a standby's last ack before a planned stop
// (wire.Ack.Leaving, gating.Gate.OnLeavingAck): a member is proposed for
// removal from the in-sync set at the next Tick instead of after the
// in-sync timeout, so a planned stop of a standby holds releases up for
// a round trip to the arbiter. started reports that a member started
// leaving (the runtime ticks the in-sync maintenance now).
func (p *Primary) AckLeaving(from uint32, epoch, seq uint64, nowNs int64) (v AckVerdict, started bool) {
	switch {
	case epoch < p.cfg.Epoch:
		return AckOlderEpoch, false
	case epoch > p.cfg.Epoch:
		return AckOtherEpoch, false
	}
	return AckCounted, p.gate.OnLeavingAck(from, seq, nowNs)
}

// RequiredAck is the ack the in-sync set requires now
// (gating.Gate.RequiredAck), or the largest seq when the set is smaller
// than the gate requires (nothing is released): for observers.
func (p *Primary) RequiredAck() uint64 {
	if ack, ok := p.gate.RequiredAck(); ok {
		return ack
	}
	return ^uint64(0)
}

// SetLease says whether the lease is held (a promotion's first check).
func (p *Primary) SetLease(held bool) { p.gate.SetLease(held) }

// JournalFailed stops every release for good: the journal cannot hold
// what would be released.
func (p *Primary) JournalFailed() {
	p.broken = true
	p.gate.SetLease(false)
}

// LeaseChanged decides, between batches, what the lease now asks of this
// primary and updates the gate for it: a LeaseLost or StepDown stops
// releases at once (the runtime then drops what is queued), a
// LeaseRegained resumes them; a NewTerm or StepDown is for the runtime to
// carry out (promote again, or follow as a standby).
func (p *Primary) LeaseChanged(nowNs int64) Decision {
	if p.lease == nil || p.cfg.NoFencing {
		return Decision{Do: Stay, Epoch: p.cfg.Epoch}
	}
	d := PrimaryLease(p.lease, p.cfg.Self, p.cfg.Epoch, p.gate.LeaseHeld(), nowNs)
	if p.broken && d.Do == LeaseRegained {
		// A failed journal stopped releases for good: the lease it still
		// holds (letting it lapse) gives nothing back.
		d.Do = Stay
	}
	switch d.Do {
	case StepDown, LeaseLost:
		p.gate.SetLease(false)
	case LeaseRegained:
		p.gate.SetLease(true)
	}
	return d
}

// MayRelease is the pure query before accepting a command or releasing:
// the journal works and the lease holds at nowNs. It changes nothing.
func (p *Primary) MayRelease(nowNs int64) bool {
	if p.broken {
		return false
	}
	if p.cfg.NoFencing {
		return true // UNSAFE
	}
	return MayRelease(p.lease, p.gate.LeaseHeld(), nowNs)
}

// ConfirmInSync records the set an arbiter's reply carries and, when the
// set in force changed, requires it. It reports whether it changed.
func (p *Primary) ConfirmInSync(r *arbiter.Reply, nowNs int64) bool {
	if !p.isr.Confirm(r) {
		return false
	}
	p.requireInSync(nowNs)
	return true
}

// requireInSync gives the gate the required acks: confirmed members plus
// pending additions.
func (p *Primary) requireInSync(nowNs int64) {
	var buf [gating.MaxStandbys + arbiter.MaxInSyncMembers]uint32
	req := p.isr.Required(buf[:0])
	if p.cfg.NoGating {
		req = req[:0] // UNSAFE: no standby ack is ever required
	}
	p.gateVer++
	if err := p.gate.SetInSync(p.gateVer, req, nowNs); err != nil {
		// More than the gate can track (a full set plus an addition): the
		// set in force stays; the runtime logs it.
		p.inSyncErr = fmt.Errorf("replica: gate in-sync set %v: %w", req, err)
		return
	}
	if len(req) == 0 && !p.alone {
		p.alone, p.aloneStarted = true, true
	} else if len(req) > 0 {
		p.alone = false
	}
}

// Required is how many standby acks the gate requires.
func (p *Primary) Required() int {
	var buf [gating.MaxStandbys]uint32
	return len(p.gate.InSync(buf[:0]))
}

// Tick maintains the in-sync set (with a lease): a caught-up standby is
// required at once; removals and additions become a proposal in Ready.
// A primary whose journal failed maintains nothing: it gave its lease up
// and renews no more, so a proposal would never leave (it was logged ten
// times a second).
func (p *Primary) Tick(nowNs int64) {
	if p.lease == nil || p.broken {
		return
	}
	m := p.isr.Maintain(p.gate, MaintainConfig{Peers: p.cfg.Peers, TimeoutNs: p.cfg.InSyncTimeoutNs, RetryNs: p.cfg.RetryNs, Inherited: p.inherited}, nowNs)
	if m.Added {
		p.requireInSync(nowNs)
	}
	if m.Propose != nil {
		p.propose, p.proposeBase, p.lagging = m.Propose, m.Base, m.Lagging
	}
	p.probeOverdue(nowNs)
}

// probeOverdue adds to the Ready's Probe each member overdue by the
// probe bounds (gating.Gate.Overdue) and not probed in the last
// ProbeAfterNs.
func (p *Primary) probeOverdue(nowNs int64) {
	after := p.cfg.ProbeAfterNs
	if after <= 0 {
		return
	}
	if p.probe == nil {
		p.probe = p.probeBuf[:0]
	}
	for _, id := range p.gate.Overdue(nowNs, after, p.cfg.ProbeSilentNs, p.overdue[:0]) {
		r := p.probeRecord(id)
		if st, _ := p.gate.Standby(id); !r.used || st.ProgressNs > r.atNs {
			r.interval = after // a new episode
		}
		if r.used && nowNs-r.atNs < r.interval || slices.Contains(p.probe, id) {
			continue
		}
		if r.used {
			r.interval = min(2*r.interval, maxProbeBackoff*after)
		}
		r.atNs, r.used = nowNs, true
		p.probe = append(p.probe, id)
	}
}

// probeRecord returns id's probe record, taking the oldest one for it
// when it has none (the table holds MaxStandbys: every member).
func (p *Primary) probeRecord(id uint32) *probeRecord {
	oldest := 0
	for i := range p.probes {
		r := &p.probes[i]
		if r.used && r.id == id {
			return r
		}
		if o := &p.probes[oldest]; o.used && (!r.used || r.atNs < o.atNs) {
			oldest = i
		}
	}
	p.probes[oldest] = probeRecord{id: id}
	return &p.probes[oldest]
}

// Unreachable records that standby id's host refused a probe ("port
// unreachable": no process listens at its address). Unless it acked
// since its last probe, a member is marked (gating.Gate.OnUnreachable):
// it lags at once, and the runtime ticks the in-sync maintenance now, so
// its removal goes to the arbiter without waiting for the in-sync
// timeout. It reports whether a member was marked just now; a refusal of
// a probe this term did not send counts for nothing.
func (p *Primary) Unreachable(id uint32) bool {
	for i := range p.probes {
		if r := p.probes[i]; r.used && r.id == id {
			return p.gate.OnUnreachable(id, r.atNs)
		}
	}
	return false
}

// Proposed records that the proposal of a Ready was handed to the
// arbiter at nowNs, to go under arbiter epoch epoch (the keeper's, which
// may already be past the epoch this primary leads: a new term of its
// own is granted before it starts).
func (p *Primary) Proposed(members []arbiter.NodeID, epoch uint64, nowNs int64) {
	p.isr.Proposed(members, epoch, nowNs)
}

// Ready returns what to do now (nowNs is the moment of release: the lease
// is checked then). It changes nothing; Advance says it was done.
func (p *Primary) Ready(nowNs int64) Ready {
	rd := Ready{RunningAlone: p.aloneStarted, Propose: p.propose, ProposeBase: p.proposeBase, Lagging: p.lagging,
		InSyncError: p.inSyncErr, Probe: p.probe}
	if p.gate.LeaseHeld() && p.MayRelease(nowNs) {
		rd.Release = p.gate.Released()
	}
	return rd
}

// Advance says rd was carried out.
func (p *Primary) Advance(rd Ready) {
	if rd.RunningAlone {
		p.aloneStarted = false
	}
	if rd.Propose != nil {
		p.propose, p.lagging = nil, nil
	}
	if rd.InSyncError != nil {
		p.inSyncErr = nil
	}
	if len(rd.Probe) > 0 {
		p.probe = p.probe[:0]
	}
}
