package node

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

func histOutput(outSeq uint64) []byte {
	return engine.AppendOutput(nil, &engine.Output{Kind: engine.KindExecution, OutSeq: outSeq, Side: engine.Buy})
}

// TestSessionHistoryPlan: the history answers from the asked output seq,
// only under the released watermark, at most max outputs, TooOld once the
// asked output left the ring, and keeps neither market data nor duplicates.
func TestSessionHistoryPlan(t *testing.T) {
	h := newSessionHistory(8)
	// Sessions 1 and 2 interleaved: seq s gives session 1 output s and
	// session 2 output s.
	for seq := uint64(1); seq <= 3; seq++ {
		h.record(seq, 1, histOutput(seq))
		h.record(seq, 2, histOutput(seq))
	}
	if h.record(3, engine.MarketData, engine.AppendOutput(nil, &engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDTrade, Side: engine.Buy})) ||
		h.record(3, 1, append([]byte{byte(engine.KindDuplicate)}, engine.AppendOutput(nil, &engine.Output{Kind: engine.KindAck, OutSeq: 1, Side: engine.Buy, Type: engine.Limit})...)) {
		t.Fatal("recorded market data or a duplicate")
	}
	served := func(p replayPlan, session uint64) []uint64 {
		var got []uint64
		for e := p.first; e < p.end; e++ {
			i := e % uint64(len(h.session))
			if h.session[i] == session {
				got = append(got, h.outSeq[i])
			}
		}
		return got
	}
	p := h.plan(1, 2, 3, 100)
	if got := served(p, 1); len(got) != 2 || got[0] != 2 || got[1] != 3 || p.next != 4 || p.highest != 3 || p.tooOld {
		t.Fatalf("from 2: %v %+v", got, p)
	}
	p = h.plan(1, 1, 2, 100) // seq 3 not released
	if got := served(p, 1); len(got) != 2 || p.next != 3 || p.highest != 3 {
		t.Fatalf("released 2: %v %+v", got, p)
	}
	p = h.plan(1, 1, 3, 1) // bounded
	if got := served(p, 1); len(got) != 1 || p.next != 2 {
		t.Fatalf("max 1: %v %+v", got, p)
	}
	p = h.plan(1, 4, 3, 100) // nothing newer
	if got := served(p, 1); len(got) != 0 || p.next != 4 || p.tooOld {
		t.Fatalf("from 4: %v %+v", got, p)
	}
	// Four more outputs evict session 1's and 2's outputs 1 (capacity 8).
	for seq := uint64(4); seq <= 5; seq++ {
		h.record(seq, 1, histOutput(seq))
		h.record(seq, 2, histOutput(seq))
	}
	if p = h.plan(1, 1, 5, 100); !p.tooOld || p.next != 2 {
		t.Fatalf("evicted: %+v", p)
	}
	if p = h.plan(2, 2, 5, 100); p.tooOld || len(served(p, 2)) != 4 {
		t.Fatalf("session 2 from 2: %+v", p)
	}
	h.reset()
	if p = h.plan(1, 2, 4, 100); p.highest != 0 || p.first != p.end {
		t.Fatalf("after reset: %+v", p)
	}
}

// replayOver asks node addr for session's outputs from `from` and returns
// the out seqs replayed (every frame must be marked replay) and the end.
func replayOver(t *testing.T, addr netip.AddrPort, session, from uint64) ([]uint64, wire.ReplayEnd) {
	t.Helper()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	req := wire.ReplayRequest{Origin: wire.Origin{Stream: 9, Node: uint32(session)}, Session: session, From: from}
	if _, err := uc.WriteToUDPAddrPort(req.Append(nil), addr); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	buf := make([]byte, 65536)
	for {
		_ = uc.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, _, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("no REPLAY_END: %v (got %v)", err, got)
		}
		f, _, err := wire.Parse(buf[:k])
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case wire.TypeReplayEnd:
			end, err := wire.DecodeReplayEnd(&f)
			if err != nil {
				t.Fatal(err)
			}
			return got, end
		case wire.TypeOutput:
			if f.Flags&wire.FlagReplay == 0 {
				t.Fatal("replayed OUTPUT frame not marked replay")
			}
			it := f.Messages()
			for {
				_, msg, ok := it.Next()
				if !ok {
					break
				}
				o, err := engine.ParseOutput(msg)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, o.OutSeq)
			}
		}
	}
}

