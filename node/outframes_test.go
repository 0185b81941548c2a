package node

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/wire"
)

// outputsEndpoint is a unicast socket (with SendEach, like bus.UDP) that
// records every OUTPUT datagram it is given: its address and the session
// output seqs of its messages, in order; and how many calls carried them.
type outputsEndpoint struct {
	nopEndpoint
	mac     *auth.MAC // when set, every OUTPUT datagram must carry its good tag
	calls   int
	grams   []outputGram
	badMACs int
}

type outputGram struct {
	to      netip.AddrPort
	outSeqs []uint64
}

func (e *outputsEndpoint) SendEach(bufs [][]byte, to []netip.AddrPort) error {
	outputs := false
	for i, b := range bufs {
		f, _, err := wire.Parse(bytes.Clone(b))
		if err != nil {
			return fmt.Errorf("outputsEndpoint: %w", err)
		}
		if f.Type != wire.TypeOutput {
			continue
		}
		outputs = true
		if e.mac != nil && (f.Tag == nil || e.mac.Verify(f.Signed, f.Tag) != nil) {
			e.badMACs++
		}
		g := outputGram{to: to[i]}
		for it := f.Messages(); ; {
			_, msg, ok := it.Next()
			if !ok {
				break
			}
			if s, ok := engine.SessionOutSeq(msg); ok {
				g.outSeqs = append(g.outSeqs, s)
			}
		}
		e.grams = append(e.grams, g)
	}
	if outputs {
		e.calls++
	}
	return nil
}

func (e *outputsEndpoint) Send(bufs [][]byte, to netip.AddrPort) error {
	tos := make([]netip.AddrPort, len(bufs))
	for i := range tos {
		tos[i] = to
	}
	return e.SendEach(bufs, tos)
}

// perClient is what each address received: its datagrams' session output
// seqs, concatenated in the order they were sent, and how many datagrams.
func (e *outputsEndpoint) perClient() (seqs map[netip.AddrPort][]uint64, grams map[netip.AddrPort]int) {
	seqs, grams = map[netip.AddrPort][]uint64{}, map[netip.AddrPort]int{}
	for _, g := range e.grams {
		seqs[g.to] = append(seqs[g.to], g.outSeqs...)
		grams[g.to]++
	}
	return seqs, grams
}

func clientAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(10 + i)}), 7)
}

// outFramesPrimary is a primary for sessions clients whose unicast socket
// records the outputs; with key, every frame is sealed.
func outFramesPrimary(t *testing.T, sessions int, key *auth.MasterKey) (*Node, *stepClock, *outputsEndpoint) {
	t.Helper()
	var log []sendCall
	ep := &outputsEndpoint{}
	if key != nil {
		ep.mac = auth.NewMAC(auth.ClientKey(key, 9))
	}
	clk := &stepClock{ns: 1}
	cfg := sessionsPrimaryConfig(recordingNetwork{uc: ep, mc: &recordingEndpoint{name: "multicast", log: &log}}, journal.NewMemFS(), "/j", clk, sessions)
	cfg.Key = key
	n := newSessionsPrimary(t, cfg)
	return n, clk, ep
}

// passOf runs one pass of the given COMMAND datagrams, each from its
// client's address, as the agent's doWork does.
func passOf(n *Node, pkts [][]byte, from []netip.AddrPort) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.nowNs()
	n.tr.Begin()
	for i, p := range pkts {
		n.onDatagram(p, from[i], now)
	}
	n.afterBatch(now)
	n.tr.End()
}

// releaseAll acknowledges seq as the standby, in one Deliver (one pass):
// the gate releases everything up to it at once.
func releaseAll(t *testing.T, n *Node, clk *stepClock, ep *outputsEndpoint, seq uint64) {
	t.Helper()
	clk.ns += int64(time.Millisecond)
	ep.calls, ep.grams = 0, nil
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: seq}
	frame := ack.Append(nil)
	if key := n.cfg.Key; key != nil {
		sealed := wire.Seal(nil, frame)
		frame = auth.NewMAC(auth.DataKey(key, 9, 1)).Sign(sealed, sealed)
	}
	n.Deliver(frame, n.cfg.Peers[replayStandby])
	if r := n.Released(); r != seq {
		t.Fatalf("released %d, want %d", r, seq)
	}
}

// wantInOrder checks that each client received its outputs 1..count,
// each once, in order, across however many datagrams.
func wantInOrder(t *testing.T, seqs map[netip.AddrPort][]uint64, clients int, count uint64) {
	t.Helper()
	if len(seqs) != clients {
		t.Fatalf("outputs went to %d addresses, want %d: %v", len(seqs), clients, seqs)
	}
	for c := range clients {
		got := seqs[clientAddr(c)]
		if uint64(len(got)) != count {
			t.Fatalf("client %d received outputs %v, want 1..%d", c, got, count)
		}
		for i, s := range got {
			if s != uint64(i)+1 {
				t.Fatalf("client %d received outputs %v, want 1..%d in order", c, got, count)
			}
		}
	}
}

