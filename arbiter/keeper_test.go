package arbiter

import (
	"testing"
)

func newTestKeeper(t *testing.T, node NodeID) *Keeper {
	t.Helper()
	k, err := NewKeeper(node, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustTick(t *testing.T, k *Keeper, nowNs int64, wantKind RequestKind) Request {
	t.Helper()
	req, ok := k.Tick(nowNs)
	if !ok {
		t.Fatalf("Tick(%d): nothing to send, want a %s", nowNs, wantKind)
	}
	if req.Kind != wantKind || req.SentAtNs != nowNs || req.Node != k.node {
		t.Fatalf("Tick(%d) = %+v, want kind %s, SentAtNs %d, node %d", nowNs, req, wantKind, nowNs, k.node)
	}
	return req
}

func mustNotTick(t *testing.T, k *Keeper, nowNs int64) {
	t.Helper()
	if req, ok := k.Tick(nowNs); ok {
		t.Fatalf("Tick(%d) = %+v, want nothing to send", nowNs, req)
	}
}

func TestKeeperSilentUntilItWantsToLead(t *testing.T) {
	k := newTestKeeper(t, 3)
	mustNotTick(t, k, 0)
	mustNotTick(t, k, 1e9)
	k.SetWantLead(true)
	req := mustTick(t, k, 1e9, RequestAcquire)
	if req.ID != 1 || req.Epoch != 0 {
		t.Fatalf("first request %+v, want ID 1 epoch 0", req)
	}
}

// acquireUsableNs is how long testConfig's keeper resends one unanswered
// acquire under the same ID: while a grant of it could still be used.
const acquireUsableNs = 1000 - 150

// distinctAcquires sends n unanswered acquires with n different IDs, each
// after the previous one's resend window (so the i-th is sent at
// i*acquireUsableNs).
func distinctAcquires(t *testing.T, k *Keeper, n int) []Request {
	t.Helper()
	var reqs []Request
	for i := range n {
		reqs = append(reqs, mustTick(t, k, int64(i)*acquireUsableNs, RequestAcquire))
		if i > 0 && reqs[i].ID != reqs[i-1].ID+1 {
			t.Fatalf("request IDs %d then %d, want increasing by one", reqs[i-1].ID, reqs[i].ID)
		}
	}
	return reqs
}

func TestKeeperRetriesAfterRetryNs(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	mustTick(t, k, 100, RequestAcquire)
	mustNotTick(t, k, 149) // unanswered, but RetryNs (50) not yet elapsed
	mustTick(t, k, 150, RequestAcquire)
}

func TestKeeperResendsAnUnansweredAcquireUnderItsID(t *testing.T) {
	// The retry of an acquire that crossed its grant (issue 15 item 3)
	// must be the same request, so the witness answers it with the same
	// grant instead of a second term.
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 100, RequestAcquire)
	r2 := mustTick(t, k, 150, RequestAcquire)
	r3 := mustTick(t, k, 100+acquireUsableNs-1, RequestAcquire)
	if r2.ID != r1.ID || r3.ID != r1.ID {
		t.Fatalf("resends carry IDs %d, %d after %d: want the same ID", r2.ID, r3.ID, r1.ID)
	}
	// The grant is timed from the FIRST send: the witness may have
	// granted the first datagram.
	if !k.OnGrant(r1.ID, 4, 1000) || k.View().SentAtNs != 100 {
		t.Fatalf("view %+v, want timed from the first send at 100", k.View())
	}
	if k.OnGrant(r1.ID, 4, 1000) {
		t.Fatal("the resend's reply counted twice")
	}
	// A grant of that acquire could no longer be used once it is older
	// than the lease minus the margin: a fresh request then.
	k2 := newTestKeeper(t, 1)
	k2.SetWantLead(true)
	a := mustTick(t, k2, 100, RequestAcquire)
	b := mustTick(t, k2, 100+acquireUsableNs, RequestAcquire)
	if b.ID != a.ID+1 {
		t.Fatalf("request IDs %d then %d past the usable window, want a new ID", a.ID, b.ID)
	}
	// A refused acquire is answered: the next one is a new request.
	if !k2.OnDeny(b.ID, 2, 1, 500) {
		t.Fatal("deny refused")
	}
	if c := mustTick(t, k2, 100+acquireUsableNs+50, RequestAcquire); c.ID != b.ID+1 {
		t.Fatalf("request after a deny has ID %d, want %d", c.ID, b.ID+1)
	}
}

func TestKeeperTimesLeaseFromSendNotReply(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	req := mustTick(t, k, 0, RequestAcquire)
	// The grant arrives 900 ns after sending (the reply was slow). The
	// witness granted at some time in [0, 900]; only the send time is safe.
	if !k.OnGrant(req.ID, 1, 1000) {
		t.Fatal("grant refused")
	}
	if got, want := k.View(), (LeaseView{Epoch: 1, SentAtNs: 0, DurationNs: 1000}); got != want {
		t.Fatalf("view %+v, want %+v", got, want)
	}
	if !k.MayLead(849) || k.MayLead(850) || k.MayLead(900) {
		t.Fatalf("MayLead(849, 850, 900) = %v %v %v, want true false false", k.MayLead(849), k.MayLead(850), k.MayLead(900))
	}
	if k.Epoch() != 1 {
		t.Fatalf("Epoch = %d", k.Epoch())
	}
}

func TestKeeperRenewsEveryRenewInterval(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 0, RequestAcquire)
	k.OnGrant(r1.ID, 7, 1000)
	mustNotTick(t, k, 50) // answered: no retry
	mustNotTick(t, k, 249)
	r2 := mustTick(t, k, 250, RequestRenew)
	if r2.Epoch != 7 {
		t.Fatalf("renew carries epoch %d, want 7", r2.Epoch)
	}
	k.OnGrant(r2.ID, 7, 1000)
	if got := k.View().SentAtNs; got != 250 {
		t.Fatalf("view SentAt %d after renewal, want 250", got)
	}
	mustNotTick(t, k, 499)
	mustTick(t, k, 500, RequestRenew)
}

