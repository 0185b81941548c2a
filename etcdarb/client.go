package etcdarb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seqbus/seqbus/arbiter"
)

// maxResults bounds the finished replies waiting for the next Tick. With
// one operation in flight and Tick called every millisecond there is at
// most one; at the bound the oldest is dropped (counted in
// Stats.ResultsDropped), which the keeper treats like a lost datagram.
const maxResults = 4

// job is one keeper request handed to the worker, with the in-sync
// proposal attached to it (renews only).
type job struct {
	req      arbiter.Request
	proposal arbiter.InSyncProposal
}

var _ arbiter.Backend = (*Client)(nil)

// Client is the node side of the lease protocol on an etcd cluster, an
// arbiter.Backend like the UDP witness's client: the
// same keeper, fencing, gating and step-down code as with the UDP witness,
// only the arbiter differs. One worker goroutine runs the etcd operations,
// one at a time; Tick and ProposeInSync are called by the node under its
// own lock (they touch the keeper, which is not thread-safe), Query, Stats
// and Close from any goroutine.
type Client struct {
	cfg    Config
	keys   keys
	ttlS   int64
	keeper *arbiter.Keeper
	etcd   *clientv3.Client

	// proposal is attached to the next renew Tick produces (owned by the
	// Tick caller, like the keeper).
	proposal arbiter.InSyncProposal

	// mu guards the mailbox between Tick and the worker.
	mu        sync.Mutex
	queued    job
	hasQueued bool
	closed    bool
	results   [maxResults]arbiter.Reply
	nResults  int
	wake      chan struct{}
	// releasing is closed by the worker once the release Release queued
	// has run (nil: none under way); Close waits for it.
	releasing chan struct{}

	// The worker's own state: the etcd lease and epoch it last held.
	leaseID clientv3.LeaseID
	epoch   uint64
	// undoHolder is the last holder before this worker's grant of epoch
	// (NodeNone: none, or the grant may not be undone: the first term, a
	// term after its own, one renewed since), which a declined release
	// restores (arbiter.Arbiter.Decline's rule).
	undoHolder arbiter.NodeID
	failing    bool

	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	stats counters
}

// New connects to cfg.Endpoints and starts the worker. It checks that the
// cluster answers (a linearizable read of the stream's keys, retried
// through an election) within DialTimeoutNs and returns ErrUnreachable
// naming the endpoints otherwise.
// keeper must be the node's keeper, built with the same LeaseDurationNs.
func New(cfg Config, keeper *arbiter.Keeper) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if keeper == nil {
		return nil, fmt.Errorf("%w: nil keeper", ErrConfig)
	}
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: time.Duration(cfg.DialTimeoutNs),
		// The etcd client logs every retry at warn level through zap;
		// our own transitions go to cfg.Logger instead.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: endpoints %s: %v", ErrUnreachable, strings.Join(cfg.Endpoints, ","), err)
	}
	c := &Client{
		cfg:    cfg,
		keys:   makeKeys(cfg.Prefix, cfg.Stream),
		ttlS:   ttlSeconds(cfg.LeaseDurationNs),
		keeper: keeper,
		etcd:   etcd,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.probe(); err != nil {
		c.cancel()
		_ = etcd.Close()
		return nil, fmt.Errorf("%w: endpoints %s did not answer within %v: %v",
			ErrUnreachable, strings.Join(cfg.Endpoints, ","), time.Duration(cfg.DialTimeoutNs), err)
	}
	go c.work()
	return c, nil
}

// probeRetry is the pause between New's reads of the stream's keys while
// the cluster does not answer: a few tries in an election timeout.
const probeRetry = 50 * time.Millisecond

