package node

import (
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// A node granted epoch 3 leads it, and its process ends before it
// journals any record of epoch 3 (nothing was sequenced: it re-released
// what it had applied). Restarted on the same directory, it must still
// be fenced at 3: before, the fence was persisted only by the next
// record, so it came back at the epoch of its last record and followed a
// deposed primary's NEW_EPOCH of epoch 2, cutting records it had
// released under 3 (sim seed 2634484). Now the fence is recorded before
// it leads (storage.RaiseFence), and the NEW_EPOCH of 2 is stale.
func TestFenceSurvivesARestartWithoutRecords(t *testing.T) {
	clk := &stepClock{ns: 1}
	fs := joinedFS("/j")
	arb := &scriptedArbiter{}
	arb.epoch.Store(3)
	cfg := handStandbyConfig(clk, func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil })
	cfg.FS = fs
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Tick() // granted epoch 3: leads
	if n.Role() != nodeconfig.RolePrimary || n.Epoch() != 3 {
		t.Fatalf("role %s epoch %d, want primary of 3", n.Role(), n.Epoch())
	}
	n.Close()
	cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) { return &scriptedArbiter{k: k}, nil }
	n, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Epoch() != 3 {
		t.Fatalf("restarted at epoch %d, want 3 (the fence it led)", n.Epoch())
	}
	ne := wire.NewEpoch{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 2}, PrevEpoch: 1, History: uint64(n.Status().History)}
	n.Deliver(ne.Append(nil), cfg.Peers[2])
	if st := n.Status(); st.Epoch != 3 || st.Node.DropStaleEpoch == 0 {
		t.Fatalf("a deposed primary's NEW_EPOCH of 2: epoch %d, stale drops %d", st.Epoch, st.Node.DropStaleEpoch)
	}
	if e, err := journal.ReadFence(fs, "/j"); e != 3 || err != nil {
		t.Fatalf("recorded fence %d %v", e, err)
	}
}
