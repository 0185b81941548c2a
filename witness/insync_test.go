package witness

import (
	"errors"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// TestHandleInSync: the in-sync set through the frame handler. Every
// grant, deny and info carries the version and set; a proposal on a renew
// is a compare-and-set persisted before the grant; a resend does not apply
// it twice; a node outside the set is refused after a lapse.
func TestHandleInSync(t *testing.T) {
	store := &memStore{}
	s := newTestServer(t, store)
	g := mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0))
	if !g.Granted() || g.InSyncVersion != 1 || g.Members != inSync() {
		t.Fatalf("first grant %+v", g)
	}
	// Accepted proposal: persisted (with the set and holder) before the
	// grant, which reports version 2.
	var grantsAtWrite uint64
	store.onStore = func(uint64) { grantsAtWrite = s.stats.Grants }
	grantsBefore := s.stats.Grants
	prop := renewInSyncFrame(t, 1, 2, 1, 1, 3, 2)
	g = mustReply(t, s.handle(prop, nodeAddr, 10))
	want := arbiter.PersistentState{Epoch: 1, InSyncVersion: 2, LastHolder: 1, Members: inSync(2, 3)}
	if !g.Granted() || g.InSyncVersion != 2 || g.Members != inSync(2, 3) || store.state != want || grantsAtWrite != grantsBefore {
		t.Fatalf("accepted proposal: grant %+v, stored %+v (grants at write %d, before %d)", g, store.state, grantsAtWrite, grantsBefore)
	}
	writes, decisions := len(store.writes), s.Stats().Decisions
	// A resend of the same datagram is answered from the cache.
	g = mustReply(t, s.handle(prop, nodeAddr, 20))
	if g.InSyncVersion != 2 || len(store.writes) != writes || s.Stats().Decisions != decisions {
		t.Fatalf("resend: %+v, writes %d, decisions %d", g, len(store.writes), s.Stats().Decisions)
	}
	// A stale proposal: renew granted, set unchanged, nothing written.
	g = mustReply(t, s.handle(renewInSyncFrame(t, 1, 3, 1, 1, 3), nodeAddr, 30))
	if !g.Granted() || g.InSyncVersion != 2 || g.Members != inSync(2, 3) || len(store.writes) != writes {
		t.Fatalf("stale proposal: %+v", g)
	}
	// An invalid one (the holder itself): the same.
	g = mustReply(t, s.handle(renewInSyncFrame(t, 1, 4, 1, 2, 1, 2), nodeAddr, 40))
	if !g.Granted() || g.InSyncVersion != 2 || len(store.writes) != writes {
		t.Fatalf("invalid proposal: %+v", g)
	}
	if st := s.Stats(); st.InSyncProposals != 3 || st.InSyncRefused != 2 || st.DurableInSyncVersion != 2 {
		t.Fatalf("stats %+v", st)
	}
	// A deny and an info carry the set.
	d := mustReply(t, s.handle(acquireFrame(t, 4, 1), nodeAddr, 50))
	q := mustReply(t, s.handle(queryFrame(9), nodeAddr, 50))
	if d.Granted() || d.InSyncVersion != 2 || d.Members != inSync(2, 3) || q.InSyncVersion != 2 || q.Members != inSync(2, 3) {
		t.Fatalf("deny %+v info %+v", d, q)
	}
	// After the lapse node 4 is refused, node 3 is promoted and leaves the
	// set; node 1 does not join it.
	lapse := 40 + testLeaseNs
	d = mustReply(t, s.handle(acquireFrame(t, 4, 2), nodeAddr, lapse))
	if d.Granted() || s.Stats().Denies[arbiter.ReasonNotInSync] != 1 {
		t.Fatalf("non-member after lapse: %+v, stats %+v", d, s.Stats())
	}
	g = mustReply(t, s.handle(acquireFrame(t, 3, 1), nodeAddr, lapse))
	want = arbiter.PersistentState{Epoch: 2, InSyncVersion: 3, LastHolder: 3, Members: inSync(2)}
	if !g.Granted() || g.Epoch != 2 || g.Members != inSync(2) || store.state != want {
		t.Fatalf("member after lapse: %+v, stored %+v", g, store.state)
	}
}

// TestInSyncPersistFailure: a set change whose write fails is not sent;
// a later plain renew must persist it before granting, and meanwhile a
// deny reports the durable set, not the unpersisted one.
func TestInSyncPersistFailure(t *testing.T) {
	store := &memStore{}
	s := newTestServer(t, store)
	mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0))
	store.fail = true
	if got := s.handle(renewInSyncFrame(t, 1, 2, 1, 1, 2), nodeAddr, 10); got != nil {
		t.Fatalf("unpersisted set sent: %+v", mustReply(t, got))
	}
	d := mustReply(t, s.handle(acquireFrame(t, 2, 1), nodeAddr, 20))
	if d.Granted() || d.InSyncVersion != 1 || d.Members != inSync() {
		t.Fatalf("deny reports an unpersisted set: %+v", d)
	}
	if got := s.handle(renewFrame(t, 1, 3, 1), nodeAddr, 30); got != nil {
		t.Fatalf("renew sent with the set unpersisted: %+v", mustReply(t, got))
	}
	store.fail = false
	g := mustReply(t, s.handle(renewFrame(t, 1, 4, 1), nodeAddr, 40))
	if !g.Granted() || g.InSyncVersion != 2 || g.Members != inSync(2) || store.state.Members != inSync(2) {
		t.Fatalf("after recovery: %+v, stored %+v", g, store.state)
	}
}