// TestReplayAnswer: the primary replays a session's history from the
// asked output seq (the resting side's executions included), a standby
// holds the same history but refuses to answer, and a request past the
// history's reach is TooOld.
func TestReplayAnswer(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	c.start(1, nil)
	c.start(2, func(cfg *Config) { cfg.SessionHistory = 64 })
	// Session 7 rests 20 sells, session 8 takes them: session 7 gets an
	// ack and an execution per order, 40 outputs.
	seller, buyer := dialClient(t, c.addrs[1], 7), dialClient(t, c.addrs[1], 8)
	defer seller.Close()
	defer buyer.Close()
	submitAll := func(cl *client.Client, side engine.Side) {
		for i := 0; i < 20; i++ {
			if _, err := cl.Submit(&engine.Request{Op: engine.OpNewOrder, Side: side, Type: engine.Limit, Price: 100, Qty: 1}); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for cl.InFlight() > 0 && time.Now().Before(deadline) {
			cl.Poll()
			time.Sleep(time.Millisecond)
		}
	}
	submitAll(seller, engine.Sell)
	submitAll(buyer, engine.Buy)
	c.waitConverged(10 * time.Second)
	if st := seller.SessionStats(); st.LastOutSeq != 40 || st.Gaps != 0 {
		t.Fatalf("seller delivered %+v", st)
	}
	got, end := replayOver(t, c.addrs[1], 7, 11)
	if end.Status != wire.ReplayDone || end.Next != 41 || end.Highest != 40 || len(got) != 30 {
		t.Fatalf("replay from 11: %d outputs, end %+v", len(got), end)
	}
	for i, s := range got {
		if s != uint64(11+i) {
			t.Fatalf("replayed out seqs %v", got)
		}
	}
	_, end = replayOver(t, c.addrs[2], 7, 1)
	if end.Status != wire.ReplayRefused {
		t.Fatalf("standby answered %+v", end)
	}
	// The standby recorded the same history (its 64 entries: the last 64
	// outputs of sessions 7 and 8).
	n2 := c.nodes[2]
	n2.mu.Lock()
	p := n2.outHist.plan(7, 25, n2.eng.AppliedSeq(), 100)
	n2.mu.Unlock()
	if p.tooOld || p.next != 41 || p.highest != 40 {
		t.Fatalf("standby history from 25: %+v", p)
	}
	n2.mu.Lock()
	p = n2.outHist.plan(7, 1, n2.eng.AppliedSeq(), 100)
	n2.mu.Unlock()
	if !p.tooOld {
		t.Fatalf("standby history from 1 (evicted): %+v", p)
	}
	st := c.nodes[1].Status().Node
	// The clients probe too (once at their first Poll): at least ours.
	if st.ReplayRequests < 1 || st.ReplayServed < 30 || st.ReplayRecorded != 80 {
		t.Fatalf("primary replay stats %+v", st)
	}
}

// TestSessionHistoryHole: a history with a hole in a session's outputs
// (a rebuild whose journal ended below its snapshot) replays only the run
// above the hole and answers TooOld below it.
func TestSessionHistoryHole(t *testing.T) {
	h := newSessionHistory(16)
	for _, out := range []uint64{1, 2, 3, 7, 8} {
		h.record(out, 1, histOutput(out))
	}
	if p := h.plan(1, 3, 8, 100); !p.tooOld || p.next != 7 {
		t.Fatalf("from 3 across the hole: %+v", p)
	}
	if p := h.plan(1, 7, 8, 100); p.tooOld || p.next != 9 || p.end-p.first != 2 {
		t.Fatalf("from 7: %+v", p)
	}
}