// probe reads the stream's keys until the cluster answers or DialTimeoutNs
// ends, and returns the last error then. An election (a read fails at
// once with "leader changed" or "no leader") is over within an election
// timeout, and must not fail a node that starts during one, as it did
// when a fresh cluster changed leaders as a node started. A corrupt value
// is an answer: the worker reports it.
func (c *Client) probe() error {
	ctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.DialTimeoutNs))
	defer cancel()
	retry := time.NewTimer(probeRetry)
	defer retry.Stop()
	for {
		_, err := c.read(ctx)
		if err == nil || errors.Is(err, ErrCorruptValue) {
			return nil
		}
		retry.Reset(probeRetry)
		select {
		case <-ctx.Done():
			return err
		case <-retry.C:
		}
	}
}

// Keeper returns the wrapped keeper.
func (c *Client) Keeper() *arbiter.Keeper { return c.keeper }

// Tick asks the keeper for a due request and hands it to the worker
// without blocking (a newer request replaces one still queued: at most one
// etcd operation runs and one waits), then delivers every finished reply to
// the keeper exactly as arbiter.Reply.Deliver does and passes each to
// deliver (which may be nil), in the order they finished. nowNs is the
// request's send time, so it must be read just before calling Tick. Call
// it from the goroutine that owns the keeper. It does not allocate.
func (c *Client) Tick(nowNs int64, deliver func(r arbiter.Reply)) {
	if req, ok := c.keeper.Tick(nowNs); ok {
		c.enqueue(req)
	}
	var out [maxResults]arbiter.Reply
	c.mu.Lock()
	n := c.nResults
	copy(out[:], c.results[:n])
	c.nResults = 0
	c.mu.Unlock()
	for i := range out[:n] {
		out[i].Deliver(c.keeper)
		if deliver != nil {
			deliver(out[i])
		}
	}
}

func (c *Client) enqueue(req arbiter.Request) {
	c.stats.requests.Add(1)
	j := job{req: req, proposal: c.proposal.Take(req)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.hasQueued {
		c.stats.replaced.Add(1)
		// A replaced renew's proposal rides on the newer renew, so that
		// replacing is not losing it, if that renew is of the epoch it
		// was made under (arbiter.InSyncProposal.Take's rule).
		if j.proposal.BaseVersion == 0 && req.Kind == arbiter.RequestRenew && c.queued.proposal.Epoch == req.Epoch {
			j.proposal = c.queued.proposal
		}
	}
	c.queued, c.hasQueued = j, true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the worker is already signalled
	}
}

// ProposeInSync attaches a proposal for the in-sync set to the next renew
// Tick produces, if that renew is of the keeper's epoch now
// (arbiter.InSyncProposal.Take), with arbiter.Backend's contract: it replaces an earlier
// proposal not yet sent, an acquire does not consume it, it is sent once,
// and baseVersion 0 or more than arbiter.MaxInSyncMembers members is
// refused with arbiter.ErrProposal (keeping any earlier proposal). The set
// itself is judged against etcd's (see package doc).
func (c *Client) ProposeInSync(baseVersion uint64, members []arbiter.NodeID) error {
	p, err := arbiter.NewInSyncProposal(baseVersion, members)
	if err != nil {
		return err
	}
	p.Epoch = c.keeper.Epoch()
	c.proposal = p
	return nil
}

// Release queues a keeper's release request (arbiter.Keeper.Release)
// without blocking: the worker deletes the leader key if it is still this
// term's and revokes the etcd lease, so another node acquires at once
// rather than when the lease would have run out. It gets no reply. Close
// waits for it, within RequestTimeoutNs.
func (c *Client) Release(req arbiter.Request) {
	if req.Kind != arbiter.RequestRelease {
		panic(fmt.Sprintf("etcdarb: Release of a %s", req.Kind))
	}
	c.mu.Lock()
	if c.releasing == nil && !c.closed {
		c.releasing = make(chan struct{})
	}
	c.mu.Unlock()
	c.enqueue(req)
}

