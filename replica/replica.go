package replica

import (
	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// Replica is one node's protocol state across its roles, in the shape of
// etcd/raft's RawNode: it owns the term (Roles), the in-sync set, the
// disk watch, the history identity, the follower core, the leader core
// of the term it leads (nil while a standby), the session table (kept
// across terms) and the next term's memory. A is the runtime's address
// type (netip.AddrPort in node).
//
// It holds the rules that need more than one of these cores (which
// frames a standby takes, whether to ask for the lease or decline a
// grant, when acks are held) and the term's hand-overs (Lead, EndTerm, the memory kept between
// terms). Like the cores it composes, it has no clock, socket, file,
// lock or goroutine: the runtime passes in what its storage knows (the
// journal broken, the directory new, the highest epoch it holds) and
// carries out what comes back.
type Replica[A comparable] struct {
	roles    Roles
	isr      InSync
	disk     DiskWatch
	ident    Identity
	fol      *Follower
	ldr      *Leader[A]
	sessions *Sessions[A]
	// spare: the next term's memory (LeaderMemory), made by the runtime
	// ahead and left by each term, so no promotion allocates it.
	spare *LeaderMemory
	down  StepDownRecord
	peers map[uint32]A
	// addr: the followed primary's address, from peers (LearnPrimary).
	addr    A
	hasAddr bool
}

// ReplicaConfig configures a Replica.
type ReplicaConfig[A comparable] struct {
	// Roles: UNSAFE NoFencing here is the Follower's too.
	Roles       RolesConfig
	DiskStallNs int64 // DiskWatch's timeout
	Follower    FollowerConfig
	MaxSessions int
	// Peers: every other configured node of the cluster and its address.
	Peers map[uint32]A
	// Memory is the first term's memory (nil: the first promotion
	// allocates it).
	Memory *LeaderMemory
}

// NewReplica returns a standby's Replica with nothing applied (the
// runtime recovers, then Roles().Recovered and Follower().Reset).
func NewReplica[A comparable](cfg ReplicaConfig[A]) *Replica[A] {
	cfg.Follower.Standby.NoFencing = cfg.Roles.NoFencing
	return &Replica[A]{
		roles:    NewRoles(cfg.Roles),
		disk:     NewDiskWatch(cfg.DiskStallNs),
		fol:      NewFollower(cfg.Follower),
		sessions: NewSessions[A](cfg.MaxSessions),
		spare:    cfg.Memory,
		peers:    cfg.Peers,
	}
}

// Roles is the term: the role, the epoch, its fence and history.
func (r *Replica[A]) Roles() *Roles { return &r.roles }

// InSync is the in-sync set, kept across roles.
func (r *Replica[A]) InSync() *InSync { return &r.isr }

// Disk is the disk watch.
func (r *Replica[A]) Disk() *DiskWatch { return &r.disk }

// Identity is the history the directory holds.
func (r *Replica[A]) Identity() *Identity { return &r.ident }

// Follower is the standby side (kept across roles; Reset when following
// anew).
func (r *Replica[A]) Follower() *Follower { return r.fol }

// Leader is the leader core of the term led (nil while a standby).
func (r *Replica[A]) Leader() *Leader[A] { return r.ldr }

// Sessions is the client session table, kept across terms.
func (r *Replica[A]) Sessions() *Sessions[A] { return r.sessions }

// Peer is configured node id's address; false: not a node of the
// cluster.
func (r *Replica[A]) Peer(id uint32) (A, bool) {
	a, ok := r.peers[id]
	return a, ok
}

// PrimaryAddr is the followed primary's address; false: none known yet.
func (r *Replica[A]) PrimaryAddr() (A, bool) { return r.addr, r.hasAddr }

// Memory is the memory the next term leads with (LeaderConfig.Memory;
// nil: it allocates its own).
func (r *Replica[A]) Memory() *LeaderMemory { return r.spare }

// Lead makes l the leader core of the term now led; the memory kept for
// it is l's from now on.
func (r *Replica[A]) Lead(l *Leader[A]) { r.ldr, r.spare = l, nil }

// Retired keeps the memory of prev, a term this node led before the one
// it leads now (a new term of its own), for the next.
func (r *Replica[A]) Retired(prev *Leader[A]) { r.spare = prev.Memory() }

// StepDownRecord describes the latest step-down, for checkers: the epoch
// led, the newer epoch that deposed it, and the epoch the node's own
// keeper held at that moment (a keeper epoch at or above To would mean
// the node stepped down from an epoch it was granted itself).
type StepDownRecord struct {
	Count, From, To, KeeperEpoch uint64
}

// EndTerm ends the term led, deposed by a newer epoch (from: the epoch
// led; to: the newer one; keeperEpoch: what the runtime's lease keeper
// held then): what waits in the gate is dropped (clients resend) and
// counted in dropped, the term's memory is kept for the next, and the
// node leads nothing until Lead. The runtime then follows as a standby.
func (r *Replica[A]) EndTerm(from, to, keeperEpoch uint64) (dropped int) {
	dropped = r.ldr.DropQueued()
	r.down = StepDownRecord{Count: r.down.Count + 1, From: from, To: to, KeeperEpoch: keeperEpoch}
	r.spare, r.ldr = r.ldr.Memory(), nil
	return dropped
}

// LastStepDown is the latest EndTerm's record (zero: none).
func (r *Replica[A]) LastStepDown() StepDownRecord { return r.down }

// MayLeadNow is the query before a command is accepted or a replay
// answered: this node leads, its journal works and the lease holds at
// nowNs. It changes nothing.
func (r *Replica[A]) MayLeadNow(nowNs int64) bool {
	return r.roles.Primary() && r.ldr.MayLead(nowNs)
}

// WantLead is whether the node asks the arbiter for the lease (the
// package's WantLead over the cores' state): broken is the runtime's
// journal failed for good, refetching its rebuild of a journal it set
// aside.
func (r *Replica[A]) WantLead(broken, refetching bool) bool {
	unusable := broken || r.disk.Stalled() || r.fol.Diverged() || r.ident.Foreign()
	return WantLead(unusable, refetching, r.roles.Primary(), r.fol.Fetching())
}

// DeclineLead is whether a grant of epoch must be given back unled, and
// why (the package's DeclineLead over the identity and the in-sync set
// the grant carried); newDirectory is the runtime's directory marker.
func (r *Replica[A]) DeclineLead(newDirectory bool, epoch uint64) Decline {
	return DeclineLead(r.ident.Foreign(), newDirectory, r.isr.Version(), epoch, len(r.isr.Members()))
}

// HoldAcks holds the follower's acks while the directory is new or
// holds another history than its primary's.
func (r *Replica[A]) HoldAcks(newDirectory bool) { r.fol.HoldAcks(newDirectory || r.ident.Foreign()) }

// GiveBackDeclined is whether a lease given up is given back declined,
// so the arbiter may undo the grant: the node never led nor caught up
// (a new directory), or holds another history.
func (r *Replica[A]) GiveBackDeclined(newDirectory bool) bool {
	return newDirectory || r.ident.Foreign()
}

// LeaseDecision is what the lease as k sees it at nowNs means to the
// role held: a primary's PrimaryLease (through its Primary), a
// standby's StandbyLease. It changes nothing; Roles().Lease carries it.
func (r *Replica[A]) LeaseDecision(k Lease, nowNs int64) Decision {
	if r.roles.Primary() {
		return r.ldr.Primary().LeaseChanged(nowNs)
	}
	return StandbyLease(k, r.roles.Epoch(), nowNs)
}

// Admission is what a standby does with a frame of the replication
// stream before its payload: Admit's answer, carried out in the order
// of its fields.
type Admission struct {
	// NewPrimary: the frame's sender now leads the followed epoch (it
	// passed the fence, and another node did before, or none), and is
	// addressed (PrimaryAddr): the runtime carries out the Follower's
	// Ready (PrimaryChanged restarted a fetch under way from it) before
	// anything else of the frame.
	NewPrimary bool
	// AskNewEpoch: send the sender an ACK stamped with our epoch, so it
	// repeats its NEW_EPOCH now (at most once a millisecond).
	AskNewEpoch bool
	// AskHistory: send the primary an ACK flagged AskHistory, which it
	// answers with a HEARTBEAT naming its history (at most once a
	// millisecond).
	AskHistory bool
	// Drop: why the frame goes no further (count it); AdmitTake: it does.
	Drop AdmitDrop
}

// AdmitDrop is why Admit stops a frame.
type AdmitDrop uint8

const (
	// AdmitTake: the runtime takes the frame.
	AdmitTake AdmitDrop = iota
	// AdmitStale: an older epoch, or one the fence refuses.
	AdmitStale
	// AdmitAwaitNewEpoch: a newer epoch whose NEW_EPOCH has not
	// arrived (it says where its history forks from ours).
	AdmitAwaitNewEpoch
	// AdmitUnknownNode: a frame that passed the fence from a node not
	// configured (Peers); a runtime that drops those first never sees
	// it.
	AdmitUnknownNode
	// AdmitAwaitHistory: DATA, or a NEED_SNAPSHOT, while the standby does
	// not know that its primary leads its history (Identity.Confirmed):
	// NAKed again, or asked again, once it does. The window must not
	// take what is not applied at once (an in-order entry's payload is
	// the receive buffer's).
	AdmitAwaitHistory
)

var admitDropNames = [...]string{"take", "stale", "await-new-epoch", "unknown-node", "await-history"}

func (d AdmitDrop) String() string {
	if int(d) < len(admitDropNames) {
		return admitDropNames[d]
	}
	return "admit?"
}

// Admit judges a frame of the replication stream (DATA, RETRANSMIT,
// HEARTBEAT, HASH, NEED_SNAPSHOT, SNAPSHOT_CHUNK) that arrived at a
// standby at nowNs from a configured node: the fence (an older epoch is
// stale; a newer one waits for its NEW_EPOCH, whose repeat it asks for),
// except for a RETRANSMIT of records from before the followed epoch,
// whose epoch it notes (History.Note); the primary it learns; and, for
// DATA and NEED_SNAPSHOT, whether its primary's history is known to be
// this directory's, asking the primary for it when not. A HEARTBEAT's
// history id is judged after (HeardHistory). Other frame types pass
// untouched.
func (r *Replica[A]) Admit(f *wire.Frame, nowNs int64) Admission {
	var a Admission
	st := r.fol.Standby()
	switch f.Type {
	case wire.TypeData, wire.TypeRetransmit:
		if r.roles.OlderHistory(f, st.Primary()) {
			// Records from before the current epoch, resent by our
			// primary under the epoch they were sequenced in.
			r.roles.hist.Note(f.Seq, f.LastSeq(), f.Epoch)
		} else if r.fence(f, nowNs, &a) {
			return a
		}
		r.confirmed(nowNs, &a)
	case wire.TypeNeedSnapshot:
		if !r.fence(f, nowNs, &a) {
			r.confirmed(nowNs, &a) // no fetch into a directory of unknown history
		}
	case wire.TypeHeartbeat, wire.TypeHash, wire.TypeSnapshotChunk:
		r.fence(f, nowNs, &a)
	}
	return a
}

// fence applies the fence to f and learns its sender as the primary
// when it passes; true: f is dropped (a.Drop says why).
func (r *Replica[A]) fence(f *wire.Frame, nowNs int64, a *Admission) (dropped bool) {
	st := r.fol.Standby()
	switch st.Fence(f.Epoch, r.roles.Epoch(), r.roles.fence.Refuses(f.Epoch)) {
	case Stale:
		a.Drop = AdmitStale
		return true
	case AwaitNewEpoch:
		a.Drop, a.AskNewEpoch = AdmitAwaitNewEpoch, st.AskNewEpoch(nowNs)
		return true
	}
	changed, known := r.LearnPrimary(f.Node, nowNs)
	if !known {
		a.Drop = AdmitUnknownNode
		return true
	}
	a.NewPrimary = changed
	return false
}

// LearnPrimary notes that node id leads the followed epoch (a frame of
// it passed the fence, or its NEW_EPOCH was followed) and reports
// whether it is another node than the one known: then it is addressed
// (PrimaryAddr) and the Follower told (PrimaryChanged: a fetch under way
// restarts from it), and the runtime carries out the Follower's Ready.
// A node not configured is not learnt (known false).
func (r *Replica[A]) LearnPrimary(id uint32, nowNs int64) (changed, known bool) {
	st := r.fol.Standby()
	if id == st.Primary() {
		st.SawPrimary(id, nowNs) // the common case: no lookup
		return false, true
	}
	addr, ok := r.peers[id]
	if !ok {
		return false, false
	}
	st.SawPrimary(id, nowNs)
	r.addr, r.hasAddr = addr, true
	r.fol.Addressed()
	r.fol.PrimaryChanged(nowNs)
	return true, true
}

// ReplyStep is what a reply of the arbiter means (Replica.LeaseReply),
// beyond the lease itself (LeaseDecision, between batches).
type ReplyStep struct {
	// Latched: the arbiter pinned another history than the directory's,
	// the first time (log it; acks are held from now on: HoldAcks).
	Latched bool
	// WitnessBehind: the first grant of an epoch this cluster already
	// used (Roles.WitnessGrant: log it; no node leads under it).
	WitnessBehind bool
	// InSyncConfirmed: a primary's proposed in-sync set was confirmed
	// (the gate requires it now): log it and release.
	InSyncConfirmed bool
}

// LeaseReply takes a reply the lease keeper took: the history id the
// arbiter pinned (Identity.HeardArbiter), a grant behind what this node
// knows used (Roles.WitnessGrant), and the in-sync set a grant carries,
// which a primary's gate requires at once (Primary.ConfirmInSync) and a
// standby keeps for when it leads (InSync.Confirm).
func (r *Replica[A]) LeaseReply(rp *arbiter.Reply, nowNs int64) ReplyStep {
	var s ReplyStep
	s.Latched = r.ident.HeardArbiter(rp.History)
	s.WitnessBehind = r.roles.WitnessGrant(rp.Granted(), rp.Epoch)
	if r.roles.Primary() {
		s.InSyncConfirmed = r.ldr.Primary().ConfirmInSync(rp, nowNs)
	} else {
		r.isr.Confirm(rp)
	}
	return s
}

// CaughtUp reports whether a standby whose directory is new, or which
// is rebuilding a history it discarded (refetching), has caught up with
// a primary it follows: only such a standby asks, so a steady one's
// batch does none of it.
func (r *Replica[A]) CaughtUp(newDirectory, refetching bool) bool {
	return (newDirectory || refetching) && r.fol.Standby().Primary() != 0 && r.fol.CaughtUp()
}

// AckStep is what a standby's ACK means to the primary (Replica.Ack),
// carried out in the order of its fields.
type AckStep struct {
	// Verdict: the Leader's (counted; refused ones go no further).
	Verdict AckVerdict
	// Announce: the standby still follows an older epoch: repeat
	// NEW_EPOCH now (History.StaleAck: at most once a millisecond).
	Announce bool
	// Leaving: an in-sync member said it is stopping (its last ack):
	// its removal is proposed now.
	Leaving bool
}

// Ack takes a standby's ACK on the primary: the Leader's Ack, or
// AckLeaving for one flagged Leaving (wire.FlagLeaving).
func (r *Replica[A]) Ack(f *wire.Frame, nowNs int64) AckStep {
	var s AckStep
	if f.Flags&wire.FlagLeaving != 0 {
		s.Verdict, s.Leaving = r.ldr.AckLeaving(f.Node, f.Epoch, f.Seq, wire.HistoryOf(f), nowNs)
	} else {
		s.Verdict = r.ldr.Ack(f.Node, f.Epoch, f.Seq, wire.HistoryOf(f), nowNs)
	}
	s.Announce = s.Verdict == AckOlderEpoch && r.roles.hist.StaleAck(nowNs)
	return s
}

// NewEpoch is Roles().NewEpoch for a NEW_EPOCH from sender, which is
// known when it is a configured node (Peers).
func (r *Replica[A]) NewEpoch(ne *wire.NewEpoch, sender uint32, applied uint64, log Log) RolesReady {
	_, known := r.peers[sender]
	return r.roles.NewEpoch(ne, sender, known, applied, log)
}

// confirmed drops a frame while the primary's history is unconfirmed,
// asking for it once a millisecond when the primary's address is known
// and the directory is not latched foreign.
func (r *Replica[A]) confirmed(nowNs int64, a *Admission) {
	if r.ident.Confirmed() {
		return
	}
	a.Drop = AdmitAwaitHistory
	st := r.fol.Standby()
	a.AskHistory = !r.ident.Foreign() && r.hasAddr && st.Primary() != 0 && st.AskNewEpoch(nowNs)
}

// HeardHistory judges the history id a primary's HEARTBEAT or NEW_EPOCH
// carries (Identity.HeardPrimary): take the frame, or drop it (another
// history's); adopt: the runtime records id durably first, then calls
// Identity().Adopted (a failure: the journal failed, drop the frame);
// latched: the first frame of another history (log it; acks are held
// from now on: HoldAcks).
func (r *Replica[A]) HeardHistory(id uint64) (take, adopt, latched bool) {
	v, first := r.ident.HeardPrimary(id)
	switch v {
	case AdoptHistory:
		return true, true, false
	case ForeignHistory:
		return false, false, first
	}
	return true, false, false
}
