package client

import (
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

func TestFence(t *testing.T) {
	type step struct {
		epoch uint64
		raise bool
		want  bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
		fence uint64
		stale uint64
	}{
		{"first frame", []step{{5, true, true}}, 5, 0},
		{"same epoch", []step{{5, true, true}, {5, true, true}}, 5, 0},
		{"newer epoch", []step{{5, true, true}, {6, true, true}}, 6, 0},
		{"older after newer", []step{{6, true, true}, {5, true, false}, {6, true, true}}, 6, 1},
		{"older from anyone", []step{{6, true, true}, {5, false, false}}, 6, 1},
		{"an unknown sender does not raise", []step{{9, false, true}, {5, true, true}, {6, true, true}}, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore(Config{Session: 1})
			for i, s := range tc.steps {
				if got := c.Fence(s.epoch, s.raise); got != s.want {
					t.Fatalf("step %d: Fence(%d, %v) = %v, want %v", i, s.epoch, s.raise, got, s.want)
				}
			}
			if c.FenceEpoch() != tc.fence || c.Stats().StaleEpoch != tc.stale {
				t.Fatalf("fence %d, stale %d; want %d, %d", c.FenceEpoch(), c.Stats().StaleEpoch, tc.fence, tc.stale)
			}
		})
	}
	c := NewCore(Config{Session: 1})
	c.LearnEpoch(7)
	c.LearnEpoch(3) // never down
	if c.Fence(6, true) || !c.Fence(7, true) || c.FenceEpoch() != 7 {
		t.Fatalf("after LearnEpoch(7): fence %d, want epoch 6 refused and 7 taken", c.FenceEpoch())
	}
}

// TestPropertyFence: whatever the frames and arbiter replies, a frame is
// delivered exactly when its epoch is at least every epoch learnt before
// it and every epoch of a delivered frame from a known sender, and the
// fence never goes down.
func TestPropertyFence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := NewCore(Config{Session: 1})
		var high, refused uint64
		for i, n := 0, rapid.IntRange(1, 60).Draw(t, "n"); i < n; i++ {
			epoch := rapid.Uint64Range(0, 8).Draw(t, "epoch")
			before := c.FenceEpoch()
			if rapid.IntRange(0, 4).Draw(t, "kind") == 0 {
				c.LearnEpoch(epoch)
				high = max(high, epoch)
			} else {
				raise := rapid.Bool().Draw(t, "raise")
				if got, want := c.Fence(epoch, raise), epoch >= high; got != want {
					t.Fatalf("Fence(%d, %v) = %v with the highest epoch %d", epoch, raise, got, high)
				}
				if epoch < high {
					refused++
				} else if raise {
					high = epoch
				}
			}
			if c.FenceEpoch() < before || c.FenceEpoch() != high {
				t.Fatalf("fence %d after %d, want %d", c.FenceEpoch(), before, high)
			}
		}
		if c.Stats().StaleEpoch != refused {
			t.Fatalf("StaleEpoch %d, want %d", c.Stats().StaleEpoch, refused)
		}
	})
}