// Outputs are packed per client per release (issue 18 item 7): one pass
// that releases the outputs of N clients' commands, interleaved A, B, C,
// A, B, C, ..., sends one OUTPUT datagram to each client, in one call (one
// sendmmsg), each client's outputs in order. Before, every change of
// client closed the frame: 5 clients x 4 rounds sent 20 datagrams.
func TestReleaseSendsOneOutputFramePerClient(t *testing.T) {
	const clients, rounds = 5, 4
	n, clk, ep := outFramesPrimary(t, clients, nil)
	var pkts [][]byte
	var from []netip.AddrPort
	for r := range uint64(rounds) {
		for c := range clients {
			pkts = append(pkts, commandFrame(uint64(100+c), r+1, 100))
			from = append(from, clientAddr(c))
		}
	}
	passOf(n, pkts, from)
	releaseAll(t, n, clk, ep, clients*rounds)
	seqs, grams := ep.perClient()
	wantInOrder(t, seqs, clients, rounds)
	if len(ep.grams) != clients {
		t.Fatalf("%d OUTPUT datagrams for %d clients' %d interleaved outputs (per client: %v), want one per client",
			len(ep.grams), clients, clients*rounds, grams)
	}
	if ep.calls != 1 {
		t.Fatalf("the release's outputs went out in %d calls, want 1 (the pass's send queue)", ep.calls)
	}
}

// More clients interleaved in one release than frames kept open: the
// frame opened first leaves to make room, and that client's later output
// goes into a new frame after it. Every client still gets its outputs in
// order, and the rest share one frame each: client 0 (pushed out) gets
// two datagrams, clients 1..8 one each except client 1, pushed out by
// client 0's return after its second output: 10 datagrams for 18 outputs.
func TestOutputFramesBeyondTheOpenOnesKeepOrder(t *testing.T) {
	const clients = replica.FramesOpen + 1
	n, clk, ep := outFramesPrimary(t, clients, nil)
	var pkts [][]byte
	var from []netip.AddrPort
	add := func(c int, id uint64) {
		pkts = append(pkts, commandFrame(uint64(100+c), id, 100))
		from = append(from, clientAddr(c))
	}
	for c := range clients {
		add(c, 1) // the last client pushes client 0's frame out
	}
	for c := 1; c < clients; c++ {
		add(c, 2) // into the open frames
	}
	add(0, 2) // reopens client 0's frame, pushing client 1's out
	passOf(n, pkts, from)
	releaseAll(t, n, clk, ep, 2*clients)
	seqs, grams := ep.perClient()
	wantInOrder(t, seqs, clients, 2)
	if len(ep.grams) != clients+1 || grams[clientAddr(0)] != 2 {
		t.Fatalf("%d OUTPUT datagrams (per client %v), want %d: two for client 0, one for each other", len(ep.grams), grams, clients+1)
	}
}

// A client whose outputs of one release fill more than a datagram gets
// its full frame sent as soon as it is full, the rest after it, in order,
// while another client's frame stays open beside it.
func TestFullOutputFrameLeavesInOrder(t *testing.T) {
	const perDatagram, datagrams = 25, 3
	n, clk, ep := outFramesPrimary(t, 2, nil)
	var pkts [][]byte
	var from []netip.AddrPort
	for i := range uint64(datagrams) {
		for c := range 2 {
			pkts = append(pkts, commandsFrame(uint64(100+c), 1+i*perDatagram, perDatagram))
			from = append(from, clientAddr(c))
		}
	}
	passOf(n, pkts, from)
	const outputs = perDatagram * datagrams
	releaseAll(t, n, clk, ep, 2*outputs)
	seqs, grams := ep.perClient()
	wantInOrder(t, seqs, 2, outputs)
	// A client's 75 outputs take at least two frames (the test's point:
	// a full frame leaves mid-release), and fewer than its 3 runs between
	// the other client's (the old packing, a frame per run).
	for c := range 2 {
		if g := grams[clientAddr(c)]; g < 2 || g >= datagrams {
			t.Fatalf("client %d: %d OUTPUT datagrams (per client %v), want 2 to %d", c, g, grams, datagrams-1)
		}
	}
	for _, g := range ep.grams {
		if len(g.outSeqs) == 0 {
			t.Fatalf("an empty OUTPUT datagram to %v", g.to)
		}
	}
}

// With a key, each per-client OUTPUT frame is sealed on its own: every
// datagram of an interleaved release carries the client key's good tag.
func TestPerClientOutputFramesAreSealed(t *testing.T) {
	key, err := auth.GenerateMasterKey(bytes.NewReader(bytes.Repeat([]byte{7}, auth.KeyLen)))
	if err != nil {
		t.Fatal(err)
	}
	const clients, rounds = 3, 3
	n, clk, ep := outFramesPrimary(t, clients, &key)
	mac := auth.NewMAC(auth.ClientKey(&key, 9))
	var pkts [][]byte
	var from []netip.AddrPort
	for r := range uint64(rounds) {
		for c := range clients {
			sealed := wire.Seal(nil, commandFrame(uint64(100+c), r+1, 100))
			pkts = append(pkts, mac.Sign(sealed, sealed))
			from = append(from, clientAddr(c))
		}
	}
	passOf(n, pkts, from)
	releaseAll(t, n, clk, ep, clients*rounds)
	seqs, _ := ep.perClient()
	wantInOrder(t, seqs, clients, rounds)
	if len(ep.grams) != clients || ep.badMACs != 0 {
		t.Fatalf("%d OUTPUT datagrams, %d without a good tag; want %d, all sealed", len(ep.grams), ep.badMACs, clients)
	}
}
