package etcdarb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/seqbus/seqbus/arbiter"
)

// This file is the pure part of the package: the values stored in etcd,
// the state read from the three keys, and the rules that turn it into a
// grant or a deny. Nothing here talks to etcd, so the rules are tested
// (table, property, fuzz) without a cluster.

// InSync is the in-sync set stored under <prefix>/<stream>/insync, with
// the last holder from <prefix>/<stream>/term.
type InSync struct {
	// Version grows by one with every change of Members and with every
	// new term, exactly as at the UDP witness; 0 before any grant.
	Version uint64
	// Members are the standbys that may be promoted (sorted, at most
	// arbiter.MaxInSyncMembers, never LastHolder).
	Members arbiter.InSyncSet
	// LastHolder is the node that was granted the highest epoch (it may
	// take the lease back after a lapse); NodeNone in a fresh cluster.
	LastHolder arbiter.NodeID
	// History is the cluster's pinned history id (0: none yet), stored
	// in the insync value: a node asking with another is refused, as at
	// the UDP witness (arbiter.Arbiter.ForeignHistory).
	History uint64
}

// kv is one key as read from etcd, reduced to what the rules need.
type kv struct {
	present bool
	value   []byte
	// createRev and modRev are etcd's revisions of the key; lease is the
	// etcd lease ID it is attached to (0 for none).
	createRev, modRev, lease int64
}

// state is the three keys of a stream read in one revision.
type state struct {
	// leader is the live holder (NodeNone when the leader key is absent:
	// its etcd lease expired or was never granted). leaderRev is its
	// CreateRevision, which IS the holder's epoch; leaderLease its lease.
	leader      arbiter.NodeID
	leaderRev   int64
	leaderLease int64
	// termRev is the term key's ModRevision: the epoch of the last grant
	// of a new term (0 in a fresh cluster); the term key's value is
	// inSync.LastHolder.
	termRev int64
	// inSyncRev is the insync key's ModRevision (0 when absent), the
	// compare-and-set token for every change of the set.
	inSyncRev int64
	inSync    InSync
}

// highestEpoch is the highest epoch ever granted: the live holder's, else
// the last term's. A deny carries it so a deposed keeper learns its epoch
// is dead.
func (s *state) highestEpoch() uint64 { return uint64(max(s.leaderRev, s.termRev, 0)) }

// inSyncValue is the JSON stored under the insync key. JSON rather than a
// binary record so that `etcdctl get --prefix /seqbus` is readable by an
// operator; it is written a few times per failover, never on the hot path.
type inSyncValue struct {
	Version uint64   `json:"version"`
	Members []uint32 `json:"members"`
	History uint64   `json:"history,omitempty"`
}

// encodeInSync returns the insync value for version and members (sorted,
// valid: the caller built members with arbiter.MakeInSyncSet) and the
// pinned history id (0: none).
func encodeInSync(version uint64, members *arbiter.InSyncSet, history uint64) []byte {
	v := inSyncValue{Version: version, Members: make([]uint32, 0, members.N), History: history}
	for _, m := range members.Slice() {
		v.Members = append(v.Members, uint32(m))
	}
	b, err := json.Marshal(v)
	if err != nil {
		// A struct of integers always marshals.
		panic(fmt.Sprintf("etcdarb: marshal in-sync value: %v", err))
	}
	return b
}

// maxInSyncValueBytes bounds what decodeInSync accepts: eight 10-digit
// members and a 20-digit version fit in well under 256 bytes; anything
// longer is not ours and is refused before the JSON decoder sees it.
const maxInSyncValueBytes = 256

