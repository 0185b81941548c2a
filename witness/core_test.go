package witness

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
)

// mustCore builds a fresh Core at time 0.
func mustCore(t *testing.T) *Core {
	t.Helper()
	c, err := NewCore(testConfig(), arbiter.PersistentState{}, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCoreStepAsksToPersistBeforeReplying (issue 17 item 3): the core does
// no I/O. A grant of a new epoch comes back from Step as MustPersist with
// the state to write and no reply; the reply exists only once Persisted
// is told the write succeeded, and only then is it cached and counted.
func TestCoreStepAsksToPersistBeforeReplying(t *testing.T) {
	c := mustCore(t)
	rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
	if !rd.MustPersist || rd.Reply != nil || rd.State != stateOf(1, 1, 1) {
		t.Fatalf("new epoch: %+v, want MustPersist of epoch 1 and no reply", rd)
	}
	if st := c.Stats(); st.Grants != 0 || st.Persists != 0 || st.CacheNodes != 0 || st.DurableEpoch != 0 {
		t.Fatalf("before Persisted: %+v", st)
	}
	r := mustReply(t, c.Persisted(nil))
	if !r.Granted() || r.Epoch != 1 || r.RequestID != 1 {
		t.Fatalf("after Persisted: %+v", r)
	}
	st := c.Stats()
	if st.Grants != 1 || st.AcquireGrants != 1 || st.GrantsNewEpoch != 1 || st.Persists != 1 || st.CacheNodes != 1 || st.DurableEpoch != 1 {
		t.Fatalf("after Persisted: %+v", st)
	}
	// An extension of a durable epoch needs no write: the reply at once.
	rd = c.Step(renewFrame(t, 1, 2, 1), nodeAddr, 10)
	if rd.MustPersist {
		t.Fatalf("renew of a durable epoch asks to persist: %+v", rd)
	}
	if r := mustReply(t, rd.Reply); !r.Granted() {
		t.Fatalf("renew: %+v", r)
	}
	// A query never writes.
	if rd = c.Step(queryFrame(3), nodeAddr, 20); rd.MustPersist || rd.Reply == nil {
		t.Fatalf("query: %+v", rd)
	}
}

// TestCorePersistFailureWithholdsTheGrant: a failed write sends nothing,
// caches nothing (a resend asks to write again) and is counted.
func TestCorePersistFailureWithholdsTheGrant(t *testing.T) {
	c := mustCore(t)
	if rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 0); !rd.MustPersist {
		t.Fatalf("%+v", rd)
	}
	if got := c.Persisted(ErrPersist); got != nil {
		t.Fatal("a reply after a failed write")
	}
	st := c.Stats()
	if st.PersistFailures != 1 || st.Drops[DropPersistFailed] != 1 || st.Grants != 0 || st.CacheNodes != 0 {
		t.Fatalf("after the failure: %+v", st)
	}
	rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 10)
	if !rd.MustPersist || rd.State.Epoch != 1 {
		t.Fatalf("resend after a failed write: %+v, want another write of epoch 1", rd)
	}
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.Epoch != 1 {
		t.Fatalf("%+v", r)
	}
}

// TestCoreMisuse: Persisted with no persist outstanding is a programmer
// error in the caller's loop and panics.
func TestCoreMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	c := mustCore(t)
	mustPanic("Persisted with nothing outstanding", func() { c.Persisted(nil) })
	c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
	c.Persisted(nil)
	mustPanic("Persisted twice", func() { c.Persisted(nil) })
}

