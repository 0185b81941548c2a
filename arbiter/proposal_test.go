package arbiter

import "testing"

// TestInSyncProposalTake: a proposal goes only on a renew of the epoch it
// was made under; a renew of another epoch drops it; an acquire leaves it.
func TestInSyncProposalTake(t *testing.T) {
	made := func() InSyncProposal {
		p, err := NewInSyncProposal(6, []NodeID{1})
		if err != nil {
			t.Fatal(err)
		}
		p.Epoch = 5
		return p
	}
	for _, tc := range []struct {
		name       string
		req        Request
		sent, left bool
	}{
		{"renew of its epoch", Request{Kind: RequestRenew, Epoch: 5}, true, false},
		{"renew of a later epoch", Request{Kind: RequestRenew, Epoch: 6}, false, false},
		{"renew of an earlier epoch", Request{Kind: RequestRenew, Epoch: 4}, false, false},
		{"acquire", Request{Kind: RequestAcquire}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := made()
			got := p.Take(tc.req)
			if sent := got.BaseVersion != 0; sent != tc.sent {
				t.Fatalf("sent %v (%+v), want %v", sent, got, tc.sent)
			}
			if left := p.BaseVersion != 0; left != tc.left {
				t.Fatalf("left pending %v, want %v", left, tc.left)
			}
		})
	}
}
