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
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// commandsFrame is one COMMAND datagram of k new orders of session,
// client order ids from+0 .. from+k-1.
func commandsFrame(session, from uint64, k int) []byte {
	b := wire.NewBatch(0)
	b.Reset(wire.TypeCommand, wire.Origin{Node: 5}, 1)
	for i := range uint64(k) {
		if !b.Add(engine.AppendRequest(nil, session, from+i, &engine.Request{
			Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 100, Qty: 1})) {
			panic("commandsFrame: k too large for one datagram")
		}
	}
	return bytes.Clone(b.Bytes())
}

// onePass runs what the agent's doWork does with the datagrams one
// receive pass read: every datagram, then afterBatch once.
func onePass(n *Node, pkts ...[]byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.nowNs()
	n.tr.Begin()
	for _, p := range pkts {
		n.onDatagram(p, replayClient, now)
	}
	n.afterBatch(now)
	n.tr.End()
}

// Smart batching (issue 18 item 7): a pass that received many COMMAND
// datagrams packs their commands into full DATA frames and sends all of
// them with one call on the multicast socket (one sendmmsg), not one
// sendto per frame as it fills. Before, each sealed frame was sent at
// once, mid-pass: this test saw one call per DATA frame.
func TestPassSendsItsDataFramesInOneCall(t *testing.T) {
	n, _, log := recordingPrimary(t, true)
	const datagrams, perDatagram = 5, 25
	var pkts [][]byte
	for i := range uint64(datagrams) {
		pkts = append(pkts, commandsFrame(7, 1+i*perDatagram, perDatagram))
	}
	*log = (*log)[:0]
	onePass(n, pkts...)
	if got := n.stats.Commands; got != datagrams*perDatagram {
		t.Fatalf("sequenced %d commands, want %d", got, datagrams*perDatagram)
	}
	var calls []sendCall
	for _, c := range *log {
		if c.socket == "multicast" {
			calls = append(calls, c)
		}
	}
	frames := n.rep.Leader().Sequencer().Stats().Frames
	if frames < 2 {
		t.Fatalf("the pass filled %d DATA frames; the test needs several", frames)
	}
	if len(calls) != 1 || uint64(len(calls[0].types)) != frames {
		t.Fatalf("%d DATA frames went out in %d multicast calls (%+v), want one call of all of them", frames, len(calls), calls)
	}
	for i, ty := range calls[0].types {
		if ty != wire.TypeData {
			t.Fatalf("datagram %d of the call is %v, want DATA", i, ty)
		}
	}
}

// A pass of one command sends its DATA frame within that pass, before the
// pass ends: nothing waits for more work (no Nagle timer).
func TestPassOfOneCommandSendsItsFrameAtOnce(t *testing.T) {
	n, _, log := recordingPrimary(t, true)
	*log = (*log)[:0]
	onePass(n, commandFrame(7, 1, 100))
	if len(*log) == 0 || (*log)[0].socket != "multicast" || len((*log)[0].types) != 1 || (*log)[0].types[0] != wire.TypeData {
		t.Fatalf("sends of a one-command pass: %+v, want one DATA frame first", *log)
	}
}

// The DATA frames of a pass leave before its journal write: the standby's
// ack, and so every release, waits for them, not for the disk.
func TestPassSendsDataBeforeItsJournalWrite(t *testing.T) {
	n, _, log := recordingPrimary(t, true)
	*log = (*log)[:0]
	n.mu.Lock()
	now := n.nowNs()
	n.tr.Begin()
	n.onDatagram(commandsFrame(7, 1, 10), replayClient, now)
	n.rep.Leader().EndBatch(now)
	n.flushData()
	sentBeforeWrite := len(*log)
	_, written := n.j.Last()
	durable := n.j.Durable()
	n.afterAppend(now)
	n.tr.End()
	n.mu.Unlock()
	if sentBeforeWrite != 1 || written != 10 || durable != 0 {
		t.Fatalf("before the journal write: %d calls sent, journal last %d durable %d; want the DATA call sent and nothing durable", sentBeforeWrite, written, durable)
	}
	if n.j.Durable() != 10 {
		t.Fatalf("durable %d after the write, want 10", n.j.Durable())
	}
}

// A pass of commands of three clients, interleaved A, B, C, A, B, C, its
// DATA frames through the pass's queue, and the release of their outputs
// into one OUTPUT frame per client (replica.ReleaseFramer) allocate nothing in
// steady state.
func TestPassAndReleaseDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under the race detector (journal.Append)")
	}
	// A real directory: the in-memory FS records every write it is given.
	n, clk := sessionsPrimary(t, nopNetwork{}, nil, t.TempDir(), 4)
	from := [...]netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:7"), netip.MustParseAddrPort("10.0.0.10:7"), netip.MustParseAddrPort("10.0.0.11:7")}
	const runs, rounds = 200, 2
	const perPass = rounds * len(from)
	var cmds [(runs + 2) * perPass][]byte
	for i := range runs + 2 {
		for r := range rounds {
			for c := range from {
				cmds[i*perPass+r*len(from)+c] = commandFrame(uint64(7+c), uint64(i*rounds+r+1), 100)
			}
		}
	}
	var acks [runs + 2][]byte
	for i := range acks {
		ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: uint64(perPass * (i + 1))}
		acks[i] = ack.Append(nil)
	}
	i := 0
	step := func() {
		n.mu.Lock()
		now := n.nowNs()
		n.tr.Begin()
		for k, cmd := range cmds[i*perPass : (i+1)*perPass] {
			n.onDatagram(cmd, from[k%len(from)], now)
		}
		n.afterBatch(now)
		n.tr.End()
		n.mu.Unlock()
		clk.ns += 1000
		n.Deliver(acks[i], n.cfg.Peers[replayStandby])
		i++
	}
	step()
	if allocs := testing.AllocsPerRun(runs-10, step); allocs != 0 {
		t.Fatalf("%.1f allocations per pass and release, want 0", allocs)
	}
	if r := n.Released(); r != uint64(perPass*i) {
		t.Fatalf("released %d, want %d", r, perPass*i)
	}
}

