package verdict

import (
	"testing"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
)

func sessOut(seq uint64, kind engine.OutputKind) outAt {
	o := engine.Output{Kind: kind, OutSeq: seq, Side: engine.Buy, Type: engine.Limit}
	return outAt{seq: seq, payload: engine.AppendOutput(nil, &o)}
}

// dropped marks a line the client received but did not deliver.
func dropped(l received) received { l.Dropped = true; return l }

func line(session, outSeq uint64, kind string, replay bool) received {
	return received{RecordLine: client.RecordLine{Session: session, OutSeq: outSeq, Kind: kind, Replay: replay}}
}

// TestSessionReports: delivered outputs are compared with the session's
// history: missing, duplicated and out of order are each counted, replays
// and replayed executions too, and a session without faults is OK.
func TestSessionReports(t *testing.T) {
	prim := &replica{outs: map[uint64][]outAt{
		7: {sessOut(1, engine.KindAck), sessOut(2, engine.KindExecution), sessOut(3, engine.KindExecution), sessOut(4, engine.KindAck)},
		8: {sessOut(1, engine.KindAck), sessOut(2, engine.KindExecution)},
	}}
	rcv := [][]received{{
		line(7, 1, "ack", false), line(7, 3, "execution", false), line(7, 3, "execution", true), // 2 missing, 3 twice, 3 after 1
		line(8, 1, "ack", false), line(8, 2, "execution", true), dropped(line(8, 2, "execution", false)),
		line(0, 0, "market_data", false),
	}}
	reps := sessionReports(prim, rcv)
	if len(reps) != 2 {
		t.Fatalf("reports %+v", reps)
	}
	a, b := reps[0], reps[1]
	if a.Session != 7 || a.History != 4 || a.Delivered != 3 || a.Missing != 1 || a.Tail != 1 || a.Duplicated != 1 || a.OutOfOrder != 2 || a.OK() {
		t.Fatalf("session 7: %+v", a)
	}
	if b.Session != 8 || !b.OK() || b.Replayed != 1 || b.ReplayedExecutions != 1 || b.HistoryFrom != 1 || b.HistoryTo != 2 {
		t.Fatalf("session 8: %+v", b)
	}
	var res Result
	res.addSessions(reps)
	if res.SessionFaults != 1 || res.OK() {
		t.Fatalf("result %+v", res)
	}
}
