package witness

import (
	"bytes"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// TestHandleRules drives the frame handler with injected time, one rule a
// row: every step sends one request and checks the whole reply.
func TestHandleRules(t *testing.T) {
	const ms = int64(time.Millisecond)
	type step struct {
		atNs int64
		pkt  func(t testing.TB) []byte
		want arbiter.Reply // Type 0 means "no reply"
	}
	acq := func(node arbiter.NodeID, id uint64) func(testing.TB) []byte {
		return func(t testing.TB) []byte { return acquireFrame(t, node, id) }
	}
	ren := func(node arbiter.NodeID, id, epoch uint64) func(testing.TB) []byte {
		return func(t testing.TB) []byte { return renewFrame(t, node, id, epoch) }
	}
	qry := func(id uint64) func(testing.TB) []byte {
		return func(testing.TB) []byte { return queryFrame(id) }
	}
	grant := func(id, epoch uint64, durNs int64) arbiter.Reply {
		return arbiter.Reply{Kind: arbiter.ReplyGrant, Witness: 99, RequestID: id, Epoch: epoch, Holder: 0, DurationNs: durNs}
	}
	deny := func(id uint64, holder arbiter.NodeID, epoch uint64, leftNs int64) arbiter.Reply {
		return arbiter.Reply{Kind: arbiter.ReplyDeny, Witness: 99, RequestID: id, Epoch: epoch, Holder: holder, RemainingNs: leftNs}
	}
	info := func(id uint64, holder arbiter.NodeID, epoch uint64, leftNs int64) arbiter.Reply {
		return arbiter.Reply{Kind: arbiter.ReplyInfo, Witness: 99, RequestID: id, Epoch: epoch, Holder: holder, RemainingNs: leftNs}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"free lease is granted epoch 1 for a full lease", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
		}},
		{"another node is denied with holder, epoch and time left", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
			{50 * ms, acq(2, 20), deny(20, 1, 1, testLeaseNs-50*ms)},
		}},
		{"holder renews under the same epoch", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
			{100 * ms, ren(1, 11, 1), grant(11, 1, testLeaseNs)},
			{250 * ms, acq(2, 20), deny(20, 1, 1, 50*ms)},
		}},
		{"renew with a stale epoch is denied", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
			{10 * ms, ren(1, 11, 7), deny(11, 1, 1, testLeaseNs-10*ms)},
		}},
		{"renew by a non-holder is denied", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
			{10 * ms, ren(2, 20, 1), deny(20, 1, 1, testLeaseNs-10*ms)},
		}},
		{"after expiry another node gets epoch+1", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
			// Node 2 joins the in-sync set, so it may be promoted.
			{0, func(t testing.TB) []byte { return renewInSyncFrame(t, 1, 12, 1, 1, 2) }, grant(12, 1, testLeaseNs)},
			{testLeaseNs, acq(2, 20), grant(20, 2, testLeaseNs)},
			{testLeaseNs + ms, ren(1, 11, 1), deny(11, 2, 2, testLeaseNs-ms)},
		}},
		{"node 0 is denied", []step{
			{0, func(testing.TB) []byte {
				l := wire.Lease{Type: wire.TypeLeaseAcquire, RequestID: 5}
				return l.Append(nil)
			}, deny(5, 0, 0, 0)},
		}},
		{"query on a fresh witness: nobody, epoch 0", []step{
			{0, qry(3), info(3, 0, 0, 0)},
		}},
		{"query names the holder, epoch and time left", []step{
			{0, acq(1, 10), grant(10, 1, testLeaseNs)},
			{20 * ms, qry(4), info(4, 1, 1, testLeaseNs-20*ms)},
			{testLeaseNs, qry(5), info(5, 0, 1, 0)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, &memStore{})
			for i, st := range tc.steps {
				got := s.handle(st.pkt(t), nodeAddr, st.atNs)
				if st.want.Kind == arbiter.ReplyNone {
					if got != nil {
						t.Fatalf("step %d: want no reply, got %+v", i, mustReply(t, got))
					}
					continue
				}
				r := mustReply(t, got)
				want := st.want
				if want.Kind == arbiter.ReplyGrant {
					want.Holder = r.Holder // the wire carries the requester; checked below
				}
				// This table checks the lease rules; TestHandleInSync checks
				// the in-sync fields, TestCoreDenyRun the run.
				r.InSyncVersion, r.Members, r.Run = 0, arbiter.InSyncSet{}, 0
				if r != want {
					t.Fatalf("step %d:\n got %+v\nwant %+v", i, r, want)
				}
			}
		})
	}
}