func TestKeeperRenewsUntilLeaseEndThenAcquires(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 0, RequestAcquire)
	k.OnGrant(r1.ID, 2, 1000)
	// Renewals go unanswered. Past the margin the node may not lead, but the
	// witness may still count it as holder: keep renewing (same epoch).
	mustTick(t, k, 900, RequestRenew)
	if k.MayLead(900) {
		t.Fatal("MayLead past the margin")
	}
	// At the lease end by the local clock the keeper still renews its
	// epoch: only a refusal says the epoch is over (a witness that
	// restarted lets its last holder renew at once).
	r2 := mustTick(t, k, 1000, RequestRenew)
	if r2.Epoch != 2 || k.MayLead(1000) {
		t.Fatalf("renew %+v after the view lapsed, want epoch 2 and no leading", r2)
	}
	r3 := mustTick(t, k, 5000, RequestRenew)
	if !k.OnDeny(r3.ID, NodeNone, 2, 0) {
		t.Fatal("deny refused")
	}
	// Refused: the epoch is over, ask afresh.
	mustTick(t, k, 5050, RequestAcquire)
}

func TestKeeperGivingUpTheLeaseGivesUpTheEpoch(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 0, RequestAcquire)
	k.OnGrant(r1.ID, 2, 1000)
	k.SetWantLead(false)
	mustNotTick(t, k, 1000)
	k.SetWantLead(true)
	mustTick(t, k, 1100, RequestAcquire)
}

func TestKeeperIgnoresUnusableGrants(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	reqs := distinctAcquires(t, k, 4)
	r1, r2, r3, r4 := reqs[0], reqs[1], reqs[2], reqs[3]
	if k.OnGrant(999, 1, 1000) {
		t.Error("grant for a never-sent request accepted")
	}
	if k.OnGrant(0, 1, 1000) {
		t.Error("grant for request 0 accepted")
	}
	if k.OnGrant(r1.ID, 0, 1000) {
		t.Error("grant of epoch 0 accepted")
	}
	// The malformed grant did not consume request 1.
	if !k.OnGrant(r1.ID, 5, 1000) {
		t.Fatal("good grant refused after a malformed one")
	}
	if !k.OnGrant(r3.ID, 5, 1000) {
		t.Fatal("same epoch from a newer request refused")
	}
	if k.OnGrant(r3.ID, 5, 1000) {
		t.Error("duplicate grant accepted")
	}
	// Same epoch from an older request must not move the view back.
	if k.OnGrant(r2.ID, 5, 1000) {
		t.Error("older request's grant of the same epoch accepted")
	}
	if got := k.View().SentAtNs; got != r3.SentAtNs {
		t.Fatalf("view SentAt %d, want %d", got, r3.SentAtNs)
	}
	// An older epoch is dead.
	if k.OnGrant(r4.ID, 4, 1000) {
		t.Error("stale epoch accepted")
	}
	if k.Epoch() != 5 {
		t.Fatalf("Epoch %d, want 5", k.Epoch())
	}
}

