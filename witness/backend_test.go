package witness

import (
	"errors"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

// TestBackend: the UDP witness behind arbiter.Backend sends the keeper's
// requests with the node's send (a renew carrying the pending proposal),
// never calls deliver (replies arrive on the node's socket, through
// OnDatagram, which gives them to the keeper at once), and refuses a bad
// proposal with arbiter.ErrProposal.
func TestBackend(t *testing.T) {
	s := newTestServer(t, &memStore{})
	k, err := arbiter.NewKeeper(1, testConfig().Arbiter)
	if err != nil {
		t.Fatal(err)
	}
	k.SetWantLead(true)
	var sent [][]byte
	b := NewBackend(NewClient(k, 0), func(pkt []byte) { sent = append(sent, append([]byte(nil), pkt...)) })
	var be arbiter.Backend = b
	deliver := func(r arbiter.Reply) { t.Fatalf("deliver called with %+v", r) }

	be.Tick(0, deliver)
	if len(sent) != 1 {
		t.Fatalf("%d frames sent for the acquire", len(sent))
	}
	r, used, err := b.OnDatagram(s.handle(sent[0], nodeAddr, 0))
	if err != nil || !used || !r.Granted() || k.Epoch() != 1 || !k.MayLead(1) {
		t.Fatalf("grant %+v used %v err %v; keeper epoch %d", r, used, err, k.Epoch())
	}
	if err := be.ProposeInSync(0, nil); !errors.Is(err, arbiter.ErrProposal) {
		t.Fatalf("base 0: %v", err)
	}
	if err := be.ProposeInSync(r.InSyncVersion, []arbiter.NodeID{2}); err != nil {
		t.Fatal(err)
	}
	be.Tick(testConfig().Arbiter.RenewIntervalNs, deliver)
	if len(sent) != 2 {
		t.Fatalf("%d frames sent after the renew is due", len(sent))
	}
	r, used, err = b.OnDatagram(s.handle(sent[1], nodeAddr, testConfig().Arbiter.RenewIntervalNs))
	if err != nil || !used || !r.Granted() || r.InSyncVersion != 2 || !r.Members.Contains(2) {
		t.Fatalf("renew with the proposal: %+v used %v err %v", r, used, err)
	}
	if err := be.Close(); err != nil || b.Client().Keeper() != k {
		t.Fatalf("close %v", err)
	}
}