// TestCoreAnswersWhileAWriteIsOutstanding: a slow disk must not silence
// the witness. While the holder's in-sync proposal is being written, its
// next renews are granted at once (the epoch is durable; the lease needs
// no disk) with the durable set, queries are answered, and nothing asks
// for a second write: a resend of the pending request and a new term
// wait (dropped, retried by the requester). Before, Step panicked with a
// write outstanding, so the Server wrote on its receive loop and a
// 3 s fsync under CI's load cost the primary its lease
// (TestInSyncStandbyPartitions).
func TestCoreAnswersWhileAWriteIsOutstanding(t *testing.T) {
	c := mustCore(t)
	if rd := c.Step(acquireFrame(t, 1, 1), nodeAddr, 0); !rd.MustPersist {
		t.Fatalf("acquire: %+v", rd)
	}
	mustReply(t, c.Persisted(nil)) // epoch 1, in-sync version 1, empty set
	ms := int64(time.Millisecond)

	rd := c.Step(renewInSyncFrame(t, 1, 2, 1, 1, 2), nodeAddr, 10*ms)
	if !rd.MustPersist || rd.State != stateOf(1, 2, 1, 2) {
		t.Fatalf("proposal: %+v, want a write of version 2 with member 2", rd)
	}
	// The write runs; the holder renews again and again.
	for i, id := range []uint64{3, 4} {
		rd := c.Step(renewFrame(t, 1, id, 1), nodeAddr, int64(20+i)*ms)
		if rd.MustPersist || rd.Reply == nil {
			t.Fatalf("renew %d while writing: %+v, want a grant now", id, rd)
		}
		r := mustReply(t, rd.Reply)
		if !r.Granted() || r.Epoch != 1 || r.RequestID != id || r.InSyncVersion != 1 || r.Members.N != 0 {
			t.Fatalf("renew %d while writing: %+v, want a grant of epoch 1 with the durable set (version 1, empty)", id, r)
		}
	}
	if r := mustReply(t, c.Step(queryFrame(9), nodeAddr, 30*ms).Reply); r.Holder != 1 || r.InSyncVersion != 1 {
		t.Fatalf("query while writing: %+v", r)
	}
	if rd := c.Step(renewInSyncFrame(t, 1, 2, 1, 1, 2), nodeAddr, 40*ms); rd.MustPersist || rd.Reply != nil {
		t.Fatalf("resend of the pending proposal: %+v, want nothing yet", rd)
	}
	// An acquire waits for the write, undecided (here it would be
	// denied: node 1 holds).
	if rd := c.Step(acquireFrame(t, 2, 1), nodeAddr, 50*ms); rd.MustPersist || rd.Reply != nil {
		t.Fatalf("node 2's acquire while writing: %+v, want nothing yet", rd)
	}
	st := c.Stats()
	if st.Drops[DropPersistPending] != 2 || st.GrantsWhilePersisting != 2 || st.Persists != 1 || st.DurableInSyncVersion != 1 || st.Decisions != 4 {
		t.Fatalf("while writing: %+v", st)
	}

	// The write is done: the proposal's grant goes out with the new set.
	r := mustReply(t, c.Persisted(nil))
	if !r.Granted() || r.RequestID != 2 || r.InSyncVersion != 2 || r.Members != inSync(2) {
		t.Fatalf("proposal after its write: %+v", r)
	}
	// The cache kept node 1's last request (4), not the older proposal.
	if r := mustReply(t, c.Step(renewFrame(t, 1, 4, 1), nodeAddr, 60*ms).Reply); !r.Granted() || r.RequestID != 4 {
		t.Fatalf("resend of renew 4: %+v", r)
	}
	if st := c.Stats(); st.ResendsAnswered != 1 || st.DurableInSyncVersion != 2 {
		t.Fatalf("after the write: %+v", st)
	}
	// Node 2's retry of its acquire is decided now: denied, node 1 holds.
	if r := mustReply(t, c.Step(acquireFrame(t, 2, 1), nodeAddr, 65*ms).Reply); r.Granted() || r.Holder != 1 {
		t.Fatalf("node 2's acquire after the write: %+v", r)
	}
	// A renew now carries the durable new set.
	if r := mustReply(t, c.Step(renewFrame(t, 1, 5, 1), nodeAddr, 70*ms).Reply); !r.Granted() || r.InSyncVersion != 2 || r.Members != inSync(2) {
		t.Fatalf("renew after the write: %+v", r)
	}
}

