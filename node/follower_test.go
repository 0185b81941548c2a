package node

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// TestStandbyWindowFarEdge: a DATA frame at the far edge of a fresh
// standby's window (seq 1+standbyMaxPending, which shares seq 1's slot:
// the window is exactly as wide as its ring) is buffered, and seq 1 then
// applies normally with it still waiting. The first pull window panicked
// on the first frame here (it took the slot's seq for seq 1's).
func TestStandbyWindowFarEdge(t *testing.T) {
	clk := &stepClock{ns: 1}
	n := manualNode(t, RoleStandby, clk)
	defer n.Close()
	from := netip.MustParseAddrPort("10.0.0.2:1")
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	b := wire.NewBatch(0)
	data := func(seq uint64) []byte {
		b.Reset(wire.TypeData, o, seq)
		b.Add(engine.AppendRequest(nil, 5, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}))
		return bytes.Clone(b.Bytes())
	}
	ne := wire.NewEpoch{Origin: o}
	n.Deliver(ne.Append(nil), from) // follow epoch 1
	n.Deliver(data(1+standbyMaxPending), from)
	n.Deliver(data(1), from)
	clk.ns += 1_000_000
	n.Tick()
	st := n.Status()
	if st.Applied != 1 {
		t.Fatalf("applied %d, want 1", st.Applied)
	}
	if p := n.fol.Window().Pending(); p != 1 {
		t.Fatalf("%d buffered, want the far edge's 1", p)
	}
}