// decodeInSync parses an insync value. It refuses (ErrCorruptValue) a value
// that is too long, not exactly our JSON, version 0, or a member list that
// is not sorted, unique, non-zero and at most arbiter.MaxInSyncMembers.
func decodeInSync(b []byte) (version uint64, members arbiter.InSyncSet, history uint64, err error) {
	if len(b) > maxInSyncValueBytes {
		return 0, members, 0, fmt.Errorf("%w: in-sync value of %d bytes", ErrCorruptValue, len(b))
	}
	var v inSyncValue
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return 0, members, 0, fmt.Errorf("%w: in-sync value %q: %v", ErrCorruptValue, b, err)
	}
	if d.More() {
		return 0, members, 0, fmt.Errorf("%w: in-sync value %q has trailing data", ErrCorruptValue, b)
	}
	if v.Version == 0 || len(v.Members) > arbiter.MaxInSyncMembers {
		return 0, members, 0, fmt.Errorf("%w: in-sync value %q: version 0 or more than %d members", ErrCorruptValue, b, arbiter.MaxInSyncMembers)
	}
	ids := make([]arbiter.NodeID, len(v.Members))
	for i, m := range v.Members {
		ids[i] = arbiter.NodeID(m)
	}
	members, ok := arbiter.MakeInSyncSet(ids, arbiter.NodeNone)
	if !ok || !slices.Equal(members.Slice(), ids) {
		return 0, arbiter.InSyncSet{}, 0, fmt.Errorf("%w: in-sync members %v not sorted, unique and non-zero", ErrCorruptValue, v.Members)
	}
	return v.Version, members, v.History, nil
}

// encodeNode is the value of the leader and term keys: the node ID in
// decimal, readable with etcdctl.
func encodeNode(n arbiter.NodeID) string { return strconv.FormatUint(uint64(n), 10) }

// decodeNode parses a leader or term value; NodeNone and anything but a
// decimal uint32 are refused.
func decodeNode(b []byte) (arbiter.NodeID, error) {
	n, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil || n == 0 {
		return arbiter.NodeNone, fmt.Errorf("%w: node value %q", ErrCorruptValue, b)
	}
	return arbiter.NodeID(n), nil
}

// decodeState checks the three keys against each other and returns the
// stream's state. Invariants (all written by one transaction at every new
// term, so a violation means a foreign writer): a leader key has a lease
// and a positive CreateRevision no older than the term; a live leader is
// the last holder; the set never contains the last holder; a set exists
// only after a term.
func decodeState(leader, term, inSync kv) (state, error) {
	var s state
	if leader.present {
		n, err := decodeNode(leader.value)
		if err != nil {
			return state{}, err
		}
		if leader.lease == 0 || leader.createRev <= 0 {
			return state{}, fmt.Errorf("%w: leader key of node %d has lease %d, create revision %d", ErrCorruptValue, n, leader.lease, leader.createRev)
		}
		s.leader, s.leaderRev, s.leaderLease = n, leader.createRev, leader.lease
	}
	if term.present {
		n, err := decodeNode(term.value)
		if err != nil {
			return state{}, err
		}
		s.termRev, s.inSync.LastHolder = term.modRev, n
	}
	if inSync.present {
		v, m, h, err := decodeInSync(inSync.value)
		if err != nil {
			return state{}, err
		}
		s.inSyncRev, s.inSync.Version, s.inSync.Members, s.inSync.History = inSync.modRev, v, m, h
	}
	switch {
	case s.leader != arbiter.NodeNone && (s.leader != s.inSync.LastHolder || s.leaderRev != s.termRev):
		return state{}, fmt.Errorf("%w: leader %d at revision %d but last term %d at revision %d", ErrCorruptValue, s.leader, s.leaderRev, s.inSync.LastHolder, s.termRev)
	case s.inSync.Members.Contains(s.inSync.LastHolder) && s.inSync.LastHolder != arbiter.NodeNone:
		return state{}, fmt.Errorf("%w: in-sync set contains the last holder %d", ErrCorruptValue, s.inSync.LastHolder)
	case inSync.present != term.present:
		return state{}, fmt.Errorf("%w: in-sync key present %v but term key present %v", ErrCorruptValue, inSync.present, term.present)
	}
	return s, nil
}