// TestHandleEchoesStream checks the reply carries the request's stream.
func TestHandleEchoesStream(t *testing.T) {
	s := newTestServer(t, &memStore{})
	got := s.handle(acquireFrame(t, 1, 1), nodeAddr, 0)
	f, _, err := wire.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if f.Stream != 7 || f.Node != 99 {
		t.Fatalf("reply stream %d node %d, want 7 and 99", f.Stream, f.Node)
	}
}

// TestHandleDrops feeds one bad datagram per row and checks it is dropped,
// unanswered, under the right reason, and changes nothing.
func TestHandleDrops(t *testing.T) {
	good := acquireFrame(t, 1, 1)
	corrupt := func(off int, b byte) []byte {
		c := bytes.Clone(good)
		c[off] ^= b
		return c
	}
	grantFrame := (&wire.Lease{Type: wire.TypeLeaseGrant, RequestID: 1, DurationNs: 1}).Append(nil)
	hb := (&wire.Heartbeat{Origin: wire.Origin{Node: 1, Epoch: 1}, HighestSeq: 5}).Append(nil)
	tests := []struct {
		name string
		pkt  []byte
		from bool // valid sender address
		want DropReason
	}{
		{"empty", nil, true, DropShort},
		{"short", good[:10], true, DropShort},
		{"magic", corrupt(0, 1), true, DropMagic},
		{"version", corrupt(2, 1), true, DropVersion},
		{"type", corrupt(3, 0x80), true, DropType},
		{"flags", corrupt(4, 2), true, DropFlags},
		{"length", good[:len(good)-1], true, DropLength},
		{"checksum", corrupt(wire.HeaderLen+1, 1), true, DropChecksum},
		{"count", reseal(corrupt(12, 0x10)), true, DropCount},
		{"reserved lease word", reseal(corrupt(wire.HeaderLen+12, 1)), true, DropFlags},
		{"a reply sent to the witness", grantFrame, true, DropNotRequest},
		{"a heartbeat sent to the witness", hb, true, DropNotRequest},
		{"trailing bytes", append(bytes.Clone(good), 0), true, DropTrailing},
		{"no return address", good, false, DropNoAddress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, &memStore{})
			from := nodeAddr
			if !tc.from {
				from = wireZeroAddr
			}
			if got := s.handle(tc.pkt, from, 0); got != nil {
				t.Fatalf("answered a bad datagram: %x", got)
			}
			st := s.Stats()
			if st.Drops[tc.want] != 1 || st.Dropped() != 1 {
				t.Fatalf("drops %v, want one %s", st.Drops, tc.want)
			}
			if st.Decisions != 0 || s.Status().Epoch != 0 {
				t.Fatalf("a dropped datagram reached the arbiter: %+v", st)
			}
		})
	}
}

// TestParseDropReasonCoversWireSentinels maps each wire sentinel to its own
// reason, so a new sentinel cannot silently land in another's counter.
func TestParseDropReasonCoversWireSentinels(t *testing.T) {
	for i, err := range []error{wire.ErrShort, wire.ErrMagic, wire.ErrVersion, wire.ErrType, wire.ErrFlags,
		wire.ErrLength, wire.ErrCount, wire.ErrChecksum, wire.ErrSeq} {
		if got := parseDropReason(err); got != DropReason(i) {
			t.Errorf("%v -> %s, want %s", err, got, DropReason(i))
		}
	}
	if got := parseDropReason(errOther); got != DropParseOther {
		t.Errorf("unknown error -> %s", got)
	}
	for r := DropReason(0); r < DropReasonsMax; r++ {
		if r.String() == "" {
			t.Errorf("reason %d has no name", r)
		}
	}
}