// TestCoreNewTermWaitsForTheWriteUnderWay: an acquire that would start a
// new term while another write is outstanding is not decided (no second
// write at once, the arbiter untouched); the requester's retry after the
// first write persists and grants it, so no epoch is ever granted before
// it is durable.
func TestCoreNewTermWaitsForTheWriteUnderWay(t *testing.T) {
	c := mustCore(t)
	c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
	mustReply(t, c.Persisted(nil))
	if rd := c.Step(renewInSyncFrame(t, 1, 2, 1, 1, 2), nodeAddr, 10); !rd.MustPersist {
		t.Fatalf("proposal: %+v", rd)
	}
	// Node 1's process restarted: a new term, epoch 2, needs its write.
	if rd := c.Step(acquireFrame(t, 1, 100), nodeAddr, 20); rd.MustPersist || rd.Reply != nil {
		t.Fatalf("new term while writing: %+v, want nothing", rd)
	}
	if st := c.Status(20); st.Epoch != 1 {
		t.Fatalf("the arbiter decided the waiting acquire: epoch %d", st.Epoch)
	}
	mustReply(t, c.Persisted(nil)) // the proposal's grant, epoch 1
	rd := c.Step(acquireFrame(t, 1, 100), nodeAddr, 30)
	if !rd.MustPersist || rd.State.Epoch != 2 {
		t.Fatalf("retried acquire: %+v, want a write of epoch 2", rd)
	}
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.Epoch != 2 || c.Stats().DurableEpoch != 2 {
		t.Fatalf("retried acquire after its write: %+v", r)
	}
}

// TestCoreRestoresQuarantined: a core built from a loaded state starts in
// the restart quarantine at its construction time; Report counts uptime
// from then.
func TestCoreRestoresQuarantined(t *testing.T) {
	c, err := NewCore(testConfig(), stateOf(9, 4, 2, 3), true, 1000)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Status(1000)
	if st.Epoch != 9 || st.QuarantineRemainingNs != testLeaseNs || st.LastHolder != 2 || c.Stats().DurableEpoch != 9 {
		t.Fatalf("status %+v", st)
	}
	if r := c.Report(1000 + 5); r.UptimeNs != 5 || r.Epoch != 9 || r.QuarantineRemainingNs != testLeaseNs-5 {
		t.Fatalf("report %+v", r)
	}
	if _, err := NewCore(testConfig(), arbiter.PersistentState{Epoch: 1, InSyncVersion: 1, LastHolder: 2, Members: inSync(2)}, true, 0); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("a state whose in-sync set holds its last holder restored: %v", err)
	}
}

// flakyConn is a connection whose first Receive fails with an error that
// is not a close and whose every Send fails.
type flakyConn struct {
	bus.Conn
	failedReceive atomic.Bool
}

func (c *flakyConn) Receive(bufs [][]byte, sizes []int, from []netip.AddrPort, wait time.Duration) (int, error) {
	if !c.failedReceive.Swap(true) {
		return 0, errOther
	}
	return c.Conn.Receive(bufs, sizes, from, wait)
}

func (c *flakyConn) Send([][]byte, netip.AddrPort) error { return errOther }

