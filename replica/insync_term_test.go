package replica

import (
	"slices"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

// TestStartTermKeepsAProposalOfItsEpoch: a new term keeps requiring the
// additions of a proposal that went under its own epoch (the arbiter may
// still accept it: sim seed 406975 released past a standby the witness
// had just listed), and forgets those of a proposal under another epoch,
// which no backend sends any more. A grant then resolves the kept ones.
func TestStartTermKeepsAProposalOfItsEpoch(t *testing.T) {
	grant := func(version uint64, members ...arbiter.NodeID) *arbiter.Reply {
		set, ok := arbiter.MakeInSyncSet(members, 2)
		if !ok {
			t.Fatalf("bad set %v", members)
		}
		return &arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 5, InSyncVersion: version, Members: set}
	}
	pending := func(proposedUnder uint64) *InSync {
		s := &InSync{}
		s.Confirm(grant(6))
		s.adding = []arbiter.NodeID{1}
		s.Proposed([]arbiter.NodeID{1}, proposedUnder, 0)
		return s
	}
	required := func(s *InSync) []uint32 { return s.Required(nil) }

	s := pending(5)
	s.StartTerm(5)
	if got := required(s); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("a term of the proposal's epoch requires %v, want [1]", got)
	}
	if s.Confirm(grant(7, 1)); !slices.Equal(required(s), []uint32{1}) || len(s.Adding()) != 0 {
		t.Fatalf("accepted: requires %v, adding %v; want member 1, nothing pending", required(s), s.Adding())
	}

	s = pending(5)
	s.StartTerm(5)
	if s.Confirm(grant(7)); len(required(s)) != 0 {
		t.Fatalf("a newer version without it: requires %v, want nothing", required(s))
	}

	s = pending(4)
	s.StartTerm(5)
	if got := required(s); len(got) != 0 {
		t.Fatalf("a term after the proposal's epoch requires %v, want nothing", got)
	}

	s = &InSync{}
	s.Confirm(grant(6, 1))
	s.StartTerm(5)
	if got := required(s); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("without a proposal: requires %v, want the confirmed [1]", got)
	}
}