// TestResendAnsweredFromCache: the same (node, request ID) twice is
// decided once and answered twice with the same grant.
func TestResendAnsweredFromCache(t *testing.T) {
	s := newTestServer(t, &memStore{})
	first := mustReply(t, s.handle(acquireFrame(t, 1, 42), nodeAddr, 0))
	second := mustReply(t, s.handle(acquireFrame(t, 1, 42), nodeAddr, 0))
	if first != second || !first.Granted() || first.Epoch != 1 {
		t.Fatalf("resend answered differently:\n%+v\n%+v", first, second)
	}
	st := s.Stats()
	if st.Decisions != 1 || st.ResendsAnswered != 1 || st.Grants != 2 || st.GrantsNewEpoch != 1 || st.Acquires != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestResendAfterExpiryDoesNotGrantTwice: a node granted epoch 1 whose
// lease then expired resends the same acquire (a duplicated datagram).
// Decided afresh it would be epoch 2; from the cache it is not answered
// at all, and the arbiter is not asked.
func TestResendAfterExpiryDoesNotGrantTwice(t *testing.T) {
	s := newTestServer(t, &memStore{})
	mustReply(t, s.handle(acquireFrame(t, 1, 42), nodeAddr, 0))
	if got := s.handle(acquireFrame(t, 1, 42), nodeAddr, testLeaseNs); got != nil {
		t.Fatalf("expired grant resent: %+v", mustReply(t, got))
	}
	st := s.Stats()
	if st.Decisions != 1 || st.Drops[DropResendExpired] != 1 || s.Status().Epoch != 1 {
		t.Fatalf("stats %+v status %+v", st, s.Status())
	}
	// A new request ID is a new request: now epoch 2.
	if r := mustReply(t, s.handle(acquireFrame(t, 1, 43), nodeAddr, testLeaseNs)); r.Epoch != 2 {
		t.Fatalf("new request after expiry: %+v", r)
	}
}

// TestLostGrantResendKeepsEpoch: the grant to request 1 is lost, the node
// resends request 1 and then (its keeper's retry) request 2. The resend is
// the same grant (from the cache); request 2, a fresh acquire by the
// holder, starts a new term (arbiter.Acquire), which the node, never
// having used epoch 1, simply takes.
func TestLostGrantResendKeepsEpoch(t *testing.T) {
	const ms = int64(time.Millisecond)
	s := newTestServer(t, &memStore{})
	s.handle(acquireFrame(t, 1, 1), nodeAddr, 0) // reply lost
	r1 := mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 30*ms))
	r2 := mustReply(t, s.handle(acquireFrame(t, 1, 2), nodeAddr, 60*ms))
	if r1.Epoch != 1 || r2.Epoch != 2 || !r1.Granted() || !r2.Granted() {
		t.Fatalf("resend %+v, retry %+v: want epochs 1 and 2", r1, r2)
	}
	// The resend says what is left of the original grant, no more.
	if r1.DurationNs != testLeaseNs-30*ms {
		t.Fatalf("resend duration %d, want %d", r1.DurationNs, testLeaseNs-30*ms)
	}
	if st := s.Stats(); st.Decisions != 2 || st.GrantsNewEpoch != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestResendOfDenyCountsDown: a resent deny is the same deny with the
// time left reduced by the time since it was decided.
func TestResendOfDenyCountsDown(t *testing.T) {
	const ms = int64(time.Millisecond)
	s := newTestServer(t, &memStore{})
	mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0))
	d1 := mustReply(t, s.handle(acquireFrame(t, 2, 9), nodeAddr, 10*ms))
	d2 := mustReply(t, s.handle(acquireFrame(t, 2, 9), nodeAddr, 40*ms))
	if d1.Granted() || d2.Granted() || d2.RemainingNs != d1.RemainingNs-30*ms || d2.Holder != 1 {
		t.Fatalf("deny %+v, resent %+v", d1, d2)
	}
	if st := s.Stats(); st.Decisions != 2 || st.Denies[arbiter.ReasonHeld] != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSameIDDifferentRequestIsNew: a node reusing a request ID for a
