package replica

import (
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/gating"
)

// A primary maintains its in-sync set every tick: a tick that proposes
// nothing must allocate nothing (it was 2 objects a tick, ~2000/s).
func TestMaintainWithNothingToProposeAllocatesNothing(t *testing.T) {
	g, err := gating.NewGate(gating.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var s InSync
	r := arbiter.Reply{Kind: arbiter.ReplyGrant, InSyncVersion: 1}
	r.Members.N, r.Members.Nodes[0] = 1, 2
	if !s.Confirm(&r) {
		t.Fatal("the first grant's set was not adopted")
	}
	if err := g.SetInSync(1, []uint32{2}, 0); err != nil {
		t.Fatal(err)
	}
	g.SetApplied(10)
	g.SetDurable(10)
	g.OnAck(2, 10, 0)
	cfg := MaintainConfig{Peers: []uint32{2}, TimeoutNs: 200e6, RetryNs: 50e6}
	now := int64(1e6)
	if m := s.Maintain(g, cfg, now); m.Propose != nil || m.Lagging != nil {
		t.Fatalf("a live, acking member: want nothing to do, got %+v", m)
	}
	if a := testing.AllocsPerRun(100, func() { s.Maintain(g, cfg, now) }); a != 0 {
		t.Fatalf("Maintain with nothing to propose: %v allocations, want 0", a)
	}
	// A silent member is proposed for removal, and the proposal owns its
	// slices (the scratch is reused by the next call).
	m := s.Maintain(g, cfg, now+300e6)
	if len(m.Propose) != 0 || len(m.Lagging) != 1 || m.Lagging[0] != 2 || m.Propose == nil {
		t.Fatalf("silent member: want a proposal of the empty set lagging [2], got %+v", m)
	}
	lag := m.Lagging
	s.Maintain(g, cfg, now)
	if lag[0] != 2 {
		t.Fatal("the proposal's Lagging aliases Maintain's scratch")
	}
}
