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

// A standby that closes tells the primary it follows: its last ack, of
// what it acknowledged already, flagged Leaving (twice, against a lost
// datagram). One that follows nobody says nothing.
func TestClosingStandbySaysLeaving(t *testing.T) {
	for _, following := range []bool{true, false} {
		clk := &stepClock{ns: 1}
		nw := &captureNetwork{uc: &captureEndpoint{}}
		primaryAddr := netip.MustParseAddrPort("10.0.0.2:1")
		n, err := New(nodeconfig.Config{
			ID: 2, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nw, Clock: clk,
			Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
			Peers:           map[uint32]netip.AddrPort{1: primaryAddr},
			NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Role: nodeconfig.RoleStandby, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 16},
			PublisherCapacity: 256, MaxSessions: 4,
		})
		if err != nil {
			t.Fatal(err)
		}
		if following {
			o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
			ne := wire.NewEpoch{Origin: o, History: testHistory}
			n.Deliver(ne.Append(nil), primaryAddr)
			b := wire.NewBatch(0)
			b.Reset(wire.TypeData, o, 1)
			b.Add(engine.AppendRequest(nil, 5, 1, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}))
			n.Deliver(b.Bytes(), primaryAddr)
			clk.ns += 1_000_000
			n.Tick()
		}
		nw.uc.sent = nil
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		var leaving []wire.Ack
		for _, d := range nw.uc.sent {
			f, _, err := wire.Parse(d.pkt)
			if err != nil || f.Type != wire.TypeAck || d.to != primaryAddr {
				continue
			}
			if a, _ := wire.DecodeAck(&f); a.Leaving {
				leaving = append(leaving, a)
			}
		}
		switch {
		case !following && len(leaving) != 0:
			t.Fatalf("a standby following nobody sent %d leaving acks", len(leaving))
		case following && (len(leaving) != 2 || leaving[0].Seq != 1 || leaving[0].Epoch != 1):
			t.Fatalf("leaving acks %+v, want two of seq 1, epoch 1", leaving)
		case following && n.Status().Node.LeavingSent != 1:
			t.Fatalf("LeavingSent %d, want 1", n.Status().Node.LeavingSent)
		}
	}
}

// A primary counts an in-sync standby's planned stop once, however often
// its leaving ack arrives; a leaving ack of another epoch is dropped.
func TestPrimaryHearsAStandbyLeaving(t *testing.T) {
	n, _, _ := replayPrimary(t)
	from := n.cfg.Peers[replayStandby]
	stale := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 0}, Seq: 0, Leaving: true}
	n.Deliver(stale.Append(nil), from)
	if got := n.Status().Node.StandbysLeaving; got != 0 {
		t.Fatalf("a stale epoch's leaving ack counted: %d", got)
	}
	a := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: 0, Leaving: true}
	n.Deliver(a.Append(nil), from)
	n.Deliver(a.Append(nil), from)
	st := n.Status()
	if got := st.Node.StandbysLeaving; got != 1 {
		t.Fatalf("StandbysLeaving %d after two leaving acks, want 1", got)
	}
	if len(st.Standbys) != 1 || !st.Standbys[0].Leaving {
		t.Fatalf("status standbys %+v, want standby %d leaving", st.Standbys, replayStandby)
	}
	plain := wire.Ack{Origin: a.Origin, Seq: 0}
	n.Deliver(plain.Append(nil), from)
	if st := n.Status(); st.Standbys[0].Leaving {
		t.Fatal("a plain ack did not clear leaving in status")
	}
}
