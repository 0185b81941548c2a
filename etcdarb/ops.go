package etcdarb

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seqbus/seqbus/arbiter"
)

// The etcd operations, run only by the worker goroutine (Query's read
// excepted, which touches no worker state). Each returns a reply, or an
// error when etcd did not answer usefully; an error never becomes a reply.

// getAll are the three reads every transaction ends with, so that any
// answer (success or not) carries the stream's state at its revision.
func (c *Client) getAll() []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(c.keys.leader), clientv3.OpGet(c.keys.term), clientv3.OpGet(c.keys.inSync)}
}

// read returns the stream's state in one linearizable read.
func (c *Client) read(ctx context.Context) (state, error) {
	resp, err := c.etcd.Txn(ctx).Then(c.getAll()...).Commit()
	if err != nil {
		return state{}, err
	}
	return stateFrom(resp.Responses)
}

// stateFrom decodes the last three responses of a transaction, which are
// always getAll's.
func stateFrom(rs []*etcdserverpb.ResponseOp) (state, error) {
	if len(rs) < 3 {
		return state{}, fmt.Errorf("%w: transaction returned %d responses", ErrCorruptValue, len(rs))
	}
	rs = rs[len(rs)-3:]
	var got [3]kv
	for i, r := range rs {
		rr := r.GetResponseRange()
		if rr == nil {
			return state{}, fmt.Errorf("%w: response %d is not a range", ErrCorruptValue, i)
		}
		if len(rr.Kvs) > 0 {
			got[i] = kvFrom(rr.Kvs[0])
		}
	}
	return decodeState(got[0], got[1], got[2])
}

func kvFrom(k *mvccpb.KeyValue) kv {
	return kv{present: true, value: k.Value, createRev: k.CreateRevision, modRev: k.ModRevision, lease: k.Lease}
}

// acquire grants the lease to this node if the leader key is absent and the
// node may be promoted (mayAcquire on the state read), extends it if the
// leader key is already ours, and refuses otherwise.
func (c *Client) acquire(ctx context.Context, req arbiter.Request) (arbiter.Reply, error) {
	s, err := c.read(ctx)
	if err != nil {
		return arbiter.Reply{}, err
	}
	if s.leader == c.cfg.Node && uint64(s.leaderRev) == c.epoch && clientv3.LeaseID(s.leaderLease) == c.leaseID {
		// The term this very process acquired (a retried acquire whose
		// first attempt already won): extend it. No epoch can be reused
		// within one process.
		r, _, err := c.extend(ctx, req.ID, uint64(s.leaderRev), c.leaseID)
		return r, err
	}
	if s.leader == c.cfg.Node {
		// Our own leader key is still live (this process restarted, or our
		// renewals failed while etcd's lease did not expire). Like the
		// witness (arbiter.Acquire), start a new term instead of extending
		// the old one: a restarted process must never lead an epoch it may
		// already have used. Delete the old key only if it is unchanged,
		// then acquire afresh.
		if _, err := c.etcd.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(c.keys.leader), "=", s.leaderRev),
		).Then(clientv3.OpDelete(c.keys.leader)).Commit(); err != nil {
			return arbiter.Reply{}, err
		}
		if s, err = c.read(ctx); err != nil {
			return arbiter.Reply{}, err
		}
	}
	if r, refused := c.refused(req, &s); refused {
		return r, nil
	}
	lease, err := c.etcd.Grant(ctx, c.ttlS)
	if err != nil {
		return arbiter.Reply{}, err
	}
	version, members := nextTermInSync(&s, c.cfg.Node)
	history := pinnedHistory(&s, req.History)
	node := encodeNode(c.cfg.Node)
	// The conditions make the promotion rule atomic: mayAcquire judged the
	// term and the set at exactly these revisions, and the leader key must
	// still be absent.
	resp, err := c.etcd.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(c.keys.leader), "=", 0),
		clientv3.Compare(clientv3.ModRevision(c.keys.term), "=", s.termRev),
		clientv3.Compare(clientv3.ModRevision(c.keys.inSync), "=", s.inSyncRev),
	).Then(
		clientv3.OpPut(c.keys.leader, node, clientv3.WithLease(lease.ID)),
		clientv3.OpPut(c.keys.term, node),
		clientv3.OpPut(c.keys.inSync, string(encodeInSync(version, &members, history))),
	).Else(c.getAll()...).Commit()
	if err != nil {
		// The transaction may have succeeded: then the next acquire finds
		// our leader key and extends it. Otherwise the lease expires
		// unused.
		c.stats.unused.Add(1)
		return arbiter.Reply{}, err
	}
	if !resp.Succeeded {
		// Another node won the race; our lease expires unused (revoking
		// would cost a round trip and gain nothing).
		c.stats.unused.Add(1)
		s, err := stateFrom(resp.Responses)
		if err != nil {
			return arbiter.Reply{}, err
		}
		c.stats.deniesHeld.Add(1)
		return denyReply(req.ID, &s), nil
	}
	// The epoch is the revision of this transaction, which is the leader
	// key's CreateRevision: etcd revisions only grow, so every new term
	// gets a higher epoch than every earlier one.
	epoch := uint64(resp.Header.Revision)
	c.newTerm(lease.ID, epoch, &s)
	c.stats.grantsNewTerm.Add(1)
	return grantReply(req.ID, epoch, grantDurationNs(lease.TTL, c.cfg.LeaseDurationNs), version, members, history), nil
}

