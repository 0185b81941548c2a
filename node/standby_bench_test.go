package node

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// BenchmarkStandbyData is a standby's own cost per DATA frame of 30
// commands, driven by hand on a MemFS with fsync off and sockets that
// send nowhere: the admission (replica.Replica.Admit), the window, the
// journal append and the apply of each command, and the ack. It reports
// ns a frame; divide by 30 for a command.
func BenchmarkStandbyData(b *testing.B) {
	cfg := nodeconfig.Config{
		ID: 2, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nopNetwork{}, Clock: &stepClock{ns: 1},
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("10.0.0.2:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RoleStandby, Epoch: 1, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 64 << 20},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	from := cfg.Peers[1]
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