// sessionsPrimary is a primary driven by hand whose engine and session
// table hold sessions clients.
func sessionsPrimary(t *testing.T, nw transport.Network, fs journal.FS, dir string, sessions int) (*Node, *stepClock) {
	t.Helper()
	clk := &stepClock{ns: 1}
	return newSessionsPrimary(t, sessionsPrimaryConfig(nw, fs, dir, clk, sessions)), clk
}

// sessionsPrimaryConfig is sessionsPrimary's configuration, for tests that
// change a field of it first.
func sessionsPrimaryConfig(nw transport.Network, fs journal.FS, dir string, clk *stepClock, sessions int) nodeconfig.Config {
	return nodeconfig.Config{
		ID: 1, Stream: 9, Dir: dir, FS: fs, Network: nw, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers: map[uint32]netip.AddrPort{replayStandby: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: func() (engine.StateMachine, error) {
			return engine.New(engine.Config{MaxInstruments: 4, MaxOrders: 64, MaxSessions: uint32(sessions), DedupWindow: 64, MaxOrderQty: 1 << 20})
		},
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RolePrimary, Epoch: 1, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 20},
		PublisherCapacity: 4096, MaxSessions: sessions,
	}
}

func newSessionsPrimary(t *testing.T, cfg nodeconfig.Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// A standby acknowledges once per pass (issue 18 item 7): a pass that
// received several DATA frames sends one ACK, of the highest contiguous
// seq it journaled, not one per frame. A guard: the standby already acked
// after the pass (standbyAfterBatch).
func TestStandbyAcksOncePerPass(t *testing.T) {
	var log []sendCall
	uc := &multiEndpoint{recordingEndpoint{name: "unicast", log: &log}}
	nw := recordingNetwork{uc: uc, mc: &recordingEndpoint{name: "multicast", log: &log}}
	primary := netip.MustParseAddrPort("10.0.0.1:1")
	n, err := New(nodeconfig.Config{
		ID: 2, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nw, Clock: &stepClock{ns: 1},
		Listen: netip.MustParseAddrPort("10.0.0.3:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{1: primary},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: nodeconfig.RoleStandby, Epoch: 1, Journal: journal.Options{Policy: journal.SyncNone, SegmentBytes: 1 << 16},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ne := wire.NewEpoch{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 1}, History: testHistory}
	n.Deliver(ne.Append(nil), primary) // follow epoch 1
	log = log[:0]
	const frames, perFrame = 4, 5
	var pkts [][]byte
	for f := range uint64(frames) {
		b := wire.NewBatch(0)
		b.Reset(wire.TypeData, wire.Origin{Stream: 9, Node: 1, Epoch: 1}, 1+f*perFrame)
		for i := range uint64(perFrame) {
			b.Add(engine.AppendRequest(nil, 7, 1+f*perFrame+i, &engine.Request{
				Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 100, Qty: 1}))
		}
		pkts = append(pkts, bytes.Clone(b.Bytes()))
	}
	n.mu.Lock()
	now := n.nowNs()
	n.tr.Begin()
	for _, p := range pkts {
		n.onDatagram(p, primary, now)
	}
	n.afterBatch(now)
	n.tr.End()
	n.mu.Unlock()
	var acks []uint64
	for _, c := range log {
		for i, ty := range c.types {
			if ty == wire.TypeAck {
				acks = append(acks, c.seqs[i])
			}
		}
	}
	if len(acks) != 1 || acks[0] != frames*perFrame {
		t.Fatalf("acks sent by the pass: %v, want one of %d", acks, frames*perFrame)
	}
}

// A pass that fills more DATA frames than transport.FramesPerSend sends them in
// calls of that many as they fill, not all at the end of the pass: the
// first frames do not wait for hundreds more commands.
func TestLongPassSendsDataInBoundedCalls(t *testing.T) {
	var log []sendCall
	nw := recordingNetwork{uc: &multiEndpoint{recordingEndpoint{name: "unicast", log: &log}}, mc: &recordingEndpoint{name: "multicast", log: &log}}
	n, _ := sessionsPrimary(t, nw, journal.NewMemFS(), "/j", 4)
	var pkts [][]byte
	for i := range uint64(24) {
		pkts = append(pkts, commandsFrame(7, 1+i*25, 25))
	}
	log = log[:0]
	onePass(n, pkts...)
	frames := int(n.rep.Leader().Sequencer().Stats().Frames)
	if frames <= transport.FramesPerSend {
		t.Fatalf("the pass filled %d DATA frames; the test needs more than %d", frames, transport.FramesPerSend)
	}
	var sizes []int
	total := 0
	for _, c := range log {
		if c.socket == "multicast" {
			sizes = append(sizes, len(c.types))
			total += len(c.types)
		}
	}
	want := (frames + transport.FramesPerSend - 1) / transport.FramesPerSend
	if total != frames || len(sizes) != want {
		t.Fatalf("%d DATA frames went out in calls of %v, want %d calls of at most %d", frames, sizes, want, transport.FramesPerSend)
	}
	for _, k := range sizes[:len(sizes)-1] {
		if k != transport.FramesPerSend {
			t.Fatalf("calls of %v: every call but the last should carry %d", sizes, transport.FramesPerSend)
		}
	}
}