// Query reads who holds the lease (NodeNone when nobody does), the
// highest epoch granted (the holder's while one is live) and the in-sync
// set, in one linearizable read. Without a deadline on ctx it is bounded
// by RequestTimeoutNs. It is safe from any goroutine.
func (c *Client) Query(ctx context.Context) (holder arbiter.NodeID, epoch uint64, inSync InSync, err error) {
	if c.ctx.Err() != nil {
		return arbiter.NodeNone, 0, InSync{}, ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(c.cfg.RequestTimeoutNs))
		defer cancel()
	}
	s, err := c.read(ctx)
	if err != nil {
		return arbiter.NodeNone, 0, InSync{}, err
	}
	return s.leader, s.highestEpoch(), s.inSync, nil
}

// Close stops the worker (cancelling an operation in flight), closes the
// etcd connection and waits until no goroutine of the Client is left. It
// revokes nothing: a crashed node cannot revoke either, so the lease is
// left to expire and the other nodes take over after the same wait as
// after a crash. Replies not yet delivered are dropped. Close is
// idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		releasing := c.releasing
		c.mu.Unlock()
		if releasing != nil {
			t := time.NewTimer(time.Duration(c.cfg.RequestTimeoutNs))
			select {
			case <-releasing:
			case <-t.C:
			}
			t.Stop()
		}
		c.cancel()
		<-c.done
		c.closeErr = c.etcd.Close()
		if errors.Is(c.closeErr, context.Canceled) {
			c.closeErr = nil
		}
	})
	return c.closeErr
}

// work runs queued jobs one at a time until Close.
func (c *Client) work() {
	defer close(c.done)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		c.mu.Lock()
		j, ok := c.queued, c.hasQueued
		c.hasQueued = false
		c.mu.Unlock()
		if !ok {
			continue
		}
		r, ok := c.run(j)
		if j.req.Kind == arbiter.RequestRelease {
			c.mu.Lock()
			if c.releasing != nil {
				close(c.releasing)
				c.releasing = nil
			}
			c.mu.Unlock()
		}
		if !ok {
			continue
		}
		c.mu.Lock()
		if c.nResults == maxResults {
			copy(c.results[:], c.results[1:])
			c.nResults--
			c.stats.resultsDropped.Add(1)
		}
		c.results[c.nResults] = r
		c.nResults++
		c.mu.Unlock()
	}
}

// run performs one job under RequestTimeoutNs. An etcd error or timeout
// produces no reply, like a lost datagram: the keeper retries, and if the
// errors last its lease runs out on its own clock.
func (c *Client) run(j job) (arbiter.Reply, bool) {
	ctx, cancel := context.WithTimeout(c.ctx, time.Duration(c.cfg.RequestTimeoutNs))
	defer cancel()
	var r arbiter.Reply
	var err error
	switch j.req.Kind {
	case arbiter.RequestAcquire:
		c.stats.acquires.Add(1)
		r, err = c.acquire(ctx, j.req)
	case arbiter.RequestRenew:
		c.stats.renews.Add(1)
		r, err = c.renew(ctx, j.req, &j.proposal)
	case arbiter.RequestRelease:
		c.stats.releases.Add(1)
		if err = c.release(ctx, j.req); err != nil {
			c.countError(ctx, err)
		}
		return arbiter.Reply{}, false // no reply
	default:
		panic(fmt.Sprintf("etcdarb: keeper produced request kind %s", j.req.Kind))
	}
	if err != nil {
		c.countError(ctx, err)
		return arbiter.Reply{}, false
	}
	if c.failing {
		c.failing = false
		c.cfg.Logger.Info("etcd answering again", "endpoints", c.cfg.Endpoints)
	}
	if r.Granted() {
		c.stats.grants.Add(1)
	} else {
		c.stats.denies.Add(1)
	}
	return r, true
}

func (c *Client) countError(ctx context.Context, err error) {
	switch {
	case c.ctx.Err() != nil:
		return // closing
	case errors.Is(err, ErrCorruptValue):
		c.stats.corruptValues.Add(1)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		c.stats.timeouts.Add(1)
	default:
		c.stats.errors.Add(1)
	}
	if !c.failing {
		c.failing = true
		c.cfg.Logger.Warn("etcd request failed; the keeper retries and its lease runs out if this lasts",
			"endpoints", c.cfg.Endpoints, "err", err)
	}
}