func TestKeeperNonPositiveDurationIgnored(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 0, RequestAcquire)
	r2 := mustTick(t, k, 50, RequestAcquire)
	if k.OnGrant(r1.ID, 1, 0) || k.OnGrant(r2.ID, 1, -1) {
		t.Fatal("grant with non-positive duration accepted")
	}
	if k.MayLead(60) {
		t.Fatal("MayLead without a lease")
	}
}

func TestKeeperNewerEpochFromOlderRequestAccepted(t *testing.T) {
	// The witness answers in its own order: request 2 got epoch 3, then
	// request 1 (delayed) got epoch 4 after epoch 3 lapsed. Epoch 4 is the
	// newer term and is timed from request 1's send.
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	reqs := distinctAcquires(t, k, 2)
	r1, r2 := reqs[0], reqs[1]
	k.OnGrant(r2.ID, 3, 1000)
	if !k.OnGrant(r1.ID, 4, 1000) {
		t.Fatal("newer epoch refused")
	}
	if got, want := k.View(), (LeaseView{Epoch: 4, SentAtNs: 0, DurationNs: 1000}); got != want {
		t.Fatalf("view %+v, want %+v", got, want)
	}
}

func TestKeeperCapsGrantedDuration(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r := mustTick(t, k, 0, RequestAcquire)
	k.OnGrant(r.ID, 1, 1<<62)
	if got := k.View().DurationNs; got != testConfig.LeaseDurationNs {
		t.Fatalf("duration %d, want capped at %d", got, testConfig.LeaseDurationNs)
	}
	if k.MayLead(850) {
		t.Fatal("MayLead beyond the configured lease")
	}
}

func TestKeeperRememberedRequestsAreBounded(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	reqs := distinctAcquires(t, k, MaxOutstandingRequests+1)
	// The ninth request overwrote the first: its grant is ignored.
	if k.OnGrant(reqs[0].ID, 1, 1000) {
		t.Fatal("grant for a forgotten request accepted")
	}
	if !k.OnGrant(reqs[1].ID, 1, 1000) {
		t.Fatal("grant for the oldest remembered request refused")
	}
	if got := k.View().SentAtNs; got != reqs[1].SentAtNs {
		t.Fatalf("view SentAt %d, want %d", got, reqs[1].SentAtNs)
	}
}

func TestKeeperNewerDenyEndsView(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 0, RequestAcquire)
	k.OnGrant(r1.ID, 3, 1000)
	r2 := mustTick(t, k, 250, RequestRenew)
	if !k.OnDeny(r2.ID, 2, 4, 600) {
		t.Fatal("deny refused")
	}
	if k.MayLead(260) {
		t.Fatal("MayLead after a refusal newer than the view")
	}
	if k.Epoch() != 3 {
		t.Fatalf("Epoch %d after deny, want 3 (kept)", k.Epoch())
	}
	if h, e, r := k.LastDeny(); h != 2 || e != 4 || r != 600 {
		t.Fatalf("LastDeny = %d %d %d", h, e, r)
	}
	// Retry RetryNs after the refused request was sent, as an acquire.
	mustNotTick(t, k, 299)
	r3 := mustTick(t, k, 300, RequestAcquire)
	// The deny said epoch 4 exists: a grant of 3 is dead on arrival.
	if k.OnGrant(r3.ID, 3, 1000) {
		t.Fatal("grant older than a denied epoch accepted")
	}
}

