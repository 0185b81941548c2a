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

// benchPrimary is a static primary on a MemFS with fsync off and sockets
// that send nowhere: what is left is the primary's own cost per COMMAND
// frame (parse, dedup, sequence, journal, DATA, apply, gate, OUTPUT).
func benchPrimary(b *testing.B) *Node {
	return benchNode(b, nodeconfig.RolePrimary, 1, map[uint32]netip.AddrPort{replayStandby: netip.MustParseAddrPort("10.0.0.3:1")})
}

// benchNode is a node of role driven by hand on a MemFS with fsync off
// and sockets that send nowhere (a standby follows epoch 1 once told).
func benchNode(b *testing.B, role nodeconfig.Role, id uint32, peers map[uint32]netip.AddrPort) *Node {
	b.Helper()
	cfg := nodeconfig.Config{
		ID: id, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nopNetwork{}, Clock: &stepClock{ns: 1},
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers: peers, NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: role, Epoch: 1, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 64 << 20},
		PublisherCapacity: 1024, MaxSessions: 4,
	}
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

func benchAck(n *Node, seq uint64) {
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: seq}
	n.Deliver(ack.Append(nil), n.cfg.Peers[replayStandby])
}

// BenchmarkReplayFlood is the primary's cost per COMMAND frame: "replay"
// delivers one captured, already applied and released frame again and
// again (each answered from the dedup table with a Duplicate and released
// at once); "fresh" delivers new commands (sequenced, journaled, sent as
// DATA, applied; the standby acknowledges every 64 so the gate releases).
func BenchmarkReplayFlood(b *testing.B) {
	const session = 5
	b.Run("replay", func(b *testing.B) {
		n := benchPrimary(b)
		frame := commandFrame(session, 1, 10)
		n.Deliver(frame, replayClient)
		benchAck(n, 1)
		if st := n.Status(); st.Released != 1 {
			b.Fatalf("setup: released %d", st.Released)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			n.Deliver(frame, replayClient)
		}
		b.StopTimer()
		st := n.Status()
		if st.Applied != 1 || st.Journal.LastSeq != 1 || st.Node.AnsweredFromTable != uint64(b.N) || st.Released != 1 {
			b.Fatalf("replays were sequenced: applied %d journal %d answered %d", st.Applied, st.Journal.LastSeq, st.Node.AnsweredFromTable)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		n := benchPrimary(b)
		// Buy then sell at one price: every pair trades, so the small book
		// never fills and every command is a real order. Building the frame
		// (reused buffers, one CRC32C of ~60 bytes) is counted too.
		batch := wire.NewBatch(0)
		var cmd []byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			side := engine.Buy
			if i%2 == 1 {
				side = engine.Sell
			}
			cmd = engine.AppendRequest(cmd[:0], session, uint64(i+1), &engine.Request{
				Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 10, Qty: 1})
			batch.Reset(wire.TypeCommand, wire.Origin{Node: 5}, 1)
			batch.Add(cmd)
			n.Deliver(batch.Bytes(), replayClient)
			if i%64 == 63 {
				benchAck(n, uint64(i+1))
			}
		}
		b.StopTimer()
		if st := n.Status(); st.Applied != uint64(b.N) || st.Node.AnsweredFromTable != 0 {
			b.Fatalf("fresh commands: applied %d of %d, answered from the table %d", st.Applied, b.N, st.Node.AnsweredFromTable)
		}
	})
}
