package replica

import (
	"slices"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/gating"
)

// The in-sync set (Kafka's ISR) lives at the witness, versioned with the
// lease: the standbys that may be promoted. The primary requires the acks
// of every member, so every member holds everything released.
//
//   - A member that lags for the in-sync timeout is proposed for removal
//     with the next renew; one that said it is stopping (a planned stop,
//     gating.Gate.Leaving) at once, and it is not proposed again until
//     it acks anew. It lags when it is silent (no ack at all: dead,
//     or its acks are lost) or stalled: an output waits above its ack and
//     its ack has not advanced to cover it (gating.Gate.Lagging). With
//     nothing waiting, only silence removes. The primary stops waiting for
//     it only after the witness confirms, so a standby is never dropped
//     from the required acks while it could still be promoted.
//   - A non-member whose ack has reached released is proposed for
//     addition, and its ack is required from that moment (stricter than
//     the witness), so released cannot run ahead of it while the witness
//     decides; if the witness refuses, the local requirement is dropped.
//     Released here is never below the history the term inherited
//     (MaintainConfig.Inherited): the old primary may have released all
//     of it, and a member must hold everything ever released.
//   - With the set empty the primary runs alone (durable on its own disk
//     only) and says so loudly; MinInSync > 0 makes it halt instead.

// InSync is a node's view of the in-sync set: what the witness confirmed,
// what this primary proposed and what it already requires locally. It is
// kept across roles (a standby learns the set from its grants), so a
// promoted standby requires the set its lease came with. The zero value
// is an empty set no witness has confirmed yet.
type InSync struct {
	version  uint64           // the witness's version in force (0: none yet)
	members  []arbiter.NodeID // confirmed by the witness
	adding   []arbiter.NodeID // proposed additions, already required locally
	proposed []arbiter.NodeID // last proposal sent (nil: none in flight)
	sentNs   int64            // when it was sent
	// proposedEpoch: the arbiter epoch the proposal went under (the
	// keeper's): the only epoch whose renew can carry it to the arbiter.
	proposedEpoch uint64
	// Maintain's scratch, so a tick that proposes nothing allocates
	// nothing (it runs every tick of a primary).
	lagBuf     [gating.MaxStandbys]uint32
	desiredBuf [arbiter.MaxInSyncMembers + gating.MaxStandbys]arbiter.NodeID
}

// Version is the witness's version in force (0 before any grant).
func (s *InSync) Version() uint64 { return s.version }

// Members are the members the witness confirmed (read-only; valid until
// the next call that changes s).
func (s *InSync) Members() []arbiter.NodeID { return s.members }

// Adding are the additions proposed and already required locally
// (read-only, like Members).
func (s *InSync) Adding() []arbiter.NodeID { return s.adding }

// Confirm records the set an arbiter's reply carries. A grant with a
// version below ours is a resend answered from a cache and is ignored.
// It reports whether the set in force changed: the runtime then gives
// the gate the new Required set.
func (s *InSync) Confirm(r *arbiter.Reply) bool {
	if !r.Granted() || r.InSyncVersion < s.version {
		return false
	}
	if r.InSyncVersion == s.version && slices.Equal(r.Members.Slice(), s.members) {
		return false
	}
	moved := r.InSyncVersion > s.version
	s.version = r.InSyncVersion
	s.members = slices.Clone(r.Members.Slice())
	// Additions the witness now confirms are no longer pending; refused
	// ones stop being required. A new version without a pending addition
	// refuses it too: every proposal in flight was based on an older
	// version (the witness compares and sets on it), so none can add it
	// any more. Keeping it required would wait for a standby the witness
	// will never list: if it then died, nothing would be released again.
	s.adding = slices.DeleteFunc(s.adding, func(id arbiter.NodeID) bool {
		return slices.Contains(s.members, id) || !slices.Contains(s.proposed, id) || moved
	})
	s.proposed = nil
	return true
}

// StartTerm begins a term at epoch. A proposal that went under epoch
// itself (a primary's new term of its own, granted while the proposal was
// in flight) may still be accepted by the arbiter: its additions stay
// required until a grant resolves it (Confirm), or the term could release
// past a standby the arbiter has just listed. Any other pending proposal
// and its additions are forgotten: a backend sends a proposal only under
// the epoch it was made in, so no arbiter can accept it now, and the term
// requires exactly the confirmed set until it proposes anew.
func (s *InSync) StartTerm(epoch uint64) {
	if s.proposed != nil && s.proposedEpoch == epoch {
		return
	}
	s.adding, s.proposed = nil, nil
}