// refused is acquire's refusal of a lease this node may not take (read
// in s): held by another, of another history than the cluster's, or not
// promotable (mayAcquire).
func (c *Client) refused(req arbiter.Request, s *state) (arbiter.Reply, bool) {
	switch {
	case s.leader != arbiter.NodeNone:
		c.stats.deniesHeld.Add(1)
	case foreignHistory(s, req.History):
		c.stats.deniesForeign.Add(1)
	case !mayAcquire(s, c.cfg.Node):
		c.stats.deniesNotInSync.Add(1)
	default:
		return arbiter.Reply{}, false
	}
	return denyReply(req.ID, s), true
}

// newTerm records the term this worker was just granted: its etcd lease,
// its epoch, and the last holder before it (s, read before the grant),
// which a declined release puts back, unless the term followed the first
// or its own.
func (c *Client) newTerm(id clientv3.LeaseID, epoch uint64, s *state) {
	c.leaseID, c.epoch, c.undoHolder = id, epoch, arbiter.NodeNone
	if s.termRev != 0 && s.inSync.LastHolder != c.cfg.Node {
		c.undoHolder = s.inSync.LastHolder
	}
}

// renew extends the lease of epoch req.Epoch, then applies the proposal if
// there is one.
func (c *Client) renew(ctx context.Context, req arbiter.Request, p *arbiter.InSyncProposal) (arbiter.Reply, error) {
	lease := c.leaseID
	if c.epoch != req.Epoch || lease == 0 {
		// Not the term this worker acquired (a renew of an older epoch, or
		// a lease taken over from an earlier process): find its lease.
		s, err := c.read(ctx)
		if err != nil {
			return arbiter.Reply{}, err
		}
		if s.leader != c.cfg.Node || uint64(s.leaderRev) != req.Epoch {
			c.stats.deniesLost.Add(1)
			return denyReply(req.ID, &s), nil
		}
		lease = clientv3.LeaseID(s.leaderLease)
	}
	if p.BaseVersion != 0 {
		c.stats.inSyncProposals.Add(1)
	}
	r, s, err := c.extend(ctx, req.ID, req.Epoch, lease)
	switch {
	case err != nil || !r.Granted():
		return r, err
	case foreignHistory(&s, req.History):
		c.stats.deniesForeign.Add(1)
		return denyReply(req.ID, &s), nil
	case p.BaseVersion == 0 && pinnedHistory(&s, req.History) == s.inSync.History:
		return r, nil
	}
	return c.propose(ctx, r, &s, lease, p, req.History)
}

// extend renews etcd lease id (one keep-alive) and then checks, in one
// transaction, that the leader key still has epoch as its CreateRevision
// and id as its lease. The grant's duration is the TTL etcd reports,
// capped at LeaseDurationNs; the keeper times it from the request's send
// time, which is before the keep-alive reached etcd. A lease etcd no
// longer has, or a leader key that is not ours, is refused.
func (c *Client) extend(ctx context.Context, requestID, epoch uint64, id clientv3.LeaseID) (arbiter.Reply, state, error) {
	ka, err := c.etcd.KeepAliveOnce(ctx, id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return arbiter.Reply{}, state{}, err
	}
	lost := err != nil
	resp, err := c.etcd.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(c.keys.leader), "=", int64(epoch)),
		clientv3.Compare(clientv3.LeaseValue(c.keys.leader), "=", int64(id)),
	).Then(c.getAll()...).Else(c.getAll()...).Commit()
	if err != nil {
		return arbiter.Reply{}, state{}, err
	}
	s, err := stateFrom(resp.Responses)
	if err != nil {
		return arbiter.Reply{}, state{}, err
	}
	if lost || !resp.Succeeded {
		if c.epoch == epoch {
			c.leaseID, c.epoch = 0, 0
		}
		c.stats.deniesLost.Add(1)
		return denyReply(requestID, &s), s, nil
	}
	// A renewed term may have been led: a declined release no longer
	// undoes it (arbiter.Arbiter.Decline's rule).
	c.leaseID, c.epoch, c.undoHolder = id, epoch, arbiter.NodeNone
	return grantReply(requestID, epoch, grantDurationNs(ka.TTL, c.cfg.LeaseDurationNs), s.inSync.Version, s.inSync.Members, s.inSync.History), s, nil
}