// different request (a restarted keeper) is decided, not replayed.
func TestSameIDDifferentRequestIsNew(t *testing.T) {
	s := newTestServer(t, &memStore{})
	mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0))
	r := mustReply(t, s.handle(renewFrame(t, 1, 1, 1), nodeAddr, 10))
	if !r.Granted() || s.Stats().Decisions != 2 {
		t.Fatalf("renew with a reused ID: %+v, stats %+v", r, s.Stats())
	}
}

// TestCacheBound: the table keeps NodeTableMax nodes; one more evicts the
// least recently used, whose resend is then decided afresh (safely: same
// epoch while its lease lives), while a recently used node stays cached.
func TestCacheBound(t *testing.T) {
	s := newTestServer(t, &memStore{})
	now := int64(0)
	mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, now)) // node 1 holds epoch 1
	for n := arbiter.NodeID(2); n <= NodeTableMax; n++ {
		now++
		s.handle(acquireFrame(t, n, 1), nodeAddr, now)
	}
	if st := s.Stats(); st.CacheNodes != NodeTableMax || st.CacheEvictions != 0 {
		t.Fatalf("full table: %+v", st)
	}
	now++
	s.handle(acquireFrame(t, 2, 1), nodeAddr, now) // node 2 is now recent
	now++
	s.handle(acquireFrame(t, NodeTableMax+1, 1), nodeAddr, now) // evicts node 1
	st := s.Stats()
	if st.CacheNodes != NodeTableMax || st.CacheEvictions != 1 {
		t.Fatalf("after overflow: %+v", st)
	}
	decisions := st.Decisions
	now++
	if r := mustReply(t, s.handle(acquireFrame(t, 2, 1), nodeAddr, now)); r.Granted() {
		t.Fatalf("node 2's cached deny became %+v", r)
	}
	if s.Stats().Decisions != decisions {
		t.Fatal("node 2 was evicted instead of node 1")
	}
	now++
	r := mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, now))
	// Evicted from the cache, the resend is decided afresh by the
	// arbiter, which knows it as the request that started the live term:
	// the same grant, no new epoch.
	if !r.Granted() || r.Epoch != 1 || s.Stats().Decisions != decisions+1 {
		t.Fatalf("evicted holder's resend: %+v, decisions %d", r, s.Stats().Decisions)
	}
}

// TestPersistBeforeGrant: the store is written, with the granted epoch,
// before handle returns the grant; an extension writes nothing.
func TestPersistBeforeGrant(t *testing.T) {
	store := &memStore{}
	s := newTestServer(t, store)
	var sawReply bool
	store.onStore = func(uint64) { sawReply = s.stats.Grants > 0 }
	r := mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0))
	if sawReply || len(store.writes) != 1 || store.writes[0] != r.Epoch {
		t.Fatalf("writes %v for grant %+v (grant counted before write: %v)", store.writes, r, sawReply)
	}
	mustReply(t, s.handle(renewFrame(t, 1, 2, 1), nodeAddr, 10))
	if len(store.writes) != 1 {
		t.Fatalf("an extension was persisted: %v", store.writes)
	}
}

// TestPersistFailureWithholdsGrant: with a failing store nothing is sent,
// nothing is cached, and the unpersisted epoch is not sent later through
// an extension either; once the store works, the same epoch is persisted
// and granted.
func TestPersistFailureWithholdsGrant(t *testing.T) {
	store := &memStore{fail: true}
	s := newTestServer(t, store)
	if got := s.handle(acquireFrame(t, 1, 1), nodeAddr, 0); got != nil {
		t.Fatalf("grant sent without persisting: %+v", mustReply(t, got))
	}
	// The arbiter counts node 1 as holder of epoch 1; a resend and a
	// retry would extend it: still nothing may be sent.
	if got := s.handle(acquireFrame(t, 1, 1), nodeAddr, 10); got != nil {
		t.Fatalf("resend got %+v", mustReply(t, got))
	}
	if got := s.handle(acquireFrame(t, 1, 2), nodeAddr, 20); got != nil {
		t.Fatalf("extension of an unpersisted epoch got %+v", mustReply(t, got))
	}
	st := s.Stats()
	if st.PersistFailures != 3 || st.Drops[DropPersistFailed] != 3 || st.Grants != 0 || st.CacheNodes != 0 {
		t.Fatalf("stats %+v", st)
	}
	store.fail = false
	r := mustReply(t, s.handle(acquireFrame(t, 1, 3), nodeAddr, 30))
	if !r.Granted() || r.Epoch == 0 || store.epoch != r.Epoch || s.Stats().DurableEpoch != r.Epoch {
		t.Fatalf("after recovery: %+v, stored %d", r, store.epoch)
	}
}