// TestClientProposeInSync: a proposal rides on the next renew only, once;
// an acquire leaves it pending and a later one replaces it; bad proposals
// are refused; the grant's set reaches Reply.
func TestClientProposeInSync(t *testing.T) {
	s := newTestServer(t, &memStore{})
	k, _ := arbiter.NewKeeper(1, testConfig().Arbiter)
	k.SetWantLead(true)
	c := NewClient(k, 0)
	if err := c.ProposeInSync(0, nil); !errors.Is(err, ErrRequest) || !errors.Is(err, arbiter.ErrProposal) {
		t.Fatalf("base 0: %v", err)
	}
	if err := c.ProposeInSync(1, make([]arbiter.NodeID, 9)); !errors.Is(err, ErrRequest) || !errors.Is(err, arbiter.ErrProposal) {
		t.Fatalf("9 members: %v", err)
	}
	if err := c.ProposeInSync(1, []arbiter.NodeID{3}); err != nil { // before any grant
		t.Fatal(err)
	}
	decode := func(pkt []byte) wire.Lease {
		f, _, err := wire.Parse(pkt)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := wire.DecodeLease(&f)
		return l
	}
	pkt, _ := c.Tick(0) // an acquire: the proposal waits
	if l := decode(pkt); l.Type != wire.TypeLeaseAcquire || l.InSyncVersion != 0 || l.NMembers != 0 {
		t.Fatalf("acquire carried %+v", l)
	}
	r, used, err := c.OnDatagram(s.handle(pkt, nodeAddr, 0))
	if err != nil || !used || r.InSyncVersion != 1 {
		t.Fatalf("grant %+v used %v err %v", r, used, err)
	}
	// Made under epoch 1 (a renew of another epoch would drop it:
	// arbiter.InSyncProposal.Take), it replaces the one still waiting.
	if err := c.ProposeInSync(1, []arbiter.NodeID{2}); err != nil {
		t.Fatal(err)
	}
	renewAt := testConfig().Arbiter.RenewIntervalNs
	pkt, _ = c.Tick(renewAt)
	if l := decode(pkt); l.Type != wire.TypeLeaseRenew || l.InSyncVersion != 1 || l.NMembers != 1 || l.Members[0] != 2 {
		t.Fatalf("renew carried %+v", l)
	}
	r, used, err = c.OnDatagram(s.handle(pkt, nodeAddr, renewAt))
	if err != nil || !used || r.InSyncVersion != 2 || r.Members != inSync(2) {
		t.Fatalf("grant %+v used %v err %v", r, used, err)
	}
	pkt, _ = c.Tick(2 * renewAt)
	if l := decode(pkt); l.Type != wire.TypeLeaseRenew || l.InSyncVersion != 0 || l.NMembers != 0 {
		t.Fatalf("proposal sent twice: %+v", l)
	}
	// AppendRequestInSync refuses a proposal on an acquire.
	if _, err := AppendRequestInSync(nil, arbiter.Request{ID: 1, Kind: arbiter.RequestAcquire, Node: 1}, 0, arbiter.InSyncProposal{BaseVersion: 1}); !errors.Is(err, ErrRequest) {
		t.Fatalf("proposal on acquire: %v", err)
	}
}

// TestDecodeReplyRefusesBadSet: a reply whose set is unsorted, duplicated
// or holds node 0 is refused.
func TestDecodeReplyRefusesBadSet(t *testing.T) {
	for _, members := range [][]uint32{{2, 1}, {2, 2}, {0}} {
		l := wire.Lease{Type: wire.TypeLeaseInfo, InSyncVersion: 3, NMembers: len(members)}
		copy(l.Members[:], members)
		if _, err := ParseReply(l.Append(nil)); !errors.Is(err, ErrReply) {
			t.Errorf("members %v: %v", members, err)
		}
	}
	l := wire.Lease{Type: wire.TypeLeaseInfo, InSyncVersion: 3, NMembers: 2, Members: [wire.MaxMembers]uint32{1, 5}}
	if r, err := ParseReply(l.Append(nil)); err != nil || r.Members != inSync(1, 5) || r.InSyncVersion != 3 {
		t.Fatalf("good set: %+v %v", r, err)
	}
}
