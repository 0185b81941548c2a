package arbiter

import (
	"fmt"
	"math"
)

// MaxOutstandingRequests bounds how many sent-but-unanswered request IDs a
// keeper remembers (with their send times). At the bound the oldest is
// forgotten: sending request n overwrites the slot of request n-8, and a
// reply to a forgotten request is ignored. Ignoring a grant is always safe
// (it can only shorten what the node believes it holds). With the default
// 50 ms retry, eight requests span 400 ms; a grant that old would leave less
// than half a lease anyway.
const MaxOutstandingRequests = 8

// RequestKind is what a keeper asks the witness for.
type RequestKind uint8

// Request kinds.
const (
	// RequestAcquire asks for the lease: a new epoch (the witness answers
	// a repeat of the request that won the live term with that term's
	// grant; see arbiter.AcquireRequest).
	RequestAcquire RequestKind = 1
	// RequestRenew extends the lease under Request.Epoch.
	RequestRenew RequestKind = 2
	// RequestRelease gives the lease of Request.Epoch up before it ends
	// (Keeper.Release): the holder has stopped leading, so the arbiter
	// may grant the next epoch at once. It gets no reply.
	RequestRelease RequestKind = 3
)

func (k RequestKind) String() string {
	switch k {
	case RequestAcquire:
		return "acquire"
	case RequestRenew:
		return "renew"
	case RequestRelease:
		return "release"
	}
	return fmt.Sprintf("RequestKind(%d)", uint8(k))
}

// Request is what Tick tells the runtime to send to the witness.
type Request struct {
	// ID increases by one with every request; the witness echoes it so the
	// reply is matched to the send time of exactly this request.
	ID   uint64
	Kind RequestKind
	Node NodeID
	// Epoch is the epoch being renewed (0 for an acquire).
	Epoch uint64
	// SentAtNs is the nowNs given to Tick, read BEFORE sending: the lease
	// is timed from here, never from when the reply arrives.
	SentAtNs int64
	// Declined marks a RequestRelease of a grant the node never led under
	// (its directory is new: Link.Release): the arbiter may undo the grant
	// (Arbiter.Decline).
	Declined bool
	// History is the id of the history the node's directory holds (0:
	// none yet; Keeper.SetHistory): the arbiter refuses a node of
	// another history than the cluster's (Arbiter.ForeignHistory).
	History uint64
}

type outstandingRequest struct {
	id       uint64
	sentAtNs int64
}

// Keeper is the lease keeper a node runs: it decides when to send an
// acquire or renew to the witness, turns replies into a LeaseView, and
// answers MayLead. It does no I/O and reads no clock. It is not safe for
// concurrent use.
type Keeper struct {
	node     NodeID
	history  uint64 // SetHistory
	cfg      Config
	wantLead bool

	// view is the best lease this node knows it holds. viewRequestID is the
	// request it came from, or a later denied request that ended it.
	view          LeaseView
	viewRequestID uint64
	// epochSeenHighest is the highest epoch seen in any grant or deny. A
	// grant of an older epoch is dead on arrival.
	epochSeenHighest uint64
	// renewEpoch is the epoch this keeper was granted and has not been
	// told is over (by a refusal, or by no longer wanting the lease). It
	// keeps renewing it even after the view lapsed (the witness was
	// unreachable or restarting), because only the process that was
	// granted an epoch renews it: a witness that restarted can then let
	// it go on at once with the same epoch, where an acquire would cost a
	// new one. 0: none.
	renewEpoch uint64
	// acquireID is the unanswered acquire being resent (0: none), first
	// sent at acquireFirstNs. Resending the same ID lets the witness
	// answer a retry with the grant it already made, never a second term.
	acquireID      uint64
	acquireFirstNs int64

	lastRequestID uint64
	nextSendAtNs  int64
	outstanding   [MaxOutstandingRequests]outstandingRequest

	lastDeny struct {
		holder      NodeID
		epoch       uint64
		remainingNs int64
		run         uint64 // Reply.Run (Reply.Deliver sets it)
	}
}

