package node

import (
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// BenchmarkStandbyData is a standby's own cost per DATA frame of 30
// commands, driven by hand on a MemFS with fsync off and sockets that
// send nowhere: the admission (replica.Replica.Admit), the window, the
// journal append and the apply of each command, and the ack. It reports
// ns a frame; divide by 30 for a command.
func BenchmarkStandbyData(b *testing.B) {
	from := netip.MustParseAddrPort("10.0.0.2:1")
	n := benchNode(b, nodeconfig.RoleStandby, 2, map[uint32]netip.AddrPort{1: from})
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	ne := wire.NewEpoch{Origin: o, History: testHistory} // epoch 1 forks from nothing
	n.Deliver(ne.Append(nil), from)
	// A cancel of an order that does not exist: the engine's cheapest
	// answer, so the bus's work is what is measured.
	cmd := engine.AppendRequest(nil, 5, 1, &engine.Request{Op: engine.OpCancel, Instrument: 1, OrderID: 1})
	batch := wire.NewBatch(0)
	seq := uint64(1)
	frame := func() []byte {
		batch.Reset(wire.TypeData, o, seq)
		for range 30 {
			batch.Add(cmd)
		}
		seq += 30
		return batch.Bytes()
	}
	n.Deliver(frame(), from)
	if st := n.Status(); st.Applied != 30 {
		b.Fatalf("setup: applied %d, want 30", st.Applied)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n.Deliver(frame(), from)
	}
}