// Required appends to dst the acks the gate must require: the confirmed
// members plus pending additions, each once.
func (s *InSync) Required(dst []uint32) []uint32 {
	for _, m := range s.members {
		dst = append(dst, uint32(m))
	}
	for _, m := range s.adding {
		if !slices.Contains(dst, uint32(m)) {
			dst = append(dst, uint32(m))
		}
	}
	return dst
}

// Maintenance is what Maintain decided.
type Maintenance struct {
	// Added: a caught-up standby is required from now on; the runtime
	// gives the gate the new Required set before anything is released.
	Added bool
	// Propose, when non-nil, is the set to propose to the arbiter (sorted)
	// with base version Base; the runtime calls Proposed once it is
	// handed to the arbiter.
	Propose []arbiter.NodeID
	Base    uint64
	// Lagging are the members found lagging (for the log).
	Lagging []uint32
}

// MaintainConfig are Maintain's limits.
type MaintainConfig struct {
	// Peers are the configured standbys, sorted (candidates for addition).
	Peers []uint32
	// TimeoutNs is the in-sync timeout; RetryNs the arbiter's retry (a
	// proposal is in flight for 2*RetryNs).
	TimeoutNs, RetryNs int64
	// Inherited is the last seq of the history this term began with (the
	// primary's applied at promotion). A previous primary may have
	// released any of it, while this term's gate starts from nothing
	// released: a standby is caught up only once its ack reaches both.
	Inherited uint64
}

// Maintain proposes removals of lagging members (silent or stalled, see
// gating.Gate.Lagging) and additions of caught-up standbys, against the
// gate's view at nowNs. A removed standby is re-added once its ack
// reaches released again. It changes only s (additions are recorded as
// pending); nothing happens before a witness confirmed a set.
func (s *InSync) Maintain(g *gating.Gate, cfg MaintainConfig, nowNs int64) Maintenance {
	var m Maintenance
	if s.version == 0 || (s.proposed != nil && nowNs-s.sentNs < cfg.RetryNs*2) {
		return m // no witness set yet, or a proposal is in flight
	}
	m.Lagging = g.Lagging(nowNs, cfg.TimeoutNs, s.lagBuf[:0])
	desired := append(s.desiredBuf[:0], s.members...)
	for _, id := range m.Lagging {
		desired = slices.DeleteFunc(desired, func(x arbiter.NodeID) bool { return uint32(x) == id })
	}
	// A pending addition stays in every proposal until a grant resolves
	// it, even once it lags or left: its proposal may have been lost with
	// the witness's version unchanged, which no grant resolves, while it
	// stays required here (the proposal may yet arrive). Left out, the
	// set wanted could be the set in force: nothing proposed, and a dead
	// addition waited for for good. Proposed again, the witness lists it
	// (then it is removed as any lagging member) or a newer version
	// refuses it (Confirm).
	for _, id := range s.adding {
		if !slices.Contains(desired, id) && len(desired) < arbiter.MaxInSyncMembers {
			desired = append(desired, id)
		}
	}
	released := max(g.Released(), cfg.Inherited)
	for _, id := range cfg.Peers {
		nid := arbiter.NodeID(id)
		if slices.Contains(desired, nid) || slices.Contains(m.Lagging, id) {
			continue
		}
		st, ok := g.Standby(id)
		if !ok || st.Leaving || st.Unreachable || st.AckSeq < released || nowNs-st.LastAckNs >= cfg.TimeoutNs || len(desired) >= arbiter.MaxInSyncMembers {
			continue
		}
		desired = append(desired, nid)
		if !slices.Contains(s.adding, nid) && !slices.Contains(s.members, nid) {
			s.adding = append(s.adding, nid)
			m.Added = true // require its ack from now on
		}
	}
	slices.Sort(desired)
	if !slices.Equal(desired, s.members) {
		// A proposal outlives this call (in flight, in the Ready): its
		// own copies, allocated only when there is one.
		m.Propose, m.Base = slices.Clone(desired), s.version
		m.Lagging = slices.Clone(m.Lagging)
	} else {
		m.Lagging = nil
	}
	return m
}

// Proposed records that proposal p was handed to the arbiter at nowNs,
// to go under arbiter epoch epoch (the keeper's).
func (s *InSync) Proposed(p []arbiter.NodeID, epoch uint64, nowNs int64) {
	s.proposed, s.proposedEpoch, s.sentNs = p, epoch, nowNs
}
