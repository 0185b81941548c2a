package node

import (
	"bytes"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// nopEndpoint is a socket that sends nowhere and never receives: the fuzz
// target drives the node with Deliver.
type nopEndpoint struct{ sent int }

func (e *nopEndpoint) Receive([][]byte, []int, []netip.AddrPort, time.Duration) (int, error) {
	return 0, nil
}
func (e *nopEndpoint) Send(b [][]byte, _ netip.AddrPort) error { e.sent += len(b); return nil }
func (e *nopEndpoint) Close() error                            { return nil }
func (e *nopEndpoint) Counters() bus.Counters                  { return bus.Counters{} }

type nopNetwork struct{}

func (nopNetwork) Unicast(netip.AddrPort, bus.Filter) (transport.Endpoint, error) {
	return &nopEndpoint{}, nil
}
func (nopNetwork) MulticastReceiver(netip.AddrPort, string, bus.Filter) (transport.Endpoint, error) {
	return &nopEndpoint{}, nil
}
func (nopNetwork) MulticastSender(netip.AddrPort, string, int) (transport.Endpoint, error) {
	return &nopEndpoint{}, nil
}

type stepClock struct{ ns int64 }

func (c *stepClock) NowNs() int64 { return c.ns }

// manualNode builds a node driven by hand on a MemFS: a static primary
// (role primary) or a standby following it.
func manualNode(tb testing.TB, role nodeconfig.Role, clk *stepClock) *Node {
	tb.Helper()
	cfg := nodeconfig.Config{
		ID: uint32(2 - role), Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nopNetwork{}, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("10.0.0.2:1"), 2: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: role, Epoch: 1, Journal: journal.Options{Policy: journal.SyncGroup, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4,
		MarketData: netip.MustParseAddrPort("239.1.1.1:3"), MDRingUpdates: 64,
	}
	delete(cfg.Peers, cfg.ID)
	n, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// smallEngine keeps a fuzz iteration cheap: the default engine
// preallocates megabytes.
func smallEngine() (engine.StateMachine, error) {
	return engine.New(engine.Config{MaxInstruments: 4, MaxOrders: 64, MaxSessions: 4, DedupWindow: 64, MaxOrderQty: 1 << 20})
}

// fuzzSeeds are valid frames of the types a node receives.
func fuzzSeeds() [][]byte {
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	b := wire.NewBatch(0)
	var out [][]byte
	b.Reset(wire.TypeData, o, 1)
	b.Add(engine.AppendRequest(nil, 5, 1, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}))
	out = append(out, bytes.Clone(b.Bytes()))
	b.Reset(wire.TypeCommand, wire.Origin{Node: 5}, 1)
	b.Add(engine.AppendRequest(nil, 5, 1, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Sell, Type: engine.Limit, Price: 10, Qty: 1}))
	out = append(out, bytes.Clone(b.Bytes()))
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 1}, Seq: 1}
	out = append(out, ack.Append(nil))
	hb := wire.Heartbeat{Origin: o, HighestSeq: 3, History: testHistory}
	out = append(out, hb.Append(nil))
	nak := wire.Nak{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 1}}
	nak.Add(wire.Range{From: 1, To: 5})
	out = append(out, nak.Append(nil))
	ne := wire.NewEpoch{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 2}, PrevEpoch: 1, LastSeq: 1, History: testHistory}
	out = append(out, ne.Append(nil))
	sr := wire.SnapshotRequest{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 1}}
	out = append(out, sr.Append(nil))
	rr := wire.ReplayRequest{Origin: wire.Origin{Node: 5}, Session: 5, From: 1}
	out = append(out, rr.Append(nil))
	mr := wire.MDRequest{Origin: wire.Origin{Stream: 9, Node: 5}, Kind: wire.MDRequestRange, First: 1, Count: 10}
	out = append(out, mr.Append(nil))
	ms := wire.MDRequest{Origin: wire.Origin{Stream: 9, Node: 5}, Kind: wire.MDRequestSnapshot, Instrument: wire.AllInstruments}
	out = append(out, ms.Append(nil))
	return out
}

// FuzzNodeDeliver feeds arbitrary datagrams, and mutations of valid ones,
// to a primary and a standby through the same entry point the sockets
// use. Bad input must be dropped and counted, never panic, and never move
// a standby's applied seq past what a valid DATA frame could.
func FuzzNodeDeliver(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	from := netip.MustParseAddrPort("10.0.0.2:1")
	f.Fuzz(func(t *testing.T, pkt []byte, which uint8) {
		clk := &stepClock{ns: 1}
		n := manualNode(t, nodeconfig.Role(which%2), clk)
		for i := range 3 {
			n.Deliver(pkt, from)
			clk.ns += 1_000_000
			n.Tick()
			n.SyncStep()
			if i == 0 && len(pkt) > 8 {
				pkt = pkt[:len(pkt)-1] // and truncated
			}
		}
		st := n.Status()
		if st.Applied > 1<<20 {
			t.Fatalf("applied %d from three datagrams", st.Applied)
		}
	})
}