// mayAcquire is arbiter.Arbiter.Acquire's promotion rule for a FREE lease:
// anyone in a fresh cluster (no term was ever granted), else only a member
// of the in-sync set or the last holder. With an empty set only the last
// holder may take the lease: the primary ran alone and nobody else has
// what it released.
func mayAcquire(s *state, node arbiter.NodeID) bool {
	return s.termRev == 0 || node == s.inSync.LastHolder || s.inSync.Members.Contains(node)
}

// nextTermInSync is the set written with a new term: the new holder leaves
// the set (a primary is not its own standby), the previous holder does not
// join it, and the version grows by one even when the set is unchanged, so
// a proposal based on the previous term's set never applies to this one.
func nextTermInSync(s *state, node arbiter.NodeID) (version uint64, members arbiter.InSyncSet) {
	var ids [arbiter.MaxInSyncMembers]arbiter.NodeID
	n := 0
	for _, m := range s.inSync.Members.Slice() {
		if m != node {
			ids[n] = m
			n++
		}
	}
	members, _ = arbiter.MakeInSyncSet(ids[:n], arbiter.NodeNone)
	return s.inSync.Version + 1, members
}

// proposalResult is what a proposal does to the set.
type proposalResult uint8

const (
	// proposalChange: write the proposed set with version + 1.
	proposalChange proposalResult = iota
	// proposalSame: the proposal equals the set; nothing to write.
	proposalSame
	// proposalStale: the base version is not the version in force.
	proposalStale
	// proposalInvalid: a duplicate, NodeNone, the holder itself, or too
	// many members.
	proposalInvalid
)

// judgeProposal is arbiter.Arbiter.RenewWithInSync's compare-and-set rule,
// applied by the holder to the set it read; the etcd transaction that
// writes the result is conditioned on that set's ModRevision, so the
// check and the write are atomic.
func judgeProposal(s *state, holder arbiter.NodeID, p *arbiter.InSyncProposal) (proposalResult, arbiter.InSyncSet) {
	proposed, ok := arbiter.MakeInSyncSet(p.Members[:p.N], holder)
	switch {
	case p.BaseVersion != s.inSync.Version:
		return proposalStale, arbiter.InSyncSet{}
	case !ok:
		return proposalInvalid, arbiter.InSyncSet{}
	case proposed == s.inSync.Members:
		return proposalSame, proposed
	}
	return proposalChange, proposed
}

// grantReply is the reply for a grant of epoch for durationNs.
func grantReply(requestID, epoch uint64, durationNs int64, version uint64, members arbiter.InSyncSet, history uint64) arbiter.Reply {
	return arbiter.Reply{
		Kind:          arbiter.ReplyGrant,
		RequestID:     requestID,
		Epoch:         epoch,
		DurationNs:    durationNs,
		InSyncVersion: version,
		Members:       members,
		History:       history,
	}
}

// denyReply is the reply for a refusal, from the state read when refusing.
// RemainingNs is 0: etcd would need one more round trip (TimeToLive) to
// say how long the holder's lease has left, and nodes use only the holder
// and the epoch of a deny.
func denyReply(requestID uint64, s *state) arbiter.Reply {
	return arbiter.Reply{
		Kind:          arbiter.ReplyDeny,
		RequestID:     requestID,
		Epoch:         s.highestEpoch(),
		Holder:        s.leader,
		InSyncVersion: s.inSync.Version,
		Members:       s.inSync.Members,
		History:       s.inSync.History,
	}
}

// foreignHistory is arbiter.Arbiter.ForeignHistory against the pinned id
// read in s.
func foreignHistory(s *state, history uint64) bool {
	return history != 0 && s.inSync.History != 0 && history != s.inSync.History
}

// pinnedHistory is the history id to write with the insync key after a
// granted request naming history: the one pinned, else history
// (arbiter.Arbiter.PinHistory).
func pinnedHistory(s *state, history uint64) uint64 {
	if s.inSync.History != 0 {
		return s.inSync.History
	}
	return history
}
