package session

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// This file drives a History, and the Replay around it, with random
// records, resets and requests, and checks every plan and every answer
// against a model written independently of the ring: a plain slice of the
// entries recorded since the last reset, of which the last capacity are
// held. The same harness runs under rapid (TestHistoryProperties) and the
// fuzzer (FuzzHistory).

type chooser interface{ intn(n int) int }

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(n int) int { return rapid.IntRange(0, n-1).Draw(c.t, "n") }

// byteChooser reads choices from fuzz input; once it runs out it answers 0
// and reports exhausted, which ends the run.
type byteChooser struct {
	data      []byte
	exhausted bool
}

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 {
		c.exhausted = true
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

const modelSessions = 3

type modelEntry struct {
	session, outSeq, seq uint64
	payload              []byte
}

type historyHarness struct {
	fatalf   func(format string, args ...any)
	capacity int
	r        *Replay
	nowNs    int64

	// The model.
	entries []modelEntry
	lastOut [modelSessions + 1]uint64 // per session: outputs are numbered upwards
	seq     uint64                    // the command being applied
	tag     uint64
}

func newHistoryHarness(c chooser, fatalf func(string, ...any)) *historyHarness {
	capacity := 1 + c.intn(24)
	return &historyHarness{fatalf: fatalf, capacity: capacity, r: New(Config{History: capacity}), seq: 1}
}

func (h *historyHarness) step(c chooser) {
	switch op := c.intn(10); {
	case op < 6:
		h.record(c)
	case op == 6:
		h.rejected(c)
	case op == 7 && c.intn(4) == 0:
		h.r.Reset()
		h.entries = h.entries[:0]
	default:
		h.request(c)
	}
}

// record applies an output: the next of its session's, or one past a hole
// (a rebuild whose journal ended below its snapshot), at the same command
// or the next one.
func (h *historyHarness) record(c chooser) {
	session := uint64(1 + c.intn(modelSessions))
	h.seq += uint64(c.intn(2))
	out := h.lastOut[session] + 1
	if c.intn(8) == 0 {
		out += uint64(1 + c.intn(3))
	}
	h.lastOut[session] = out
	h.tag++
	payload := histOutput(out, h.tag)
	if !h.r.History().Record(h.seq, session, payload) {
		h.fatalf("an execution was not recorded")
	}
	h.entries = append(h.entries, modelEntry{session: session, outSeq: out, seq: h.seq, payload: payload})
}

// rejected offers what the history must not keep.
func (h *historyHarness) rejected(c chooser) {
	var to uint64 = 1
	var payload []byte
	switch c.intn(3) {
	case 0:
		to, payload = engine.MarketData, engine.AppendOutput(nil, &engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDTrade, Side: engine.Buy})
	case 1:
		payload = append(histOutput(h.lastOut[1]+1, 0), make([]byte, MaxOutputBytes)...)
	default:
		payload = histOutput(0, 0)
	}
	if h.r.History().Record(h.seq, to, payload) {
		h.fatalf("recorded what the history does not keep: to %d, %d bytes", to, len(payload))
	}
}

// plan is the model's answer: what History.Plan must replay.
func (h *historyHarness) plan(session, from, released uint64, max int) (outs []modelEntry, next, highest uint64, tooOld bool) {
	held := h.entries[len(h.entries)-min(len(h.entries), h.capacity):]
	var mine []modelEntry
	for _, e := range held {
		if e.session == session {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return nil, from, 0, false
	}
	highest = mine[len(mine)-1].outSeq
	if from > highest {
		return nil, from, highest, false
	}
	k := len(mine) - 1 // the start of the run of consecutive outputs that ends at the newest
	for k > 0 && mine[k-1].outSeq+1 == mine[k].outSeq {
		k--
	}
	if mine[k].outSeq > from {
		return nil, mine[k].outSeq, highest, true
	}
	next = from
	for _, e := range mine[k:] {
		if e.outSeq < from {
			continue
		}
		if e.seq > released || len(outs) == max {
			break
		}
		outs = append(outs, e)
		next = e.outSeq + 1
	}
	return outs, next, highest, false
}

func (h *historyHarness) request(c chooser) {
	session := uint64(1 + c.intn(modelSessions))
	from := uint64(1 + c.intn(int(h.lastOut[session])+3))
	released := uint64(c.intn(int(h.seq) + 2))
	max := 1 + c.intn(6)
	want, next, highest, tooOld := h.plan(session, from, released, max)

	p := h.r.History().Plan(session, from, released, max)
	h.compare("plan", h.r.History().AppendOutputs(nil, session, p), want)
	if p.Next != next || p.Highest != highest || p.TooOld != tooOld {
		h.fatalf("plan(%d, %d, %d, %d) = %+v, model next %d highest %d tooOld %v", session, from, released, max, p, next, highest, tooOld)
	}

	// The same request through Replay (a new budget window each time).
	want, next, highest, tooOld = h.plan(session, from, released, MaxReplayOutputs)
	h.nowNs += RequestBudgetNs
	a := h.r.Request(Request{Session: session, From: from, NowNs: h.nowNs, Leading: true, Released: released, Durable: released})
	if tooOld {
		if a.Action != StartRecompute || a.Job.TooOld.Next != next || a.Job.TooOld.Highest != highest || a.Job.From != from {
			h.fatalf("request(%d, %d, %d) past the history: %+v, model next %d highest %d", session, from, released, a, next, highest)
		}
		h.r.Finish(&Result{Job: a.Job, TooOld: true}, true, nil)
		return
	}
	h.compare("request", a.Outputs, want)
	if a.Action != Send || a.End.Status != wire.ReplayDone || a.End.Next != next || a.End.Highest != highest {
		h.fatalf("request(%d, %d, %d) = %+v, model next %d highest %d", session, from, released, a, next, highest)
	}
}

func (h *historyHarness) compare(what string, got []Output, want []modelEntry) {
	if len(got) != len(want) {
		h.fatalf("%s: %d outputs, model %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].seq || got[i].OutSeq != want[i].outSeq || !bytes.Equal(got[i].Payload, want[i].payload) {
			h.fatalf("%s: output %d is %+v, model %+v", what, i, got[i], want[i])
		}
	}
}

// TestHistoryProperties: every plan and every answer the history gives
// matches the model, over random interleavings of sessions, holes,
// evictions, resets and released watermarks.
func TestHistoryProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := rapidChooser{rt}
		h := newHistoryHarness(c, rt.Fatalf)
		steps := rapid.IntRange(10, 300).Draw(rt, "steps")
		for range steps {
			h.step(c)
		}
	})
}

// FuzzHistory turns fuzz bytes into the same operations and checks the
// same model.
func FuzzHistory(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{7, 0, 1, 0, 0, 0, 2, 1, 0, 0, 9, 0, 2, 1, 3, 9, 1, 1, 2, 0})
	f.Add([]byte{3, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 7, 0, 0, 0, 0, 9, 0, 3, 4, 2, 9, 2, 1, 0, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		h := newHistoryHarness(c, t.Fatalf)
		for !c.exhausted {
			h.step(c)
		}
	})
}
