package node

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

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
	c.start(2, func(cfg *nodeconfig.Config) { cfg.SessionHistory = 64 })
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
	// The buyer's acks and the seller's executions leave in the same
	// release; the seller's receive goroutine may still be on them.
	deadline := time.Now().Add(10 * time.Second)
	for seller.SessionStats().LastOutSeq < 40 && time.Now().Before(deadline) {
		seller.Poll()
		time.Sleep(time.Millisecond)
	}
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
	p := n2.replay.History().Plan(7, 25, n2.eng().AppliedSeq(), 100)
	n2.mu.Unlock()
	if p.TooOld || p.Next != 41 || p.Highest != 40 {
		t.Fatalf("standby history from 25: %+v", p)
	}
	n2.mu.Lock()
	p = n2.replay.History().Plan(7, 1, n2.eng().AppliedSeq(), 100)
	n2.mu.Unlock()
	if !p.TooOld {
		t.Fatalf("standby history from 1 (evicted): %+v", p)
	}
	st := c.nodes[1].Status().Node
	// The clients probe too (once at their first Poll): at least ours.
	if st.ReplayRequests < 1 || st.ReplayServed < 30 || st.ReplayRecorded != 80 {
		t.Fatalf("primary replay stats %+v", st)
	}
}
