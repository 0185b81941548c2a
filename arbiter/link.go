package arbiter

import "fmt"

// SilentLeases is how many lease durations without any reply make a Link
// report its arbiter silent: an unreachable or misconfigured arbiter
// otherwise looks like a node that simply never leads.
const SilentLeases = 3

// Link is a node's side of the lease: its Keeper, the Backend that
// carries the keeper's requests, and when the arbiter last answered. It
// does no I/O and reads no clock (every time is an nowNs argument) and
// logs nothing: what a Tick or a reply notices is returned for the
// runtime to count and log. It is not safe for concurrent use.
type Link struct {
	keeper      *Keeper
	backend     Backend
	lastReplyNs int64 // the last reply from the arbiter (0: none yet)
	silent      bool  // reported silent, not answering since (one episode)
	// asking: the keeper wants the lease, so it sends requests; a
	// keeper that does not sends nothing, and the arbiter's silence
	// then says nothing of it. askingSinceNs: when it last began.
	asking        bool
	askingSinceNs int64
}

// LinkReady is what a Link's Tick noticed.
type LinkReady struct {
	// WentSilent: the arbiter has not answered for SilentLeases lease
	// durations, SilentNs by now. Reported once per episode: the next
	// Tick that reports it again follows a reply (Replied returned true).
	WentSilent bool
	SilentNs   int64
}

// NewLink returns a link for node: a keeper with cfg (see NewKeeper)
// whose request IDs start after requestIDsAfter (StartRequestIDsAfter: a
// number unique to the process run, so a reply captured before a restart
// matches no request of this one), and the backend newBackend builds
// around it. newBackend's error is returned as is; a nil backend without
// one is refused with ErrInvalidConfig.
func NewLink(node NodeID, cfg Config, requestIDsAfter uint64, newBackend func(*Keeper) (Backend, error)) (*Link, error) {
	k, err := NewKeeper(node, cfg)
	if err != nil {
		return nil, err
	}
	k.StartRequestIDsAfter(requestIDsAfter)
	b, err := newBackend(k)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: the lease backend for node %d is nil", ErrInvalidConfig, node)
	}
	// Asking from the start (time 0) until a Tick says otherwise.
	return &Link{keeper: k, backend: b, asking: true}, nil
}

// Keeper returns the link's keeper.
func (l *Link) Keeper() *Keeper { return l.keeper }

// Backend returns the link's backend.
func (l *Link) Backend() Backend { return l.backend }

// Tick sets whether the node wants the lease (Keeper.SetWantLead), has
// the backend send the keeper's due request and pass deliver the replies
// that arrived since the last Tick (Backend.Tick: deliver should call
// Replied), then checks for silence at nowNs. nowNs is read just before
// the call, as Backend.Tick requires. It does not allocate (deliver is
// the caller's one func value, not a new one per call).
func (l *Link) Tick(nowNs int64, wantLead bool, deliver func(Reply)) LinkReady {
	if wantLead && !l.asking {
		l.askingSinceNs = nowNs
	}
	l.asking = wantLead
	l.keeper.SetWantLead(wantLead)
	l.backend.Tick(nowNs, deliver)
	return l.checkSilent(nowNs)
}

// checkSilent reports, once per episode, that no reply came for
// SilentLeases lease durations while the keeper was asking (a node that
// does not want the lease, refetching or fetching a snapshot, sends no
// request, and no reply is expected).
func (l *Link) checkSilent(nowNs int64) LinkReady {
	if !l.asking {
		return LinkReady{}
	}
	silentNs := nowNs - max(l.lastReplyNs, l.askingSinceNs)
	if l.silent || silentNs < SilentLeases*l.keeper.cfg.LeaseDurationNs {
		return LinkReady{}
	}
	l.silent = true
	return LinkReady{WentSilent: true, SilentNs: silentNs}
}

// Replied records a reply from the arbiter at nowNs (any reply the
// backend parsed, used by the keeper or not). again is true when the
// link had reported the arbiter silent: that episode is over.
func (l *Link) Replied(nowNs int64) (again bool) {
	l.lastReplyNs = nowNs
	again, l.silent = l.silent, false
	return again
}

// LastReplyNs returns when the arbiter last answered (0: never).
func (l *Link) LastReplyNs() int64 { return l.lastReplyNs }

// ProposeInSync hands the backend a proposal for the next renew
// (Backend.ProposeInSync) and, when it takes it, hurries that renew
// (Keeper.Hurry(nowNs)). An invalid proposal is refused with the
// backend's error, matching ErrProposal, and hurries nothing.
func (l *Link) ProposeInSync(baseVersion uint64, members []NodeID, nowNs int64) error {
	if err := l.backend.ProposeInSync(baseVersion, members); err != nil {
		return err
	}
	l.keeper.Hurry(nowNs)
	return nil
}

// MayLead is the keeper's MayLead(nowNs).
func (l *Link) MayLead(nowNs int64) bool { return l.keeper.MayLead(nowNs) }

// Lease reports the lease for status at nowNs: whether the node may lead
// on it, the time left on its view (0 once ended) and its epoch.
func (l *Link) Lease(nowNs int64) (held bool, remainingNs int64, epoch uint64) {
	v := l.keeper.View()
	end := v.SentAtNs + v.DurationNs
	return l.keeper.MayLead(nowNs), max(end-nowNs, 0), v.Epoch
}

// Release gives the lease up (Keeper.Release) and sends the release
// through the backend when the arbiter may still count this node as
// holder. The caller has stopped leading first. declined marks a grant
// the node never led under (Request.Declined): the arbiter may undo it. It
// reports whether a release was sent.
func (l *Link) Release(nowNs int64, declined bool) bool {
	l.asking = false
	req, ok := l.keeper.Release(nowNs)
	if ok {
		req.Declined = declined
		l.backend.Release(req)
	}
	return ok
}

// Close closes the backend (Backend.Close).
func (l *Link) Close() error { return l.backend.Close() }
