package node

import (
	"bytes"
	"testing"

	"github.com/seqbus/seqbus/engine"
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
	n.beginPass()
	for _, p := range pkts {
		n.onDatagram(p, replayClient, now)
	}
	n.afterBatch(now)
	n.endPass()
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
	frames := n.seqr.Stats().Frames
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
	n.beginPass()
	n.onDatagram(commandsFrame(7, 1, 10), replayClient, now)
	n.seqr.Flush(now)
	n.flushData()
	sentBeforeWrite := len(*log)
	_, written := n.j.Last()
	durable := n.j.Durable()
	n.afterAppend(now)
	n.endPass()
	n.mu.Unlock()
	if sentBeforeWrite != 1 || written != 10 || durable != 0 {
		t.Fatalf("before the journal write: %d calls sent, journal last %d durable %d; want the DATA call sent and nothing durable", sentBeforeWrite, written, durable)
	}
	if n.j.Durable() != 10 {
		t.Fatalf("durable %d after the write, want 10", n.j.Durable())
	}
}
