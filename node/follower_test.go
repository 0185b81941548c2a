package node

import (
	"bytes"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// TestStandbyWindowFarEdge: a DATA frame at the far edge of a fresh
// standby's window (seq 1 + the window's MaxPending, which shares seq 1's slot:
// the window is exactly as wide as its ring) is buffered, and seq 1 then
// applies normally with it still waiting. The first pull window panicked
// on the first frame here (it took the slot's seq for seq 1's).
func TestStandbyWindowFarEdge(t *testing.T) {
	clk := &stepClock{ns: 1}
	n := manualNode(t, nodeconfig.RoleStandby, clk)
	defer n.Close()
	from := netip.MustParseAddrPort("10.0.0.2:1")
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	data := func(seq uint64) []byte { return buyData(o, seq) }
	ne := wire.NewEpoch{Origin: o, History: testHistory}
	n.Deliver(ne.Append(nil), from) // follow epoch 1
	n.Deliver(data(1+uint64(n.cfg.FollowerConfig().Window.MaxPending)), from)
	n.Deliver(data(1), from)
	clk.ns += 1_000_000
	n.Tick()
	st := n.Status()
	if st.Applied != 1 {
		t.Fatalf("applied %d, want 1", st.Applied)
	}
	if p := n.rep.Follower().Window().Pending(); p != 1 {
		t.Fatalf("%d buffered, want the far edge's 1", p)
	}
}

// A standby's pass over DATA frames (the follower's entries journaled and
// applied, its ack sent) allocates nothing, with a gap and its fill too.
func TestStandbyPassDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under the race detector (journal.Append)")
	}
	clk := &stepClock{ns: 1}
	cfg := nodeconfig.Config{
		ID: 2, Stream: 9, Dir: t.TempDir(), FS: journal.OSFS{}, Network: nopNetwork{}, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("10.0.0.2:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RoleStandby, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 20},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	from := cfg.Peers[1]
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	ne := wire.NewEpoch{Origin: o, History: testHistory}
	n.Deliver(ne.Append(nil), from)
	const runs = 300
	frames := make([][]byte, 0, 3*(runs+1))
	b := wire.NewBatch(0)
	for i := uint64(0); i <= runs; i++ {
		// Per run: seq s+1 (a buy), then s+3 ahead of a gap, then s+2
		// (the sell that trades with it) filling it.
		for _, seq := range []uint64{3*i + 1, 3*i + 3, 3*i + 2} {
			side := engine.Buy
			if seq%3 == 2 {
				side = engine.Sell
			}
			b.Reset(wire.TypeData, o, seq)
			b.Add(engine.AppendRequest(nil, 5, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 10, Qty: 1}))
			frames = append(frames, bytes.Clone(b.Bytes()))
		}
	}
	i := 0
	pass := func() {
		for range 3 {
			n.Deliver(frames[i], from)
			i++
		}
		clk.ns += 1_000_000
	}
	pass() // warm up
	if allocs := testing.AllocsPerRun(runs-1, pass); allocs != 0 {
		t.Fatalf("%.1f allocations per standby pass, want 0", allocs)
	}
	if st := n.Status(); st.Applied != uint64(i) {
		t.Fatalf("applied %d, want %d", st.Applied, i)
	}
}

// buyData is a DATA frame of o's holding one command at seq: session 5's
// buy of 1 at 10 (what a standby test feeds as its primary's stream).
func buyData(o wire.Origin, seq uint64) []byte {
	b := wire.NewBatch(0)
	b.Reset(wire.TypeData, o, seq)
	b.Add(engine.AppendRequest(nil, 5, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}))
	return bytes.Clone(b.Bytes())
}