func TestKeeperOlderDenyKeepsView(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	reqs := distinctAcquires(t, k, 2)
	r1, r2 := reqs[0], reqs[1]
	k.OnGrant(r2.ID, 3, 1000)
	if !k.OnDeny(r1.ID, 2, 2, 10) {
		t.Fatal("deny refused")
	}
	if !k.MayLead(r2.SentAtNs + 50) {
		t.Fatal("an older refusal ended a newer view")
	}
	if k.OnDeny(r1.ID, 2, 2, 10) {
		t.Fatal("duplicate deny accepted")
	}
	if k.OnDeny(12345, 2, 2, 10) {
		t.Fatal("deny for unknown request accepted")
	}
}

func TestKeeperStopsRenewingWhenNotWanting(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	r1 := mustTick(t, k, 0, RequestAcquire)
	k.OnGrant(r1.ID, 1, 1000)
	k.SetWantLead(false)
	mustNotTick(t, k, 250)
	if !k.MayLead(500) {
		t.Fatal("stepping back ended the view early; the lease is still held")
	}
	if k.MayLead(850) {
		t.Fatal("MayLead past the view")
	}
	k.SetWantLead(true)
	mustTick(t, k, 900, RequestRenew)
}

func TestKeeperHotPathDoesNotAllocate(t *testing.T) {
	k := newTestKeeper(t, 1)
	k.SetWantLead(true)
	nowNs := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		req, ok := k.Tick(nowNs)
		if ok {
			k.OnGrant(req.ID, 1, 1000)
		}
		_ = k.MayLead(nowNs)
		nowNs += 10
	}); n != 0 {
		t.Fatalf("Tick/OnGrant/MayLead allocate %v per run", n)
	}
}

func TestArbiterHotPathDoesNotAllocate(t *testing.T) {
	a, err := NewArbiter(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	nowNs := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		d := a.Acquire(1, nowNs)
		a.Renew(1, d.Epoch, nowNs)
		a.Acquire(2, nowNs)
		a.Query(nowNs)
		nowNs += 10
	}); n != 0 {
		t.Fatalf("Acquire/Renew/Query allocate %v per run", n)
	}
}

func TestKeeperHurry(t *testing.T) {
	k, err := NewKeeper(1, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	k.SetWantLead(true)
	req, ok := k.Tick(0)
	if !ok || !k.OnGrant(req.ID, 1, DefaultLeaseDurationNs) {
		t.Fatal("no grant")
	}
	if _, ok := k.Tick(1000); ok {
		t.Fatal("renewed before the interval")
	}
	k.Hurry(1000)
	if req, ok := k.Tick(1000); !ok || req.Kind != RequestRenew {
		t.Fatalf("Hurry did not make the next tick renew: %+v %v", req, ok)
	}
}

// TestKeeperAsksAgainWhenTheDeniedLeaseEnds: a refusal whose lease ends
// before the retry is due schedules the next request just after that end
// (a guard of RetryNs/25 later), so a standby takes a dead primary's lease
// as it lapses; a longer lease, or a refusal with no time left, keeps the
// retry; and it never delays a request already due sooner.
func TestKeeperAsksAgainWhenTheDeniedLeaseEnds(t *testing.T) {
	guard := denyGuardNs(testConfig.RetryNs) // testConfig: retry 50, guard 2
	for _, tc := range []struct {
		name      string
		remaining int64
		next      int64 // after the request sent at 100
	}{
		{"lease ends in 10", 10, 100 + 10 + guard},
		{"lease ends in 47", 47, 100 + 47 + guard},
		{"lease ends in 49: the retry comes first", 49, 150},
		{"lease ends in 500", 500, 150},
		{"no time left", 0, 150},
		{"negative", -5, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newTestKeeper(t, 1)
			k.SetWantLead(true)
			r := mustTick(t, k, 100, RequestAcquire)
			if !k.OnDeny(r.ID, 2, 1, tc.remaining) {
				t.Fatal("deny refused")
			}
			mustNotTick(t, k, tc.next-1)
			mustTick(t, k, tc.next, RequestAcquire)
		})
	}
	if guard != 2 {
		t.Fatalf("guard %d for RetryNs %d, want 2", guard, testConfig.RetryNs)
	}
}