// release ends the term of epoch req.Epoch this worker holds: it deletes
// the leader key only if it is still that term's (CreateRevision epoch,
// on this worker's etcd lease), then revokes the lease, so any other
// node's next acquire finds the lease free. A term this worker does not
// hold is left alone (its lease runs out as it would have). A declined
// release (arbiter.Request.Declined) also puts the previous last holder
// back in the term key, in the same transaction, if the term key is
// still this grant's (arbiter.Arbiter.Decline: that holder may lead
// again; the in-sync set is unchanged).
func (c *Client) release(ctx context.Context, req arbiter.Request) error {
	id, undo := c.leaseID, c.undoHolder
	if c.epoch != req.Epoch || id == 0 {
		return nil
	}
	c.leaseID, c.epoch, c.undoHolder = 0, 0, arbiter.NodeNone
	ops := []clientv3.Op{clientv3.OpDelete(c.keys.leader)}
	conds := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(c.keys.leader), "=", int64(req.Epoch)),
		clientv3.Compare(clientv3.LeaseValue(c.keys.leader), "=", int64(id)),
	}
	if req.Declined && undo != arbiter.NodeNone {
		ops = append(ops, clientv3.OpPut(c.keys.term, encodeNode(undo)))
		conds = append(conds, clientv3.Compare(clientv3.ModRevision(c.keys.term), "=", int64(req.Epoch)))
	}
	resp, err := c.etcd.Txn(ctx).If(conds...).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if len(ops) > 1 && resp.Succeeded {
		c.stats.grantsUndone.Add(1)
		c.cfg.Logger.Warn("etcd: grant undone: declined (this node's directory is new); the previous holder may lead again", "epoch", req.Epoch, "last_holder", undo)
	} else if len(ops) > 1 {
		// The term key changed (an operator?): end the lease as for any
		// release, if it is still ours.
		if _, err := c.etcd.Txn(ctx).If(conds[:2]...).Then(ops[0]).Commit(); err != nil {
			return err
		}
	}
	if _, err := c.etcd.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	return nil
}

// propose applies an in-sync proposal after a granted renew r: judged
// against s, the state extend read (in the same transaction that proved
// the leader key ours), and written only if the leader key is still ours
// (epoch and lease) and the set's ModRevision unchanged since that read.
// A refused proposal leaves the renew granted, carrying the set in force,
// as at the witness; a leader key that is no longer ours turns the grant
// into a deny. The same write pins the renew's history id when none is
// pinned yet (arbiter.Arbiter.PinHistory), with or without a proposal
// (p.BaseVersion 0: the set is kept).
func (c *Client) propose(ctx context.Context, r arbiter.Reply, s *state, lease clientv3.LeaseID, p *arbiter.InSyncProposal, history uint64) (arbiter.Reply, error) {
	verdict, members := proposalSame, s.inSync.Members
	if p.BaseVersion != 0 {
		verdict, members = judgeProposal(s, c.cfg.Node, p)
	}
	history = pinnedHistory(s, history)
	pin := history != s.inSync.History
	switch {
	case verdict == proposalStale || verdict == proposalInvalid:
		c.stats.inSyncRefused.Add(1)
		if !pin {
			return r, nil
		}
		verdict, members = proposalSame, s.inSync.Members
	case verdict == proposalSame && !pin:
		return r, nil
	}
	version := s.inSync.Version
	if verdict == proposalChange {
		version++
	}
	resp, err := c.etcd.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(c.keys.leader), "=", int64(r.Epoch)),
		clientv3.Compare(clientv3.LeaseValue(c.keys.leader), "=", int64(lease)),
		clientv3.Compare(clientv3.ModRevision(c.keys.inSync), "=", s.inSyncRev),
	).Then(
		clientv3.OpPut(c.keys.inSync, string(encodeInSync(version, &members, history))),
	).Else(c.getAll()...).Commit()
	if err != nil {
		// The write may or may not have happened; the renew stands with
		// the set read, and the node proposes again: a stale base is then
		// refused and the grant shows the set in force.
		return r, nil
	}
	if resp.Succeeded {
		if verdict == proposalChange {
			c.stats.inSyncChanged.Add(1)
		}
		r.InSyncVersion, r.Members, r.History = version, members, history
		return r, nil
	}
	c.stats.inSyncRefused.Add(1)
	now, err := stateFrom(resp.Responses)
	if err != nil {
		return arbiter.Reply{}, err
	}
	if now.leader != c.cfg.Node || uint64(now.leaderRev) != r.Epoch {
		c.stats.deniesLost.Add(1)
		return denyReply(r.RequestID, &now), nil
	}
	r.InSyncVersion, r.Members = now.inSync.Version, now.inSync.Members
	return r, nil
}
