package arbiter

import (
	"errors"
	"testing"
)

// TestReplyDeliver: a grant and a deny reach the keeper (OnGrant, OnDeny
// with the echoed request ID) exactly as a backend received them; an
// info, no reply, or a reply to no outstanding request is not used.
func TestReplyDeliver(t *testing.T) {
	newKeeper := func(t *testing.T) (*Keeper, Request) {
		k, err := NewKeeper(1, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		k.SetWantLead(true)
		req, ok := k.Tick(1000)
		if !ok || req.Kind != RequestAcquire {
			t.Fatalf("no acquire: %+v %v", req, ok)
		}
		return k, req
	}
	t.Run("grant", func(t *testing.T) {
		k, req := newKeeper(t)
		r := Reply{Kind: ReplyGrant, RequestID: req.ID, Epoch: 3, DurationNs: DefaultLeaseDurationNs}
		if !r.Granted() || !r.Deliver(k) {
			t.Fatal("grant not used")
		}
		if k.Epoch() != 3 || !k.MayLead(1001) {
			t.Fatalf("keeper after the grant: epoch %d, may lead %v", k.Epoch(), k.MayLead(1001))
		}
		if r.Deliver(k) {
			t.Fatal("a duplicate grant was used")
		}
	})
	t.Run("deny", func(t *testing.T) {
		k, req := newKeeper(t)
		r := Reply{Kind: ReplyDeny, RequestID: req.ID, Epoch: 7, Holder: 2, RemainingNs: 5}
		if r.Granted() || !r.Deliver(k) {
			t.Fatal("deny not used")
		}
		if holder, epoch, left := k.LastDeny(); holder != 2 || epoch != 7 || left != 5 {
			t.Fatalf("last deny %d %d %d", holder, epoch, left)
		}
	})
	for _, kind := range []ReplyKind{ReplyInfo, ReplyNone, ReplyKind(9)} {
		t.Run(kind.String(), func(t *testing.T) {
			k, req := newKeeper(t)
			r := Reply{Kind: kind, RequestID: req.ID, Epoch: 3, DurationNs: DefaultLeaseDurationNs}
			if r.Granted() || r.Deliver(k) || k.Epoch() != 0 {
				t.Fatalf("%s reached the keeper", kind)
			}
		})
	}
}

func TestNewInSyncProposal(t *testing.T) {
	p, err := NewInSyncProposal(4, []NodeID{3, 2})
	if err != nil || p.BaseVersion != 4 || p.N != 2 || p.Members[0] != 3 || p.Members[1] != 2 {
		t.Fatalf("%+v %v", p, err)
	}
	if p, err := NewInSyncProposal(1, nil); err != nil || p.N != 0 || p.BaseVersion != 1 {
		t.Fatalf("empty set: %+v %v", p, err)
	}
	for _, bad := range []struct {
		base    uint64
		members []NodeID
	}{{0, nil}, {0, []NodeID{2}}, {1, make([]NodeID, MaxInSyncMembers+1)}} {
		if p, err := NewInSyncProposal(bad.base, bad.members); !errors.Is(err, ErrProposal) || p != (InSyncProposal{}) {
			t.Fatalf("base %d, %d members: %+v %v", bad.base, len(bad.members), p, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = NewInSyncProposal(1, []NodeID{2}) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
