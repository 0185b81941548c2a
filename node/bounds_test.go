package node

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// The NAK flood: a history of boundsHistory commands of boundsCommandLen
// bytes (one nearly full DATA frame each, so every retransmit is a large
// one), then boundsFloodFor of NAKs for the whole history sent as fast as
// one raw socket can send them, under the standby's node id.
const (
	boundsHistory    = 3_000
	boundsCommandLen = 1_400
	boundsFloodFor   = 3 * time.Second
	// boundsNaksMax bounds the flood in count as boundsFloodFor bounds it
	// in time.
	boundsNaksMax = 2_000_000
	// boundsWindow is how often the flood looks at the client's answers
	// (windows without one are logged).
	boundsWindow = 500 * time.Millisecond
	// boundsRate is the real client's load, commands a second.
	boundsRate = 2_000
	// boundsAnsweredMinFrac: at least 1/boundsAnsweredMinFrac of the load
	// offered during the flood must be answered during it.
	boundsAnsweredMinFrac = 10
)

// retransmitCounter wraps a node's Network and counts the RETRANSMIT bytes
// and frames its unicast socket sends: the measure of what a NAK flood
// makes the primary put on the wire.
type retransmitCounter struct {
	transport.UDPNetwork
	frames, bytes atomic.Uint64
}

type countingEndpoint struct {
	transport.Endpoint
	c *retransmitCounter
}

func (r *retransmitCounter) Unicast(local netip.AddrPort, filter bus.Filter) (transport.Endpoint, error) {
	e, err := r.UDPNetwork.Unicast(local, filter)
	if err != nil {
		return nil, err
	}
	return countingEndpoint{Endpoint: e, c: r}, nil
}

func (e countingEndpoint) Send(bufs [][]byte, to netip.AddrPort) error {
	for _, b := range bufs {
		if h, err := wire.ParseHeader(b); err == nil && h.Type == wire.TypeRetransmit {
			e.c.frames.Add(1)
			e.c.bytes.Add(uint64(len(b)))
		}
	}
	return e.Endpoint.Send(bufs, to)
}