// TestClientRefusesADeposedPrimary: after an output of epoch 6 from a
// known node, an epoch-5 frame (the deposed primary's, sent after its
// lease ran out) is not delivered, its command stays in flight for the
// new primary to answer, and the record keeps it, marked dropped, so the
// verdict still sees what arrived. A frame from an unknown address does
// not move the fence; a witness reply does.
func TestClientRefusesADeposedPrimary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rec, err := CreateRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	oldP, newP := netip.MustParseAddrPort("10.0.0.1:7000"), netip.MustParseAddrPort("10.0.0.2:7000")
	wit := netip.MustParseAddrPort("10.0.0.5:7000")
	var results []Result
	cl := memClient(t, Options{Core: Config{Session: 7}, Recorder: rec, OnResult: func(r Result) { results = append(results, r) },
		Nodes: map[uint32]netip.AddrPort{1: oldP, 2: newP}, Witness: wit})
	for range 3 {
		if _, err := cl.Submit(&order); err != nil {
			t.Fatal(err)
		}
	}
	ack := func(id uint64) engine.Output {
		return engine.Output{Kind: engine.KindAck, ClientOrderID: id, OrderID: 100 + id, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1, OutSeq: id}
	}
	fill := func(id, outSeq uint64) engine.Output {
		return engine.Output{Kind: engine.KindExecution, ClientOrderID: id, OrderID: 100 + id, ContraOrderID: 9, TradeID: 5, Side: engine.Buy, Price: 10, Qty: 1, OutSeq: outSeq}
	}
	deliver := func(f []byte, from netip.AddrPort) {
		cl.onBatch([][]byte{f}, []int{len(f)}, []netip.AddrPort{from})
	}
	deliver(outputFrame(t, 1, 5, 10, ack(1)), oldP)
	deliver(outputFrame(t, 2, 6, 11, ack(2)), newP)
	deliver(outputFrame(t, 1, 5, 12, ack(3)), oldP) // the deposed primary: refused
	if st := cl.Stats(); len(results) != 2 || cl.InFlight() != 1 || st.StaleEpoch != 1 || st.StaleOutputs != 1 {
		t.Fatalf("results %d, in flight %d, stale frames %d, outputs %d: want 2, 1, 1, 1", len(results), cl.InFlight(), st.StaleEpoch, st.StaleOutputs)
	}
	// Made-up epoch 99 from an unknown address: not refused (nothing
	// says it is stale), but the fence stays at 6.
	other := netip.MustParseAddrPort("10.0.0.66:7000")
	deliver(outputFrame(t, 9, 99, 13, fill(1, 0)), other)
	if cl.core.FenceEpoch() != 6 {
		t.Fatalf("fence %d after an unknown sender's epoch 99, want 6", cl.core.FenceEpoch())
	}
	// The witness says epoch 8 is held: epoch 6 is over.
	info := (&wire.Lease{Type: wire.TypeLeaseInfo, Origin: wire.Origin{Stream: 1, Node: 0, Epoch: 8}, Holder: 1}).Append(nil)
	deliver(info, other) // not from the witness: ignored
	if cl.core.FenceEpoch() != 6 {
		t.Fatalf("fence %d after a lease reply from elsewhere, want 6", cl.core.FenceEpoch())
	}
	deliver(info, netip.AddrPortFrom(netip.AddrFrom16(wit.Addr().As16()), wit.Port())) // ::ffff:10.0.0.5, the witness all the same
	deliver(outputFrame(t, 2, 6, 14, ack(3)), newP)
	if len(results) != 2 || cl.Stats().StaleEpoch != 2 {
		t.Fatalf("after the witness named epoch 8: results %d, stale %d; want 2, 2", len(results), cl.Stats().StaleEpoch)
	}
	deliver(outputFrame(t, 1, 8, 15, ack(3)), oldP)
	if len(results) != 3 || cl.InFlight() != 0 {
		t.Fatalf("epoch 8's answer: results %d, in flight %d; want 3, 0", len(results), cl.InFlight())
	}
	// Another arbiter (etcd, asked by the caller) names epoch 9.
	cl.LearnEpoch(9)
	before := cl.Stats().Executions
	deliver(outputFrame(t, 1, 8, 16, fill(3, 4)), oldP)
	if st := cl.Stats(); st.StaleEpoch != 3 || st.Executions != before || st.BadOutputs != 0 {
		t.Fatalf("after LearnEpoch(9), an epoch-8 execution: stale %d, executions %d (%d before), bad %d; want 3, none new, 0", st.StaleEpoch, st.Executions, before, st.BadOutputs)
	}
	var dropped []uint64
	for _, l := range closeAndRead(t, cl, rec, path) {
		if l.Dropped {
			dropped = append(dropped, l.Epoch)
		}
	}
	if !slices.Equal(dropped, []uint64{5, 6, 8}) {
		t.Fatalf("record's dropped lines at epochs %v, want [5 6 8]", dropped)
	}
}