// TestRestoreQuarantine: a witness restarted with epoch 5 on disk denies
// everyone (holder 0, epoch 5, quarantine left) for one lease, then grants
// epoch 6.
func TestRestoreQuarantine(t *testing.T) {
	store := &memStore{epoch: 5, found: true}
	s := newTestServer(t, store)
	restoredAtNs := s.lastNowNs
	if restoredAtNs < 0 {
		t.Fatalf("restore time %d", restoredAtNs)
	}
	end := restoredAtNs + testLeaseNs
	d := mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, end-1))
	if d.Granted() || d.Epoch != 5 || d.Holder != 0 || d.RemainingNs != 1 {
		t.Fatalf("during quarantine: %+v", d)
	}
	if st := s.Stats(); st.Denies[arbiter.ReasonQuarantine] != 1 {
		t.Fatalf("stats %+v", st)
	}
	q := mustReply(t, s.handle(queryFrame(1), nodeAddr, end-1))
	if q.Epoch != 5 || q.Holder != 0 || q.RemainingNs != 1 {
		t.Fatalf("info during quarantine: %+v", q)
	}
	g := mustReply(t, s.handle(acquireFrame(t, 2, 1), nodeAddr, end))
	if !g.Granted() || g.Epoch != 6 || store.epoch != 6 {
		t.Fatalf("after quarantine: %+v, stored %d", g, store.epoch)
	}
}

// TestFreshStartNoQuarantine: nothing on disk, the first acquire is
// granted at once with epoch 1.
func TestFreshStartNoQuarantine(t *testing.T) {
	s := newTestServer(t, &memStore{})
	if st := s.Status(); st.QuarantineRemainingNs != 0 || st.Epoch != 0 {
		t.Fatalf("fresh status %+v", st)
	}
	if r := mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0)); !r.Granted() || r.Epoch != 1 {
		t.Fatalf("fresh acquire %+v", r)
	}
}

// TestHandleTimeBackwards: a clock reading earlier than the last one is
// clamped; the lease does not come back to life and nothing panics.
func TestHandleTimeBackwards(t *testing.T) {
	s := newTestServer(t, &memStore{})
	mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, testLeaseNs))
	r := mustReply(t, s.handle(acquireFrame(t, 2, 1), nodeAddr, 0))
	if r.Granted() || r.RemainingNs != testLeaseNs {
		t.Fatalf("backwards time: %+v", r)
	}
}

// TestStartCloseLifecycle: Start twice fails, Close is idempotent, Start
// after Close fails, and the loop goroutine is gone (goleak in TestMain).
func TestStartCloseLifecycle(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			p := genTestPair(t, tr.real, "")
			if err := p.server.Start(); err != ErrStarted {
				t.Fatalf("second Start: %v", err)
			}
			if err := p.server.Close(); err != nil {
				t.Fatal(err)
			}
			if err := p.server.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if err := p.server.Start(); err != ErrStarted {
				t.Fatalf("Start after Close: %v", err)
			}
		})
	}
}

// TestNewRejectsBadInput covers New's argument checks.
func TestNewRejectsBadInput(t *testing.T) {
	if _, err := New(testConfig(), nil, t.TempDir()); err == nil {
		t.Fatal("nil conn accepted")
	}
	mem := newMemConn(t)
	if _, err := New(testConfig(), mem, ""); err == nil {
		t.Fatal("empty dir accepted")
	}
	bad := testConfig()
	bad.Arbiter.LeaseDurationNs = 0
	if _, err := New(bad, mem, t.TempDir()); err == nil {
		t.Fatal("invalid arbiter config accepted")
	}
}
