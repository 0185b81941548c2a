package session

import (
	"bytes"
	"testing"

	"github.com/seqbus/seqbus/engine"
)

// TestHistoryRecord: the history keeps only numbered outputs to a session
// that fit a slot.
func TestHistoryRecord(t *testing.T) {
	dup := append([]byte{byte(engine.KindDuplicate)}, engine.AppendOutput(nil, &engine.Output{Kind: engine.KindAck, OutSeq: 1, Side: engine.Buy, Type: engine.Limit})...)
	for _, tc := range []struct {
		name    string
		to      uint64
		payload []byte
		kept    bool
	}{
		{"execution", 1, histOutput(1, 0), true},
		{"market data", engine.MarketData, engine.AppendOutput(nil, &engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDTrade, Side: engine.Buy}), false},
		{"duplicate answer", 1, dup, false},
		{"out seq 0", 1, histOutput(0, 0), false},
		{"too short to carry an out seq", 1, []byte{byte(engine.KindExecution)}, false},
		{"larger than a slot", 1, append(histOutput(1, 0), make([]byte, MaxOutputBytes)...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(4)
			if got := h.Record(7, tc.to, tc.payload); got != tc.kept {
				t.Fatalf("Record = %v, want %v", got, tc.kept)
			}
			outs := h.AppendOutputs(nil, tc.to, h.Plan(tc.to, 1, 7, 10))
			if tc.kept && (len(outs) != 1 || outs[0].Seq != 7 || !bytes.Equal(outs[0].Payload, tc.payload)) {
				t.Fatalf("replayed %+v", outs)
			}
			if !tc.kept && len(outs) != 0 {
				t.Fatalf("replayed what it did not keep: %+v", outs)
			}
		})
	}
	if NewHistory(0) != nil || NewHistory(-1) != nil {
		t.Fatal("a history of no entries is not nil")
	}
}

// TestHistoryPlan: the history answers from the asked output seq, only
// under the released watermark, at most max outputs, TooOld once the
// asked output left the ring or behind a hole, and nothing after a reset.
func TestHistoryPlan(t *testing.T) {
	// Capacity 8. Sessions 1 and 2 interleaved: seq s gives session 1
	// output s and session 2 output s, for s in 1..3 (then 1..5 after
	// evict); session 3 has a hole (outputs 1, 2, then 5, 6).
	build := func(evict bool) *History {
		h := NewHistory(8)
		last := uint64(3)
		if evict {
			last = 5 // four more outputs push out outputs 1 of both
		}
		for seq := uint64(1); seq <= last; seq++ {
			h.Record(seq, 1, histOutput(seq, 0))
			h.Record(seq, 2, histOutput(seq, 0))
		}
		return h
	}
	hole := func() *History {
		h := NewHistory(16)
		for _, out := range []uint64{1, 2, 3, 7, 8} {
			h.Record(out, 3, histOutput(out, 0))
		}
		return h
	}
	for _, tc := range []struct {
		name                    string
		h                       *History
		session, from, released uint64
		max                     int
		want                    []uint64
		next, highest           uint64
		tooOld                  bool
	}{
		{"from 2", build(false), 1, 2, 3, 100, []uint64{2, 3}, 4, 3, false},
		{"seq 3 not released", build(false), 1, 1, 2, 100, []uint64{1, 2}, 3, 3, false},
		{"bounded by max", build(false), 1, 1, 3, 1, []uint64{1}, 2, 3, false},
		{"nothing released", build(false), 1, 1, 0, 100, nil, 1, 3, false},
		{"nothing newer", build(false), 1, 4, 3, 100, nil, 4, 3, false},
		{"unknown session", build(false), 9, 1, 3, 100, nil, 1, 0, false},
		{"evicted", build(true), 1, 1, 5, 100, nil, 2, 5, true},
		{"the oldest held", build(true), 2, 2, 5, 100, []uint64{2, 3, 4, 5}, 6, 5, false},
		{"across the hole", hole(), 3, 3, 8, 100, nil, 7, 8, true},
		{"above the hole", hole(), 3, 7, 8, 100, []uint64{7, 8}, 9, 8, false},
		{"below the hole", hole(), 3, 1, 8, 100, nil, 7, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.h.Plan(tc.session, tc.from, tc.released, tc.max)
			if got := served(tc.h, tc.session, p); !equalSeqs(got, tc.want) || p.Next != tc.next || p.Highest != tc.highest || p.TooOld != tc.tooOld {
				t.Fatalf("served %v, plan %+v; want %v next %d highest %d tooOld %v", got, p, tc.want, tc.next, tc.highest, tc.tooOld)
			}
		})
	}
	h := build(false)
	h.Reset()
	if p := h.Plan(1, 2, 4, 100); p.Highest != 0 || p.First != p.End {
		t.Fatalf("after reset: %+v", p)
	}
}

// TestHistoryWraps: entries far past the capacity land in the right
// slots (entry number mod capacity) and carry their own payloads.
func TestHistoryWraps(t *testing.T) {
	h := NewHistory(5)
	for s := uint64(1); s <= 23; s++ {
		h.Record(s, 4, histOutput(s, 100+s))
	}
	outs := h.AppendOutputs(nil, 4, h.Plan(4, 19, 23, 100))
	if len(outs) != 5 {
		t.Fatalf("%d outputs, want 5", len(outs))
	}
	for i, o := range outs {
		s := uint64(19 + i)
		if o.Seq != s || o.OutSeq != s || !bytes.Equal(o.Payload, histOutput(s, 100+s)) {
			t.Fatalf("output %d: %+v", i, o)
		}
	}
	if p := h.Plan(4, 18, 23, 100); !p.TooOld || p.Next != 19 {
		t.Fatalf("from 18: %+v", p)
	}
}
