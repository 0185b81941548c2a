package session

import "github.com/seqbus/seqbus/engine"

// histOutput is an execution numbered outSeq in its session; tag tells
// outputs of equal out seqs apart.
func histOutput(outSeq uint64, tag uint64) []byte {
	return engine.AppendOutput(nil, &engine.Output{Kind: engine.KindExecution, OutSeq: outSeq, Side: engine.Buy, TradeID: tag})
}

// served lists the out seqs of session's outputs plan p replays.
func served(h *History, session uint64, p Plan) []uint64 {
	var got []uint64
	for _, o := range h.AppendOutputs(nil, session, p) {
		got = append(got, o.OutSeq)
	}
	return got
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
