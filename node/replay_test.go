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

// captureEndpoint is a unicast socket that keeps a copy of every datagram
// the node sends; nothing arrives on it (the test calls Deliver).
type captureEndpoint struct {
	nopEndpoint
	sent []capturedDatagram
}

type capturedDatagram struct {
	to  netip.AddrPort
	pkt []byte
}

func (e *captureEndpoint) Send(b [][]byte, to netip.AddrPort) error {
	for _, p := range b {
		e.sent = append(e.sent, capturedDatagram{to, bytes.Clone(p)})
	}
	return nil
}

type captureNetwork struct {
	nopNetwork
	uc *captureEndpoint
}

func (c *captureNetwork) Unicast(netip.AddrPort, bus.Filter) (transport.Endpoint, error) {
	return c.uc, nil
}

var (
	replayClient  = netip.MustParseAddrPort("10.0.0.9:7")
	replayStandby = uint32(2)
)

// replayPrimary is a static primary (epoch 1, standby 2 required) driven by
// hand, with its unicast output captured.
func replayPrimary(tb testing.TB) (*Node, *stepClock, *captureEndpoint) {
	tb.Helper()
	clk := &stepClock{ns: 1}
	nw := &captureNetwork{uc: &captureEndpoint{}}
	cfg := nodeconfig.Config{
		ID: 1, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nw, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{replayStandby: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RolePrimary, Epoch: 1, Journal: journal.Options{Policy: journal.SyncGroup, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	n, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	return n, clk, nw.uc
}

func commandFrame(session, clOrd uint64, price int64) []byte {
	b := wire.NewBatch(0)
	b.Reset(wire.TypeCommand, wire.Origin{Node: 5}, 1)
	b.Add(engine.AppendRequest(nil, session, clOrd, &engine.Request{
		Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: price, Qty: 1}))
	return bytes.Clone(b.Bytes())
}

// release makes everything applied durable and acknowledged by the
// standby, so the gate releases it.
func release(t *testing.T, n *Node, clk *stepClock) {
	t.Helper()
	clk.ns += int64(50 * time.Millisecond)
	n.SyncStep()
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: n.Status().Applied}
	n.Deliver(ack.Append(nil), n.cfg.Peers[replayStandby])
	if st := n.Status(); st.Released != st.Applied {
		t.Fatalf("released %d of %d", st.Released, st.Applied)
	}
}

// clientOutputs parses and clears the outputs sent to the client so far.
func clientOutputs(t *testing.T, uc *captureEndpoint) []engine.Output {
	t.Helper()
	var outs []engine.Output
	for _, d := range uc.sent {
		f, _, err := wire.Parse(d.pkt)
		if err != nil || f.Type != wire.TypeOutput || d.to != replayClient {
			continue
		}
		it := f.Messages()
		for {
			_, msg, ok := it.Next()
			if !ok {
				break
			}
			o, err := engine.ParseOutput(msg)
			if err != nil {
				t.Fatalf("output does not parse: %x", msg)
			}
			outs = append(outs, o)
		}
	}
	uc.sent = nil
	return outs
}

type progress struct{ applied, journalLast, sequenced, dataFrames, commands uint64 }

func progressOf(n *Node) progress {
	st := n.Status()
	sq := n.rep.Leader().Sequencer().Stats()
	return progress{st.Applied, st.Journal.LastSeq, sq.Commands, sq.Frames, st.Node.Commands}
}

// TestReplayAnsweredFromDedupTable: an exact replay of an applied COMMAND
// frame is answered with the original result (a Duplicate) without being
// sequenced, journaled or replicated; a duplicate of a command still in
// flight is not sequenced twice and is answered only once the original is
// released; an id below the dedup window is answered TooOld and not
// journaled. Before the fix each replay took a seq, a journal record and a
// DATA frame (issue 15, item 9).
func TestReplayAnsweredFromDedupTable(t *testing.T) {
	n, clk, uc := replayPrimary(t)
	const session = 5
	c1 := commandFrame(session, 1, 10)
	n.Deliver(c1, replayClient)
	release(t, n, clk)
	outs := clientOutputs(t, uc)
	if len(outs) != 1 || outs[0].Kind != engine.KindAck || outs[0].ClientOrderID != 1 {
		t.Fatalf("first answer %+v, want one Ack", outs)
	}
	original := outs[0]
	before := progressOf(n)
	if before.applied != 1 || before.journalLast != 1 {
		t.Fatalf("after one command: %+v", before)
	}

	// Exact replays of the captured frame.
	const replays = 5
	for range replays {
		n.Deliver(c1, replayClient)
	}
	if got := progressOf(n); got != before {
		t.Fatalf("replays advanced the primary: %+v, before %+v", got, before)
	}
	outs = clientOutputs(t, uc)
	if len(outs) != replays {
		t.Fatalf("%d answers to %d replays", len(outs), replays)
	}
	for _, o := range outs {
		dup := original
		dup.Original, dup.Kind = original.Kind, engine.KindDuplicate
		if o != dup {
			t.Fatalf("replay answered %+v, want the original %+v as a Duplicate", o, original)
		}
	}

	// A duplicate of a command in flight (applied, not yet released).
	c2 := commandFrame(session, 2, 11)
	n.Deliver(c2, replayClient)
	inFlight := progressOf(n)
	n.Deliver(c2, replayClient)
	if got := progressOf(n); got != inFlight {
		t.Fatalf("a duplicate of an in-flight command was sequenced: %+v, before %+v", got, inFlight)
	}
	if outs := clientOutputs(t, uc); len(outs) != 0 {
		t.Fatalf("answered before the original was released: %+v", outs)
	}
	release(t, n, clk)
	outs = clientOutputs(t, uc)
	if len(outs) != 2 || outs[0].Kind != engine.KindAck || outs[1].Kind != engine.KindDuplicate ||
		outs[1].Original != engine.KindAck || outs[1].OrderID != outs[0].OrderID || outs[1].ClientOrderID != 2 {
		t.Fatalf("after release: %+v, want the Ack and then its Duplicate", outs)
	}

	// An id below the window (DedupWindow 64): TooOld, not journaled.
	n.Deliver(commandFrame(session, 100, 12), replayClient)
	release(t, n, clk)
	clientOutputs(t, uc)
	before = progressOf(n)
	n.Deliver(commandFrame(session, 100-64, 13), replayClient)
	if got := progressOf(n); got != before {
		t.Fatalf("a too-old id was sequenced: %+v, before %+v", got, before)
	}
	outs = clientOutputs(t, uc)
	if len(outs) != 1 || outs[0].Kind != engine.KindReject || outs[0].Reason != engine.ReasonTooOld || outs[0].ClientOrderID != 36 {
		t.Fatalf("too-old id answered %+v, want Reject TooOld", outs)
	}
	if got, want := n.Status().Node.AnsweredFromTable, uint64(replays+2); got != want {
		t.Fatalf("AnsweredFromTable = %d, want %d", got, want)
	}
	// The journal holds exactly the three fresh commands.
	var journaled []uint64
	if err := n.j.ReadFrom(1, func(_, seq uint64, _ []byte) bool {
		journaled = append(journaled, seq)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(journaled) != 3 {
		t.Fatalf("journal holds %v, want the 3 fresh commands", journaled)
	}
}