// counters are updated by the worker and read by Stats from anywhere.
type counters struct {
	requests, replaced, acquires, renews, releases          atomic.Uint64
	grants, grantsNewTerm, denies, grantsUndone             atomic.Uint64
	deniesHeld, deniesNotInSync, deniesLost, deniesForeign  atomic.Uint64
	inSyncProposals, inSyncChanged, inSyncRefused           atomic.Uint64
	errors, timeouts, corruptValues, resultsDropped, unused atomic.Uint64
}

// Stats are the Client's counters since New.
type Stats struct {
	// Requests is every request the keeper produced; Replaced those
	// replaced in the queue by a newer one before the worker took them.
	Requests, Replaced uint64
	// Acquires, Renews and Releases are the operations the worker ran.
	Acquires, Renews, Releases uint64
	// Grants (GrantsNewTerm of them created the leader key: a new epoch)
	// and Denies are the replies delivered.
	Grants, GrantsNewTerm, Denies uint64
	// GrantsUndone: declined releases that put the previous last holder
	// back (arbiter.Arbiter.Decline).
	GrantsUndone uint64
	// DeniesHeld: another node holds the lease. DeniesNotInSync: the lease
	// is free but this node may not be promoted. DeniesLost: our etcd
	// lease or leader key is gone (expired, or another term began).
	// DeniesForeign: this node's history id is not the cluster's pinned
	// one (its directory holds another cluster's history).
	DeniesHeld, DeniesNotInSync, DeniesLost, DeniesForeign uint64
	// InSyncProposals were sent with a renew; InSyncChanged written;
	// InSyncRefused refused (stale base, invalid set, or the set changed
	// between read and write).
	InSyncProposals, InSyncChanged, InSyncRefused uint64
	// Errors and Timeouts are failed operations (no reply delivered);
	// CorruptValues operations refused because a key held a value this
	// package never writes.
	Errors, Timeouts, CorruptValues uint64
	// ResultsDropped counts replies dropped at the maxResults bound;
	// UnusedLeases etcd leases granted for an acquire that then lost the
	// race (left to expire).
	ResultsDropped, UnusedLeases uint64
}

// Stats returns a snapshot of the counters. Safe from any goroutine.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Requests: s.requests.Load(), Replaced: s.replaced.Load(),
		Acquires: s.acquires.Load(), Renews: s.renews.Load(), Releases: s.releases.Load(),
		Grants: s.grants.Load(), GrantsNewTerm: s.grantsNewTerm.Load(), Denies: s.denies.Load(), GrantsUndone: s.grantsUndone.Load(),
		DeniesHeld: s.deniesHeld.Load(), DeniesNotInSync: s.deniesNotInSync.Load(), DeniesLost: s.deniesLost.Load(),
		DeniesForeign: s.deniesForeign.Load(), InSyncProposals: s.inSyncProposals.Load(), InSyncChanged: s.inSyncChanged.Load(), InSyncRefused: s.inSyncRefused.Load(),
		Errors: s.errors.Load(), Timeouts: s.timeouts.Load(), CorruptValues: s.corruptValues.Load(),
		ResultsDropped: s.resultsDropped.Load(), UnusedLeases: s.unused.Load(),
	}
}

// NewQuerier returns a Client for Query only (clients and tools that
// follow the lease holder): it holds a keeper that is never ticked, so it
// never asks for the lease. cfg.Node identifies it in logs only (0: 1).
func NewQuerier(cfg Config) (*Client, error) {
	if cfg.Node == arbiter.NodeNone {
		cfg.Node = 1
	}
	if cfg.LeaseDurationNs == 0 {
		cfg.LeaseDurationNs = arbiter.DefaultLeaseDurationNs
	}
	kc := arbiter.DefaultConfig()
	kc.LeaseDurationNs = cfg.LeaseDurationNs
	k, err := arbiter.NewKeeper(cfg.Node, kc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return New(cfg, k)
}
