package witness

import (
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/wire"
)

func sealWith(frame []byte, mac *auth.MAC) []byte {
	b := wire.Seal(nil, frame)
	return mac.Sign(b, b)
}

// TestAuthRequests: with a key, the witness answers only requests sealed
// with the sender's own node key, seals its replies with that key, answers
// queries under the client key, and drops everything else by reason: no
// MAC, a bad MAC (another node's key), an unknown node, a replayed request.
func TestAuthRequests(t *testing.T) {
	key, err := auth.GenerateMasterKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Key, cfg.Nodes, cfg.Stream = &key, []uint32{1, 2}, 7
	s, err := newTestCore(cfg, &memStore{})
	if err != nil {
		t.Fatal(err)
	}
	from := netip.MustParseAddrPort("127.0.0.1:9000")
	k1 := auth.NewMAC(auth.LeaseKey(&key, 7, 1))
	k2 := auth.NewMAC(auth.LeaseKey(&key, 7, 2))
	client := auth.NewMAC(auth.ClientKey(&key, 7))

	drops := func() [DropReasonsMax]uint64 { return s.Stats().Drops }
	expectDrop := func(name string, pkt []byte, reason DropReason) {
		t.Helper()
		before := drops()[reason]
		if r := s.handle(pkt, from, 1); r != nil {
			t.Errorf("%s: answered", name)
		}
		if drops()[reason] != before+1 {
			t.Errorf("%s: drops %v, want one %s", name, drops(), reason)
		}
	}
	expectDrop("unsigned", acquireFrame(t, 1, 10), DropNoMAC)
	expectDrop("node 2's key on node 1's request", sealWith(acquireFrame(t, 1, 10), k2), DropBadMAC)
	k9 := auth.NewMAC(auth.LeaseKey(&key, 7, 9))
	expectDrop("unknown node", sealWith(acquireFrame(t, 9, 10), k9), DropUnknownNode)

	reply := s.handle(sealWith(acquireFrame(t, 1, 10), k1), from, 1)
	if reply == nil {
		t.Fatal("a signed acquire was not answered")
	}
	f, _, err := wire.Parse(reply)
	if err != nil || f.Type != wire.TypeLeaseGrant {
		t.Fatalf("reply %v %v", f.Type, err)
	}
	if k1.Verify(f.Signed, f.Tag) != nil || k2.Verify(f.Signed, f.Tag) == nil {
		t.Fatal("the grant is not sealed with node 1's key alone")
	}
	// A newer renew, then the old acquire replayed: the duplicate of the
	// last request is answered from the cache; an older one is a replay.
	if r := s.handle(sealWith(renewFrame(t, 1, 11, 1), k1), from, 2); r == nil {
		t.Fatal("renew not answered")
	}
	if r := s.handle(sealWith(renewFrame(t, 1, 11, 1), k1), from, 3); r == nil {
		t.Fatal("a resend of the last request was not answered from the cache")
	}
	expectDrop("replayed old request", sealWith(acquireFrame(t, 1, 10), k1), DropReplay)

	q := sealWith(AppendQuery(nil, 5, 7, 1), client)
	info := s.handle(q, from, 4)
	if info == nil {
		t.Fatal("query not answered")
	}
	f, _, err = wire.Parse(info)
	if err != nil || f.Type != wire.TypeLeaseInfo || client.Verify(f.Signed, f.Tag) != nil {
		t.Fatalf("info %v %v not sealed with the client key", f.Type, err)
	}
	expectDrop("query under a node key", sealWith(AppendQuery(nil, 5, 7, 2), k1), DropBadMAC)
	st := s.Status()
	if st.Holder != arbiter.NodeID(1) {
		t.Fatalf("holder %d", st.Holder)
	}
	// A key without the node list is a configuration error.
	cfg.Nodes = nil
	if _, err := newTestCore(cfg, &memStore{}); err == nil {
		t.Fatal("a key without nodes was accepted")
	}
}