// TestServerCountsTransportErrors: the transport counters live in the
// Server, not the Core, and still reach Stats and the status report.
func TestServerCountsTransportErrors(t *testing.T) {
	mem := bus.NewMemNetwork(1, bus.Faults{})
	inner, addr := listen(t, false, mem)
	s, err := New(testConfig(), &flakyConn{Conn: inner}, t.TempDir())
	if err != nil {
		inner.Close()
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	node, _ := listen(t, false, mem)
	defer node.Close()
	if err := node.Send([][]byte{queryFrame(1)}, addr); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().SendErrors == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no send error counted: %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	st, r := s.Stats(), s.Report()
	if st.ReceiveErrors != 1 || st.SendErrors != 1 || st.Queries != 1 || r.ReceiveErrors != 1 || r.SendErrors != 1 {
		t.Fatalf("stats %+v report %+v", st, r)
	}
}

// TestCoreRelease: a holder's LEASE_RELEASE gets no reply and ends its
// lease, so an in-sync standby's acquire is granted the next epoch at
// once; its cached grant is not resent after; a release from another
// node, or of another epoch, changes nothing.
func TestCoreRelease(t *testing.T) {
	const ms = int64(time.Millisecond)
	c := mustCore(t)
	c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
	mustReply(t, c.Persisted(nil))
	if rd := c.Step(renewInSyncFrame(t, 1, 2, 1, 1, 2), nodeAddr, 10*ms); rd.MustPersist {
		mustReply(t, c.Persisted(nil))
	}
	for _, bad := range [][]byte{releaseFrame(t, 2, 1, 1), releaseFrame(t, 1, 3, 2)} {
		if rd := c.Step(bad, nodeAddr, 20*ms); rd.Reply != nil || rd.MustPersist {
			t.Fatalf("a stray release answered: %+v", rd)
		}
	}
	if r := mustReply(t, c.Step(acquireFrame(t, 2, 1), nodeAddr, 30*ms).Reply); r.Granted() || r.Holder != 1 {
		t.Fatalf("acquire while node 1 holds: %+v", r)
	}
	if rd := c.Step(releaseFrame(t, 1, 4, 1), nodeAddr, 40*ms); rd.Reply != nil || rd.MustPersist {
		t.Fatalf("release answered: %+v", rd)
	}
	if st := c.Stats(); st.Releases != 3 || st.ReleasesTaken != 1 {
		t.Fatalf("releases %d, taken %d: want 3, 1", st.Releases, st.ReleasesTaken)
	}
	expired := c.Stats().Drops[DropResendExpired]
	if rd := c.Step(renewFrame(t, 1, 2, 1), nodeAddr, 41*ms); rd.Reply != nil || c.Stats().Drops[DropResendExpired] != expired+1 {
		t.Fatalf("a late copy of node 1's last renew after its release: reply %v, want none (its cached grant cut off at the release)", rd.Reply != nil)
	}
	rd := c.Step(acquireFrame(t, 2, 2), nodeAddr, 50*ms)
	if !rd.MustPersist || rd.State.Epoch != 2 {
		t.Fatalf("acquire after the release: %+v, want a new epoch 2 to persist", rd)
	}
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.Epoch != 2 {
		t.Fatalf("grant after the release: %+v", r)
	}
}

// TestCoreDecline: the two-node double fault of a replaced disk, over
// the wire. Node 1 led with node 2 in sync; node 2 came back with an
// empty directory and was granted the next epoch as the only member.
// Node 1 is then refused (NO NODE MAY BE PROMOTED) until node 2's
// declined release undoes the grant; then node 1 takes the lease back at
// once, and node 2 is refused. A plain release by node 2 would not undo
// it.
func TestCoreDecline(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, declined := range []bool{false, true} {
		c := mustCore(t)
		c.Step(acquireFrame(t, 1, 1), nodeAddr, 0)
		mustReply(t, c.Persisted(nil))
		if rd := c.Step(renewInSyncFrame(t, 1, 2, 1, 1, 2), nodeAddr, 10*ms); rd.MustPersist {
			mustReply(t, c.Persisted(nil))
		}
		c.Step(releaseFrame(t, 1, 3, 1), nodeAddr, 20*ms)
		if rd := c.Step(acquireFrame(t, 2, 1), nodeAddr, 30*ms); !rd.MustPersist || rd.State.LastHolder != 2 {
			t.Fatalf("node 2's acquire: %+v", rd)
		}
		mustReply(t, c.Persisted(nil))
		if r := mustReply(t, c.Step(acquireFrame(t, 1, 4), nodeAddr, 40*ms).Reply); r.Granted() {
			t.Fatalf("node 1 granted while node 2 holds: %+v", r)
		}
		b, err := AppendRequest(nil, arbiter.Request{ID: 2, Kind: arbiter.RequestRelease, Node: 2, Epoch: 2, Declined: declined}, 7)
		if err != nil {
			t.Fatal(err)
		}
		if rd := c.Step(b, nodeAddr, 50*ms); rd.Reply != nil || rd.MustPersist {
			t.Fatalf("release answered: %+v", rd)
		}
		rd := c.Step(acquireFrame(t, 1, 5), nodeAddr, 60*ms)
		if !declined {
			if r := mustReply(t, rd.Reply); r.Granted() || c.Report(60*ms).PromotionBlocked != 1 {
				t.Fatalf("node 1 after a plain release: %+v, blocked %d", r, c.Report(60*ms).PromotionBlocked)
			}
			continue
		}
		if !rd.MustPersist || rd.State.Epoch != 3 || rd.State.LastHolder != 1 {
			t.Fatalf("node 1 after the decline: %+v, want epoch 3 to persist", rd)
		}
		if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.Epoch != 3 || r.Members.N != 0 {
			t.Fatalf("node 1's grant: %+v", r)
		}
		st := c.Report(70 * ms)
		if st.Grants["undone"] != 1 || st.PromotionBlocked != 0 {
			t.Fatalf("report: undone %d, blocked %d", st.Grants["undone"], st.PromotionBlocked)
		}
	}
}

// TestCoreDenyRun: a refusal to the last holder carries how many of the
// newest epochs were all its own (new terms whose grants it never got);
// a refusal to another node carries none.
func TestCoreDenyRun(t *testing.T) {
	const ms = int64(time.Millisecond)
	c := mustCore(t)
	now := int64(0)
	for i, id := range []uint64{1, 2, 3} { // three new terms of node 1
		if rd := c.Step(acquireFrame(t, 1, id), nodeAddr, now); !rd.MustPersist {
			t.Fatalf("acquire %d: %+v", i, rd)
		}
		mustReply(t, c.Persisted(nil))
		now += 2000 * ms // past the lease: the next acquire is a new term
	}
	r := mustReply(t, c.Step(renewFrame(t, 1, 4, 1), nodeAddr, now).Reply)
	if r.Granted() || r.Epoch != 3 || r.Run != 3 {
		t.Fatalf("node 1's refused renew: %+v, want epoch 3, run 3", r)
	}
	if r := mustReply(t, c.Step(acquireFrame(t, 2, 1), nodeAddr, now).Reply); r.Granted() || r.Run != 0 {
		t.Fatalf("node 2's refusal: %+v, want no run", r)
	}
}

// TestCoreHistory: the witness pins the cluster's history id with the
// first granted request that names one (written before the grant
// leaves) and refuses the lease to a node asking with another, even a
// member of the in-sync set whose lease is free; every reply carries the
// pinned id once it is durable.
func TestCoreHistory(t *testing.T) {
	const ms = int64(time.Millisecond)
	const ours, theirs = 0x1111, 0x2222
	frame := func(kind arbiter.RequestKind, node arbiter.NodeID, id, epoch, history uint64, members ...arbiter.NodeID) []byte {
		p := arbiter.InSyncProposal{N: len(members)}
		if len(members) > 0 {
			p.BaseVersion = 1
		}
		copy(p.Members[:], members)
		b, err := AppendRequestInSync(nil, arbiter.Request{ID: id, Kind: kind, Node: node, Epoch: epoch, History: history}, 7, p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := mustCore(t)
	c.Step(frame(arbiter.RequestAcquire, 1, 1, 0, 0), nodeAddr, 0) // a new directory: no id yet
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.History != 0 {
		t.Fatalf("first grant: %+v", r)
	}
	rd := c.Step(frame(arbiter.RequestRenew, 1, 2, 1, ours, 2), nodeAddr, 10*ms)
	if !rd.MustPersist || rd.State.History != ours {
		t.Fatalf("the renew naming the id must pin it before its grant: %+v", rd)
	}
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.History != ours || r.Members.N != 1 {
		t.Fatalf("pinned renew: %+v", r)
	}
	// Node 1's lease runs out; node 2, a member, asks with another
	// history (restarted on another cluster's directory).
	rd = c.Step(frame(arbiter.RequestAcquire, 2, 1, 0, theirs), nodeAddr, 2000*ms)
	if r := mustReply(t, rd.Reply); rd.MustPersist || r.Granted() || r.History != ours {
		t.Fatalf("foreign member: %+v", rd)
	}
	if st := c.Report(2000 * ms); st.Denies[arbiter.ReasonForeignHistory.String()] != 1 {
		t.Fatalf("denies %v", st.Denies)
	}
	rd = c.Step(frame(arbiter.RequestAcquire, 2, 2, 0, ours), nodeAddr, 2010*ms)
	if !rd.MustPersist || rd.State.History != ours {
		t.Fatalf("member of the history: %+v", rd)
	}
	if r := mustReply(t, c.Persisted(nil)); !r.Granted() || r.Epoch != 2 {
		t.Fatalf("member's grant: %+v", r)
	}
}