// NewKeeper returns a keeper for node that holds nothing and does not yet
// want to lead (call SetWantLead(true) to contend).
func NewKeeper(node NodeID, cfg Config) (*Keeper, error) {
	if node == NodeNone {
		return nil, fmt.Errorf("%w: keeper node ID must not be NodeNone", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Keeper{node: node, cfg: cfg, nextSendAtNs: math.MinInt64}, nil
}

// SetWantLead says whether this node wants the lease. When it starts
// wanting, the next Tick sends at once. A keeper that stops wanting sends
// nothing more and lets its lease lapse; it may still lead until its view
// ends, so the runtime keeps checking MayLead.
func (k *Keeper) SetWantLead(want bool) {
	if want && !k.wantLead {
		k.nextSendAtNs = math.MinInt64
	}
	if !want {
		// Giving the lease up gives the epoch up: wanting it again
		// acquires anew (unless the view still lives).
		k.renewEpoch = 0
	}
	k.wantLead = want
}

// Tick returns a request to send, if one is due at nowNs: a renew (with the
// view's epoch) every RenewIntervalNs while the view's lease has not ended
// by the local clock, and after that for as long as no refusal ended the
// epoch (see renewEpoch); an acquire when the node wants to lead and has
// no epoch to renew; and a resend RetryNs after any request that gets no
// answer or a refusal. An unanswered acquire is resent under the same
// request ID (timed from its first send, the safe end) while a grant of
// it could still be used, so a retry that crosses the first grant is
// answered with that grant rather than a second term. nowNs is the
// request's send time, so the runtime must call Tick immediately before
// sending, never after.
func (k *Keeper) Tick(nowNs int64) (Request, bool) {
	if !k.wantLead || nowNs < k.nextSendAtNs {
		return Request{}, false
	}
	k.nextSendAtNs = addSaturating(nowNs, k.cfg.RetryNs)
	// Renew while the witness may still count us as holder (margin 0), and
	// while the epoch we were granted has not been refused: a renewal
	// keeps the epoch, whereas an acquire starts a new term.
	if MayLead(k.view, nowNs, 0) || (k.renewEpoch != 0 && k.renewEpoch == k.view.Epoch) {
		k.acquireID = 0
		return k.newRequest(Request{Kind: RequestRenew, Node: k.node, Epoch: k.view.Epoch, SentAtNs: nowNs}), true
	}
	if k.acquireID != 0 && k.outstanding[k.acquireID%MaxOutstandingRequests].id == k.acquireID &&
		nowNs < addSaturating(k.acquireFirstNs, k.cfg.LeaseDurationNs-k.cfg.MarginNs) {
		return Request{ID: k.acquireID, Kind: RequestAcquire, Node: k.node, SentAtNs: nowNs, History: k.history}, true
	}
	req := k.newRequest(Request{Kind: RequestAcquire, Node: k.node, SentAtNs: nowNs})
	k.acquireID, k.acquireFirstNs = req.ID, nowNs
	return req, true
}

// SetHistory names the history the node's directory holds in every
// request from now on (0: none yet).
func (k *Keeper) SetHistory(id uint64) { k.history = id }

// History is the history id the node's requests name (SetHistory).
func (k *Keeper) History() uint64 { return k.history }

// newRequest gives req the next ID and the node's history id, and
// remembers its send time.
func (k *Keeper) newRequest(req Request) Request {
	k.lastRequestID++
	req.ID, req.History = k.lastRequestID, k.history
	k.outstanding[req.ID%MaxOutstandingRequests] = outstandingRequest{id: req.ID, sentAtNs: req.SentAtNs}
	return req
}

// OnGrant records a grant for requestID of epoch for durationNs (the
// witness's remaining time at grant). The view is timed from the send time
// of THAT request. It returns false and leaves the view alone when the
// request ID is unknown, already answered or forgotten (see
// MaxOutstandingRequests), when epoch or durationNs is not positive, when
// epoch is older than one already seen, or when the grant is not newer than
// the current view; only a well-formed reply marks its request answered. The
// duration is capped at the configured lease duration: trusting a longer
// one from the wire would be unsafe, and a shorter one is the witness's
// word.
func (k *Keeper) OnGrant(requestID uint64, epoch uint64, durationNs int64) bool {
	// A malformed grant does not consume the request: the real answer may
	// still come.
	if epoch == 0 || durationNs <= 0 {
		return false
	}
	sentAtNs, ok := k.takeOutstanding(requestID)
	if !ok || epoch < k.epochSeenHighest {
		return false
	}
	if epoch == k.view.Epoch && requestID <= k.viewRequestID {
		return false
	}
	k.view = LeaseView{Epoch: epoch, SentAtNs: sentAtNs, DurationNs: min(durationNs, k.cfg.LeaseDurationNs)}
	k.viewRequestID = requestID
	k.epochSeenHighest = epoch
	k.renewEpoch = epoch
	k.nextSendAtNs = addSaturating(sentAtNs, k.cfg.RenewIntervalNs)
	return true
}

// OnDeny records a refusal of requestID; holder, epoch and remainingNs are
// the witness's word on who holds the lease (see LastDeny). A refusal of a
// request sent after the one that produced the view ends the view (the
// witness no longer counted this node as holder when it answered); a
// refusal of an older request changes no view. The next request goes out
// RetryNs after the refused one was sent, or, when the lease the refusal
// names ends sooner, a guard after that end. It returns false, changing
// nothing, for an unknown, answered or forgotten request ID.
func (k *Keeper) OnDeny(requestID uint64, holder NodeID, epoch uint64, remainingNs int64) bool {
	sentAtNs, ok := k.takeOutstanding(requestID)
	if !ok {
		return false
	}
	k.epochSeenHighest = max(k.epochSeenHighest, epoch)
	if requestID > k.viewRequestID {
		k.view.DurationNs = 0
		k.viewRequestID = requestID
		k.renewEpoch = 0
	}
	next := addSaturating(sentAtNs, k.cfg.RetryNs)
	// A refusal while a lease (or the restart quarantine) runs says when
	// it ends, as the arbiter counted it when the request arrived: when
	// that is sooner than the retry, ask again one guard after it, so a
	// standby takes over a dead primary's lease ~1/25 of RetryNs (2 ms at
	// the defaults) after it lapses instead of up to RetryNs (50 ms)
	// later. A refusal with no time left keeps the retry.
	if remainingNs > 0 && remainingNs < k.cfg.RetryNs {
		next = min(next, addSaturating(sentAtNs, remainingNs+denyGuardNs(k.cfg.RetryNs)))
	}
	k.nextSendAtNs = min(k.nextSendAtNs, next)
	k.lastDeny.holder = holder
	k.lastDeny.epoch = epoch
	k.lastDeny.remainingNs = remainingNs
	k.lastDeny.run = 0 // Reply.Deliver sets it after
	return true
}

// denyGuardNs is how long after a refusal's lease end the next request
// leaves (OnDeny): a twenty-fifth of the retry, at least 1 ns. It covers
// the request's one-way trip, which the arbiter's count of the time left
// started after.
func denyGuardNs(retryNs int64) int64 { return max(retryNs/25, 1) }

// Release gives the lease up: from now on MayLead is false and nothing
// is sent (SetWantLead(true) contends again, for a new epoch), and every
// reply still due is ignored (its request is forgotten). When the view
// may still count this node as holder at the arbiter (its epoch, within
// its duration by the local clock, margin 0), it returns the release
// request to send, so the arbiter can grant the next epoch at once rather
// than when the lease would have run out. The ordering rule: call it only
// after the node has stopped releasing, and send the request after it
// returns, never before: the arbiter ends the lease when the request
// arrives, and nothing may leave under it after that. A lost release
// costs only the wait for the lease to run out.
func (k *Keeper) Release(nowNs int64) (Request, bool) {
	held := k.view.Epoch != 0 && MayLead(k.view, nowNs, 0)
	k.view.DurationNs = 0
	k.renewEpoch = 0
	k.wantLead = false
	k.outstanding = [MaxOutstandingRequests]outstandingRequest{}
	k.acquireID = 0
	if !held {
		return Request{}, false
	}
	k.lastRequestID++ // a fresh ID for the arbiter's replay window; no reply is awaited
	k.viewRequestID = k.lastRequestID
	return Request{ID: k.lastRequestID, Kind: RequestRelease, Node: k.node, Epoch: k.view.Epoch, SentAtNs: nowNs, History: k.history}, true
}

// StartRequestIDsAfter makes the next request's ID id+1 (when that is
// above the last one used). A runtime seeds it once, before the first Tick,
// with a number unique to the process run (the wall clock's nanoseconds),
// so replies captured before a restart match no request after it.
func (k *Keeper) StartRequestIDsAfter(id uint64) {
	k.lastRequestID = max(k.lastRequestID, id)
}

// UnsafeRestamp moves the current view's start to nowNs, as if the lease
// were timed from the grant's arrival instead of the request's send. It
// breaks the lease's safety and exists only so the simulator can prove its
// checker catches that mistake; nothing in a production path calls it.
func (k *Keeper) UnsafeRestamp(nowNs int64) { k.view.SentAtNs = nowNs }

// MayLead reports whether this node may act as leader at nowNs (its own
// monotonic clock): MayLead(View(), nowNs, MarginNs).
func (k *Keeper) MayLead(nowNs int64) bool { return MayLead(k.view, nowNs, k.cfg.MarginNs) }

// View returns the current lease view. A view ended by a refusal keeps its
// epoch and has DurationNs 0.
func (k *Keeper) View() LeaseView { return k.view }

// Epoch returns the epoch of the current view (0 if never granted): the
// epoch to stamp on frames while MayLead is true. It never decreases.
func (k *Keeper) Epoch() uint64 { return k.view.Epoch }

// LastDenyRun is the last accepted refusal's Reply.Run: how many of the
// newest epochs, up to the one it named, were all granted to this node
// (0: unknown, or a refusal taken through OnDeny alone).
func (k *Keeper) LastDenyRun() uint64 { return k.lastDeny.run }

// LastDeny returns the holder, epoch and remaining time reported by the
// most recent refusal (zero before any).
func (k *Keeper) LastDeny() (holder NodeID, epoch uint64, remainingNs int64) {
	return k.lastDeny.holder, k.lastDeny.epoch, k.lastDeny.remainingNs
}

// takeOutstanding finds and forgets requestID, so each reply counts once.
func (k *Keeper) takeOutstanding(requestID uint64) (sentAtNs int64, ok bool) {
	slot := &k.outstanding[requestID%MaxOutstandingRequests]
	if requestID == 0 || slot.id != requestID {
		return 0, false
	}
	sentAtNs = slot.sentAtNs
	*slot = outstandingRequest{}
	if requestID == k.acquireID {
		k.acquireID = 0
	}
	return sentAtNs, true
}

// Hurry makes the next Tick at or after nowNs send a request at once (for a
// renew that carries an in-sync change the primary must not wait a whole
// renew interval for). It only moves the schedule earlier.
func (k *Keeper) Hurry(nowNs int64) {
	k.nextSendAtNs = min(k.nextSendAtNs, nowNs)
}