// TestNakFloodBounded: a peer that NAKs the primary's whole history again
// and again, at the rate one socket allows, under a configured standby's
// id (NAKs are accepted from configured peers by id), must not make the
// primary retransmit more than its budget: at most MaxFramesPerNak frames
// per NAK, and at most RetransmitBytesPerSec x elapsed + burst bytes in
// all. Meanwhile the primary keeps sequencing, replicating and releasing
// a real client's commands (a fair share of the offered load is answered
// during the flood, and all of it by the end).
func TestNakFloodBounded(t *testing.T) {
	c := newCluster(t, 2)
	defer c.closeAll()
	counter := &retransmitCounter{}
	primary := c.start(1, func(cfg *nodeconfig.Config) { cfg.Network = counter })
	standby := c.start(2, nil)

	// The history: boundsHistory large commands from a raw sender, each
	// its own COMMAND frame, paced by the released watermark.
	snd, err := bus.ListenUnicast(bus.UnicastConfig{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	body := make([]byte, boundsCommandLen-engine.CommandHeaderLen)
	batch := wire.NewBatch(0)
	frames := make([][]byte, 1)
	deadline := time.Now().Add(20 * time.Second)
	for id := uint64(1); id <= boundsHistory; id++ {
		for id > primary.Released()+256 {
			if time.Now().After(deadline) {
				t.Fatalf("history: released %d of %d", primary.Released(), id)
			}
			time.Sleep(200 * time.Microsecond)
		}
		batch.Reset(wire.TypeCommand, wire.Origin{Stream: 9, Node: 77}, id)
		if !batch.Add(engine.AppendCommand(nil, 77, id, body)) {
			t.Fatal("a command does not fit a frame")
		}
		frames[0] = batch.Bytes()
		if err := snd.Send(frames, c.addrs[1]); err != nil {
			t.Fatal(err)
		}
	}
	c.waitConverged(20 * time.Second)
	hist := primary.Status().Applied
	if hist < boundsHistory/2 { // raw datagrams, never resent: a few may be lost
		t.Fatalf("history of %d commands, want %d", hist, boundsHistory)
	}

	// The real client keeps a steady load through the flood.
	cl := dialClient(t, c.addrs[1], 5)
	defer cl.Close()
	var (
		loadWG  sync.WaitGroup
		loadRep client.LoadReport
		loadErr error
	)
	loadWG.Go(func() {
		loadRep, loadErr = cl.Load(context.Background(),
			client.LoadConfig{Rate: boundsRate, Count: boundsRate * uint64((boundsFloodFor+2*time.Second)/time.Second), Seed: 3, Drain: 15 * time.Second}, nil)
	})
	waitAnswers := func(n uint64) {
		t.Helper()
		dl := time.Now().Add(10 * time.Second)
		for cl.Stats().Answered < n {
			if time.Now().After(dl) {
				t.Fatalf("client: %d answers, want %d", cl.Stats().Answered, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitAnswers(500)

	// The flood: one NAK frame with MaxNakRanges ranges, each the whole
	// history, from node 2 (the standby's id) at the primary's port.
	var nak wire.Nak
	nak.Origin = wire.Origin{Stream: 9, Node: 2, Epoch: 1}
	for nak.N < wire.MaxNakRanges {
		nak.Add(wire.Range{From: 1, To: hist})
	}
	pkt := nak.Append(nil)
	burst := make([][]byte, 32)
	for i := range burst {
		burst[i] = pkt
	}
	hostile, err := bus.ListenUnicast(bus.UnicastConfig{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close()

	seq0 := seqStats(t, primary)
	frames0, bytes0 := counter.frames.Load(), counter.bytes.Load()
	start := time.Now()
	answered0 := cl.Stats().Answered
	windowEnd, answered := start.Add(boundsWindow), answered0
	stalled := 0
	var naks uint64
	for time.Since(start) < boundsFloodFor && naks < boundsNaksMax {
		if err := hostile.Send(burst, c.addrs[1]); err != nil {
			t.Fatalf("flood: %v", err)
		}
		naks += uint64(len(burst))
		if now := time.Now(); now.After(windowEnd) {
			a := cl.Stats().Answered
			if a == answered {
				stalled++
			}
			answered, windowEnd = a, now.Add(boundsWindow)
		}
	}
	elapsed := time.Since(start)
	duringFlood := cl.Stats().Answered - answered0
	// What the primary already took off its socket is still being
	// answered: read the counters once that settles (bounded).
	for prev, i := uint64(0), 0; i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		n := seqStats(t, primary).NaksReceived
		if n == prev {
			break
		}
		prev = n
	}
	settled := time.Since(start)
	seq1 := seqStats(t, primary)
	rtFrames, rtBytes := counter.frames.Load()-frames0, counter.bytes.Load()-bytes0
	naksIn := seq1.NaksReceived - seq0.NaksReceived

	budget := uint64(sequencer.DefaultRetransmitBytesPerSec*settled.Seconds()) + sequencer.DefaultRetransmitBurstBytes
	t.Logf("client: %d answered during the flood (offered %d), %d windows of %v without an answer", duringFlood, uint64(boundsRate*elapsed.Seconds()), stalled, boundsWindow)
	t.Logf("flood: %d NAKs sent in %v, %d received by the primary; retransmitted %d frames, %d bytes (%.1f MB/s) in %v; budget %d bytes (%d MB/s + %d burst); clamped %d, over budget %d, journal fallbacks %d",
		naks, elapsed.Round(time.Millisecond), naksIn, rtFrames, rtBytes, float64(rtBytes)/settled.Seconds()/1e6, settled.Round(time.Millisecond),
		budget, sequencer.DefaultRetransmitBytesPerSec/1_000_000, sequencer.DefaultRetransmitBurstBytes,
		seq1.NakFramesClamped-seq0.NakFramesClamped, seq1.NakBudgetExceeded-seq0.NakBudgetExceeded, seq1.JournalFallbacks-seq0.JournalFallbacks)
	// Liveness: the client keeps being answered through the flood. NAKs
	// and commands share the primary's unicast socket, so the kernel drops
	// some commands (the client resends them later) and answers fall well
	// below the offered load; with the retransmit budget off, the primary
	// spends itself on retransmits and answers almost nothing (measured:
	// 28-46% of the offered load with the budget, under 5% without).
	if offered := uint64(boundsRate * elapsed.Seconds()); duringFlood < offered/boundsAnsweredMinFrac {
		t.Errorf("the client got %d answers during the flood, under 1/%d of the %d offered", duringFlood, boundsAnsweredMinFrac, offered)
	}
	if naksIn == 0 || rtFrames == 0 {
		t.Fatalf("the flood reached nothing: %d NAKs received, %d frames retransmitted", naksIn, rtFrames)
	}
	// The byte budget of the token bucket, over the whole flood (the
	// bucket starts full: one burst).
	if rtBytes > budget {
		t.Errorf("retransmitted %d bytes in %v: over the budget of %d", rtBytes, settled, budget)
	}
	// The per-NAK bound: no NAK makes more than MaxFramesPerNak frames.
	if rtFrames > naksIn*sequencer.DefaultMaxFramesPerNak {
		t.Errorf("retransmitted %d frames for %d NAKs: over %d per NAK", rtFrames, naksIn, sequencer.DefaultMaxFramesPerNak)
	}
	if seq1.RetransmitFrames-seq0.RetransmitFrames != rtFrames {
		t.Errorf("sequencer counts %d retransmit frames, the socket saw %d", seq1.RetransmitFrames-seq0.RetransmitFrames, rtFrames)
	}
	// Every NAK asks for the whole history: each must have been cut short
	// by one bound or the other.
	if cut := (seq1.NakFramesClamped - seq0.NakFramesClamped) + (seq1.NakBudgetExceeded - seq0.NakBudgetExceeded); cut < naksIn {
		t.Errorf("%d of %d whole-history NAKs were cut short by a bound", cut, naksIn)
	}

	loadWG.Wait()
	if loadErr != nil || loadRep.Stats.Answered != loadRep.Sent {
		t.Fatalf("client: answered %d of %d (%v)", loadRep.Stats.Answered, loadRep.Sent, loadErr)
	}
	c.waitConverged(20 * time.Second)
	if s := standby.Status(); s.Node.HashMismatches != 0 {
		t.Errorf("standby: %d hash mismatches", s.Node.HashMismatches)
	}
	t.Logf("client: %d answered, %d resent; primary applied %d", loadRep.Stats.Answered, loadRep.Stats.Resent, primary.Status().Applied)
}

func seqStats(t *testing.T, n *Node) sequencer.Stats {
	t.Helper()
	s, ok := n.Status().Sequencer.(sequencer.Stats)
	if !ok {
		t.Fatalf("primary status has no sequencer stats: %T", n.Status().Sequencer)
	}
	return s
}
