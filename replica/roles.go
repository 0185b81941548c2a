package replica

import (
	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// Roles is a node's term: which role it plays (primary or standby) in
// which epoch, the fence in front of every epoch it accepts, and its
// History. It decides the role changes — promotion, a new term of its
// own, step-down, following a new primary's NEW_EPOCH and the
// reconciliation that comes with it — and hands them to the runtime as
// a RolesReady, carried out in the order of its fields. Where a step's
// outcome depends on I/O (the drain's flush and sync, building the
// leader, the journal cut of a reconciliation), the runtime reports it
// back through an input (Drained / DrainFailed, Led / LeadFailed,
// Reconciled / ResetFailed), never through a callback. No clock, socket,
// file, lock or goroutine. NewRoles is a standby of epoch 0 whose fence
// accepts every epoch; call Recovered before use. It is kept across
// roles for the process's life.
type Roles struct {
	cfg     RolesConfig
	primary bool
	epoch   uint64 // the epoch led (primary) or followed (standby)
	fence   arbiter.Fence
	hist    History
	pending pendingChange
	// behind: the latest grant was of an epoch this node already knows
	// used; behindGrants counts such grants (WitnessGrant).
	behind       bool
	behindGrants uint64
}

// WitnessGrant judges a grant of epoch the keeper took: a witness that
// grants an epoch this node already knows used (below the highest it
// accepted, or equal to it on a standby, which only a primary renews)
// has lost its state (a deleted record, a replaced box) or is another
// cluster's. No node can lead under such a grant, so the market halts
// rather than reuse an epoch: the operator must raise the witness's
// epoch (seqbus witness override --epoch). It reports the first grant of
// a run of them (the runtime logs it once); a deny (granted false)
// neither starts nor ends a run.
func (r *Roles) WitnessGrant(granted bool, epoch uint64) (alarm bool) {
	if !granted {
		return false
	}
	h := r.fence.Highest()
	behind := epoch < h || (epoch == h && !r.primary)
	if behind {
		r.behindGrants++
	}
	alarm = behind && !r.behind
	r.behind = behind
	return alarm
}

// BehindGrants counts the grants WitnessGrant found behind.
func (r *Roles) BehindGrants() uint64 { return r.behindGrants }

// RolesConfig configures a Roles.
type RolesConfig struct {
	// NoFencing (UNSAFE, mutation tests): a primary ignores a newer
	// NEW_EPOCH and goes on leading (NewEpochIgnore), and no frame is
	// taken for older history (OlderHistory).
	NoFencing bool
}

// pendingChange is the role change the runtime is carrying out, between
// the Ready that started it and the input that reports its outcome.
type pendingChange struct {
	step       pendingStep
	epoch      uint64 // the epoch promoted to
	prev, from uint64 // the promotion's fork: previous epoch, first seq
	newTerm    bool
	ne         wire.NewEpoch // the NEW_EPOCH being followed
	sender     uint32
}

type pendingStep uint8

const (
	pendingNone      pendingStep = iota
	pendingDrain                 // Promote / NewTerm: waiting for Drained or DrainFailed
	pendingLead                  // Drained: waiting for Led or LeadFailed
	pendingReconcile             // NewEpoch: waiting for Reconciled or ResetFailed
)

// NewRoles returns a standby's Roles with cfg; call Recovered once the
// fence holds the journal's highest epoch.
func NewRoles(cfg RolesConfig) Roles { return Roles{cfg: cfg} }

// Primary reports whether this node leads its epoch.
func (r *Roles) Primary() bool { return r.primary }

// Epoch is the epoch led (primary) or followed (standby).
func (r *Roles) Epoch() uint64 { return r.epoch }

// Fence is the term's fence: the highest epoch accepted (from the
// journal, a snapshot, a promotion or a NEW_EPOCH followed).
func (r *Roles) Fence() *arbiter.Fence { return &r.fence }

// History is the term's history (where the epoch's history starts, the
// epochs of older records, the NEW_EPOCH announcements).
func (r *Roles) History() *History { return &r.hist }

// Recovered starts the term after a recovery: the node follows the
// highest epoch its fence holds, its history all one epoch's.
func (r *Roles) Recovered() {
	r.epoch = r.fence.Highest()
	r.hist.Reset()
}

// BecomePrimary makes this node the primary of epoch, which the fence
// must accept (a *arbiter.Stale otherwise, and nothing changes). The
// runtime calls it as it builds the leader (a static primary at start-up,
// or after Drained).
func (r *Roles) BecomePrimary(epoch uint64) error {
	if err := r.fence.Accept(epoch); err != nil {
		return err
	}
	r.primary, r.epoch = true, epoch
	return nil
}

// BecomeStandby makes this node a standby following the highest epoch its
// fence accepted. The runtime calls it as it starts following (resetting
// the follower).
func (r *Roles) BecomeStandby() {
	r.primary, r.epoch = false, r.fence.Highest()
}

// OlderHistory reports whether f is a RETRANSMIT from our current
// primary (primaryID) of records wholly before the followed epoch,
// stamped with the older epoch they were sequenced under
// (History.IsOlder): the runtime notes their epoch (History().Note)
// instead of fencing the frame. Never under UNSAFE NoFencing, which lets
// every frame through the fence anyway. A per-frame query: it changes
// nothing and does not allocate.
func (r *Roles) OlderHistory(f *wire.Frame, primaryID uint32) bool {
	return !r.cfg.NoFencing && r.hist.IsOlder(f, r.epoch, primaryID)
}

// Drop is a role input the runtime only counts.
type Drop uint8

const (
	// DropNone: nothing dropped.
	DropNone Drop = iota
	// DropStale: a NEW_EPOCH older than our epoch (DropStaleEpoch).
	DropStale
	// DropUnknown: a NEW_EPOCH from a node that is not configured
	// (DropUnknownNode).
	DropUnknown
)

var dropNames = [...]string{"none", "stale", "unknown-node"}

func (d Drop) String() string {
	if int(d) < len(dropNames) {
		return dropNames[d]
	}
	return "drop?"
}

// RolesReady is what the runtime carries out for a role input, in the
// order of its fields. Each input sets only the fields it needs; the zero
// value asks for nothing.
type RolesReady struct {
	// Drop: count the input and do nothing else.
	Drop Drop
	// Ignored: UNSAFE NoFencing: a primary ignores a newer NEW_EPOCH.
	Ignored bool
	// Repeat: a NEW_EPOCH of the epoch we follow, repeated: learn Primary
	// as its primary; nothing else changes.
	Repeat bool
	// Regained: the lease is held again; releases resume (log it).
	Regained bool
	// LeaseLost: drop the queued outputs (clients resend) before anything
	// is released again; the node still leads Epoch.
	LeaseLost bool
	// StepDown: before anything else, stop sequencing and releasing, drop
	// the queued outputs (repair from state, not history), record the
	// step-down from From to To, then start following (BecomeStandby and
	// the follower's reset).
	StepDown bool
	// From and To: the epoch this primary led and the newer one that
	// deposed it (StepDown).
	From, To uint64
	// NewTerm: the promotion below is a new term of this process's own
	// leading: the queued outputs are kept (KeepQueued once led).
	NewTerm bool
	// Drain: make every applied record durable (flush, then sync the
	// journal) before leading; then Drained, or DrainFailed (not leading).
	Drain bool
	// Lead: build the leader at Epoch from seq LeadFrom (applied+1), its
	// history forked from PrevEpoch, through BecomePrimary; then Led, or
	// LeadFailed (follow again). Only after the drain.
	Lead                bool
	PrevEpoch, LeadFrom uint64
	// Announce: send NEW_EPOCH (History().Announcement()) now, once the
	// leader is built, and record it (History().Announced).
	Announce bool
	// KeepQueued: move the previous term's queued outputs into the new
	// leader, after the announcement (a new term of our own).
	KeepQueued bool
	// Reconciling: a newer epoch's NEW_EPOCH is being followed: carry out
	// Reconcile after the step-down and before following, then report
	// Reconciled, or ResetFailed (count a journal error; follow nothing).
	Reconciling bool
	// Reconcile: what to do with our history for the new epoch: Keep it;
	// Truncate cuts the journal after CutAfter; Discard resets it all
	// (CutAfter 0) and refetches (marked before the history goes, so a
	// crash does not forget). After a cut the state is rebuilt from
	// what is left.
	Reconcile Action
	CutAfter  uint64
	// Follow: start following Epoch (BecomeStandby and the follower's
	// reset) after the reconciliation, then learn Primary as its primary.
	Follow bool
	// Primary: the node that leads Epoch (Follow, or a repeated
	// NEW_EPOCH): learn it as the primary.
	Primary uint32
	// Epoch: the epoch the change concerns.
	Epoch uint64
}

// Lease carries out the lease's decision d (Primary.LeaseChanged on a
// primary, StandbyLease on a standby) as a role change. A decision that
// does not fit the role (a step-down of a standby) or names an epoch not
// newer than ours for a promotion or a step-down changes nothing.
func (r *Roles) Lease(d Decision) RolesReady {
	newer := d.Epoch > r.epoch
	switch {
	case newer && (d.Do == Promote && !r.primary || d.Do == NewTerm && r.primary):
		r.pending = pendingChange{step: pendingDrain, epoch: d.Epoch, newTerm: d.Do == NewTerm}
		return RolesReady{NewTerm: d.Do == NewTerm, Drain: true, Epoch: d.Epoch}
	case !r.primary:
		return RolesReady{}
	case d.Do == StepDown && newer:
		return r.stepDown(d.Epoch)
	case d.Do == LeaseRegained:
		return RolesReady{Regained: true, Epoch: r.epoch}
	case d.Do == LeaseLost:
		return RolesReady{LeaseLost: true, Epoch: r.epoch}
	}
	return RolesReady{}
}

// stepDown stops leading for the newer epoch higher; a new term under
// way is abandoned.
func (r *Roles) stepDown(higher uint64) RolesReady {
	rd := RolesReady{StepDown: true, From: r.epoch, To: higher}
	r.pending = pendingChange{}
	r.BecomeStandby()
	rd.Epoch = r.epoch
	return rd
}

// DrainFailed says the drain's flush or sync failed: the node does not
// lead (it stays in its role, and may be granted the lease again).
func (r *Roles) DrainFailed() { r.pending = pendingChange{} }

// Drained says every applied record (up to applied) is durable: lead
// from applied+1, the fork's previous epoch that of our last record in
// log (ForkEpoch). Without a promotion under way it asks for nothing.
func (r *Roles) Drained(applied uint64, log Log) RolesReady {
	p := &r.pending
	if p.step != pendingDrain {
		return RolesReady{}
	}
	p.step, p.prev, p.from = pendingLead, ForkEpoch(applied, p.epoch, log), applied+1
	return RolesReady{Lead: true, Epoch: p.epoch, PrevEpoch: p.prev, LeadFrom: p.from, NewTerm: p.newTerm}
}

// LeadFailed says the leader could not be built: the node follows the
// highest epoch its fence accepted.
func (r *Roles) LeadFailed() RolesReady {
	r.pending = pendingChange{}
	r.BecomeStandby()
	return RolesReady{Follow: true, Epoch: r.epoch}
}

// Led says the leader of the promotion is built: our own history is the
// epoch's from where it forks; announce it (and keep the queued outputs
// of a new term).
func (r *Roles) Led() RolesReady {
	p := r.pending
	if p.step != pendingLead || !r.primary || r.epoch != p.epoch {
		return RolesReady{}
	}
	r.pending = pendingChange{}
	r.hist.Lead(p.epoch, p.prev, p.from)
	return RolesReady{Announce: true, KeepQueued: p.newTerm, Epoch: p.epoch, PrevEpoch: p.prev, LeadFrom: p.from}
}

// NewEpoch decides what NEW_EPOCH ne, from node sender (known: a
// configured peer), means to this node, which applied up to applied
// and journaled it in log: older than our epoch, drop it; our epoch
// repeated, learn its primary (and, after a restart, where its history
// starts); UNSAFE NoFencing on a primary, ignore it;
// from an unknown node, drop it; else a primary steps down, the history
// is reconciled (History.Reconcile), and once the runtime carried that
// out (Reconciled) the node follows. It does not allocate.
func (r *Roles) NewEpoch(ne *wire.NewEpoch, sender uint32, known bool, applied uint64, log Log) RolesReady {
	switch newEpochStep(ne.Epoch, r.epoch, r.primary, r.cfg.NoFencing) {
	case NewEpochStale:
		return RolesReady{Drop: DropStale, Epoch: ne.Epoch}
	case NewEpochRepeat:
		if !r.primary && r.hist.Verified() != ne.Epoch {
			// A restart fenced at this epoch (storage.RaiseFence, or
			// records of it): what we hold is a prefix of its history
			// (we followed or led it before the fence was recorded), but
			// where it starts was forgotten (History.Reset). Take it from
			// the repeat, so the older records its primary resends under
			// their own epochs are accepted (OlderHistory): a node fenced
			// at the epoch with none of its records needs them.
			r.hist.Follow(ne)
		}
		return RolesReady{Repeat: true, Primary: sender, Epoch: ne.Epoch}
	case NewEpochIgnore:
		return RolesReady{Ignored: true, Epoch: ne.Epoch}
	}
	if !known {
		return RolesReady{Drop: DropUnknown, Epoch: ne.Epoch}
	}
	var rd RolesReady
	if r.primary {
		rd = r.stepDown(ne.Epoch)
	}
	rd.Epoch, rd.Reconciling = ne.Epoch, true
	rd.Reconcile = r.hist.Reconcile(ne, applied, log)
	switch rd.Reconcile {
	case Truncate:
		rd.CutAfter = ne.LastSeq
	case Discard:
		rd.CutAfter = 0
	}
	r.pending = pendingChange{step: pendingReconcile, ne: *ne, sender: sender}
	return rd
}

// ResetFailed says the reconciliation's journal cut or rebuild failed:
// the node follows nothing new (its fence and history stay as they were).
func (r *Roles) ResetFailed() { r.pending = pendingChange{} }

// Reconciled says the reconciliation NewEpoch asked for was carried out:
// the fence accepts the new epoch, the history is the new primary's from
// its fork, and the node follows it (Follow, Primary).
func (r *Roles) Reconciled() RolesReady {
	p := r.pending
	if p.step != pendingReconcile {
		return RolesReady{}
	}
	r.pending = pendingChange{}
	// A fence already past ne.Epoch refuses it, and BecomeStandby below
	// then follows the fence's highest (as the runtime always did).
	_ = r.fence.Accept(p.ne.Epoch)
	r.epoch = p.ne.Epoch
	r.hist.Follow(&p.ne)
	r.BecomeStandby()
	return RolesReady{Follow: true, Primary: p.sender, Epoch: r.epoch}
}
