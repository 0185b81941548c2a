package session

import (
	"errors"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// fixedOutSeq is a state machine's report: every session's last output.
type fixedOutSeq uint64

func (f fixedOutSeq) SessionOutSeq(uint64) uint64 { return uint64(f) }

// replayWith returns a Replay whose history holds session 7's outputs
// lo..hi at seqs lo..hi (none when history <= 0).
func replayWith(history int, lo, hi uint64) *Replay {
	r := New(Config{History: history})
	for s := lo; s <= hi; s++ {
		r.Record(s, 7, histOutput(s, 0))
	}
	return r
}

func outSeqs(outs []Output) []uint64 {
	var s []uint64
	for _, o := range outs {
		s = append(s, o.OutSeq)
	}
	return s
}

// TestRequest: what a REPLAY_REQUEST is answered with, and what it counts.
func TestRequest(t *testing.T) {
	leading := func(from, released uint64) Request {
		return Request{Session: 7, From: from, NowNs: 1, Leading: true, Released: released, Durable: released, Epoch: 3}
	}
	for _, tc := range []struct {
		name     string
		r        *Replay
		q        Request
		action   Action
		note     bool
		outs     []uint64
		end      wire.ReplayEnd
		job      Job
		counters Counters
	}{
		{name: "switched off", r: New(Config{History: 16, Off: true}), q: leading(1, 10),
			action: None, counters: Counters{ReplayRequests: 1}},
		{name: "not leading", r: replayWith(16, 1, 5), q: Request{Session: 7, From: 2},
			action: Send, end: wire.ReplayEnd{Session: 7, From: 2, Next: 2, Status: wire.ReplayRefused},
			counters: Counters{ReplayRequests: 1, ReplayRefused: 1, ReplayRecorded: 5}},
		{name: "no history", r: New(Config{}), q: leading(2, 10),
			action: Send, end: wire.ReplayEnd{Session: 7, From: 2, Next: 2, Status: wire.ReplayTooOld},
			counters: Counters{ReplayRequests: 1, ReplayTooOld: 1}},
		{name: "no history, the engine knows the session", r: New(Config{}), q: withEngine(leading(2, 10), 9),
			action: Send, end: wire.ReplayEnd{Session: 7, From: 2, Next: 10, Highest: 9, Status: wire.ReplayTooOld},
			counters: Counters{ReplayRequests: 1, ReplayTooOld: 1}},
		{name: "no history, asked past the last output", r: New(Config{}), q: withEngine(leading(12, 10), 9),
			action: Send, end: wire.ReplayEnd{Session: 7, From: 12, Next: 12, Highest: 9, Status: wire.ReplayTooOld},
			counters: Counters{ReplayRequests: 1, ReplayTooOld: 1}},
		{name: "from the history", r: replayWith(16, 1, 5), q: leading(2, 4),
			action: Send, note: true, outs: []uint64{2, 3, 4}, end: wire.ReplayEnd{Session: 7, From: 2, Next: 5, Highest: 5},
			counters: Counters{ReplayRequests: 1, ReplayServed: 3, ReplayRecorded: 5}},
		{name: "from the history, the engine knows the session too", r: replayWith(16, 1, 5), q: withEngine(leading(2, 4), 5),
			action: Send, note: true, outs: []uint64{2, 3, 4}, end: wire.ReplayEnd{Session: 7, From: 2, Next: 5, Highest: 5},
			counters: Counters{ReplayRequests: 1, ReplayServed: 3, ReplayRecorded: 5}},
		{name: "nothing newer", r: replayWith(16, 1, 5), q: leading(6, 5),
			action: Send, note: true, end: wire.ReplayEnd{Session: 7, From: 6, Next: 6, Highest: 5},
			counters: Counters{ReplayRequests: 1, ReplayRecorded: 5}},
		{name: "left the history: recompute", r: replayWith(4, 1, 10), q: leading(2, 9),
			action: StartRecompute, note: true, end: wire.ReplayEnd{Session: 7, From: 2, Next: 2},
			job:      Job{Session: 7, From: 2, Upto: 9, Epoch: 3, TooOld: Plan{Next: 7, Highest: 10, TooOld: true}},
			counters: Counters{ReplayRequests: 1, ReplayRecorded: 10}},
		{name: "none held, the engine knows the session: recompute", r: replayWith(4, 1, 0), q: withEngine(leading(2, 9), 5),
			action: StartRecompute, note: true, end: wire.ReplayEnd{Session: 7, From: 2, Next: 2},
			job:      Job{Session: 7, From: 2, Upto: 9, Epoch: 3, TooOld: Plan{Next: 6, Highest: 5, TooOld: true}},
			counters: Counters{ReplayRequests: 1}},
		{name: "none held, asked past the engine's last", r: replayWith(4, 1, 0), q: withEngine(leading(6, 9), 5),
			action: Send, note: true, end: wire.ReplayEnd{Session: 7, From: 6, Next: 6},
			counters: Counters{ReplayRequests: 1}},
		{name: "durable below released bounds the recompute", r: replayWith(4, 1, 10), q: Request{Session: 7, From: 2, Leading: true, Released: 9, Durable: 8},
			action: StartRecompute, note: true, end: wire.ReplayEnd{Session: 7, From: 2, Next: 2},
			job:      Job{Session: 7, From: 2, Upto: 8, TooOld: Plan{Next: 7, Highest: 10, TooOld: true}},
			counters: Counters{ReplayRequests: 1, ReplayRecorded: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.r.Request(tc.q)
			if a.Action != tc.action || a.NoteSession != tc.note || !equalSeqs(outSeqs(a.Outputs), tc.outs) || a.End != tc.end || a.Job != tc.job {
				t.Fatalf("answer %+v\nwant action %d note %v outs %v end %+v job %+v", a, tc.action, tc.note, tc.outs, tc.end, tc.job)
			}
			if got := tc.r.Counters(); got != tc.counters {
				t.Fatalf("counters %+v, want %+v", got, tc.counters)
			}
			if tc.r.Busy() != (tc.action == StartRecompute) {
				t.Fatalf("busy %v after %d", tc.r.Busy(), tc.action)
			}
		})
	}
}

func withEngine(q Request, last uint64) Request {
	q.Engine = fixedOutSeq(last)
	return q
}

// TestRequestLimits: over the budget a request is Refused; while a
// recompute runs another is Refused (counted busy); a history answer
// sends at most MaxReplayOutputs.
func TestRequestLimits(t *testing.T) {
	r := replayWith(MaxReplayOutputs+10, 1, MaxReplayOutputs+10)
	q := Request{Session: 7, From: 1, Leading: true, Released: 1 << 20}
	if a := r.Request(q); len(a.Outputs) != MaxReplayOutputs || a.End.Next != MaxReplayOutputs+1 || a.End.Status != wire.ReplayDone {
		t.Fatalf("first answer: %d outputs, end %+v", len(a.Outputs), a.End)
	}
	for range RequestBudget - 1 {
		r.Request(q)
	}
	if a := r.Request(q); a.End.Status != wire.ReplayRefused || len(a.Outputs) != 0 || a.NoteSession {
		t.Fatalf("over the budget: %+v", a.End)
	}
	q.NowNs = RequestBudgetNs
	if a := r.Request(q); a.End.Status != wire.ReplayDone {
		t.Fatalf("next window: %+v", a.End)
	}

	r = replayWith(4, 1, 10)
	q = Request{Session: 7, From: 1, Leading: true, Released: 10, Durable: 10}
	if a := r.Request(q); a.Action != StartRecompute {
		t.Fatalf("first: %+v", a)
	}
	a := r.Request(q)
	if a.Action != Send || a.End.Status != wire.ReplayRefused || !a.NoteSession {
		t.Fatalf("while one runs: %+v", a)
	}
	if c := r.Counters(); c.ReplayRecomputeBusy != 1 || c.ReplayRefused != 1 {
		t.Fatalf("counters %+v", c)
	}
}

// TestFinish: a recompute's result is answered Refused after an error or
// a change of term (a failure counted and handed back unless the node
// was closing), TooOld with the history's plan when the journal does not
// reach back, else with its outputs.
func TestFinish(t *testing.T) {
	job := Job{Session: 7, From: 2, Upto: 9, TooOld: Plan{Next: 7, Highest: 10, TooOld: true}}
	outs := []Output{{Seq: 2, OutSeq: 2}, {Seq: 3, OutSeq: 3}, {Seq: 5, OutSeq: 4}}
	failure := errors.New("unreadable")
	for _, tc := range []struct {
		name     string
		res      Result
		current  bool
		engine   OutSeqer
		end      wire.ReplayEnd
		outs     int
		err      error
		counters Counters
	}{
		{name: "failed", res: Result{Job: job, Records: 5, Err: failure}, current: true,
			end: wire.ReplayEnd{Session: 7, From: 2, Next: 2, Status: wire.ReplayRefused}, err: failure,
			counters: Counters{ReplayRefused: 1, ReplayRecomputeRecords: 5, ReplayRecomputeFailed: 1}},
		{name: "stopped", res: Result{Job: job, Records: 1024, Err: ErrStopped}, current: true,
			end:      wire.ReplayEnd{Session: 7, From: 2, Next: 2, Status: wire.ReplayRefused},
			counters: Counters{ReplayRefused: 1, ReplayRecomputeRecords: 1024}},
		{name: "term changed", res: Result{Job: job, Records: 9, Outputs: outs}, current: false,
			end:      wire.ReplayEnd{Session: 7, From: 2, Next: 2, Status: wire.ReplayRefused},
			counters: Counters{ReplayRefused: 1, ReplayRecomputeRecords: 9}},
		{name: "too old", res: Result{Job: job, Records: 3, TooOld: true}, current: true,
			end:      wire.ReplayEnd{Session: 7, From: 2, Next: 7, Highest: 10, Status: wire.ReplayTooOld},
			counters: Counters{ReplayTooOld: 1, ReplayRecomputeRecords: 3}},
		{name: "recomputed", res: Result{Job: job, Records: 9, Outputs: outs}, current: true,
			end: wire.ReplayEnd{Session: 7, From: 2, Next: 5, Highest: 10}, outs: 3,
			counters: Counters{ReplayServed: 3, ReplayRecomputed: 1, ReplayRecomputeRecords: 9}},
		{name: "recomputed, the engine's last output", res: Result{Job: job, Records: 9, Outputs: outs}, current: true, engine: fixedOutSeq(12),
			end: wire.ReplayEnd{Session: 7, From: 2, Next: 5, Highest: 12}, outs: 3,
			counters: Counters{ReplayServed: 3, ReplayRecomputed: 1, ReplayRecomputeRecords: 9}},
		{name: "nothing released after the base", res: Result{Job: job}, current: true,
			end:      wire.ReplayEnd{Session: 7, From: 2, Next: 2, Highest: 10},
			counters: Counters{ReplayRecomputed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := replayWith(4, 1, 0)
			r.busy = true
			a := r.Finish(&tc.res, tc.current, tc.engine)
			if a.Action != Send || a.End != tc.end || len(a.Outputs) != tc.outs || a.Err != tc.err || a.NoteSession {
				t.Fatalf("answer %+v\nwant end %+v, %d outputs, err %v", a, tc.end, tc.outs, tc.err)
			}
			if got := r.Counters(); got != tc.counters {
				t.Fatalf("counters %+v, want %+v", got, tc.counters)
			}
			if r.Busy() {
				t.Fatal("still busy after Finish")
			}
		})
	}
}

// TestReset: Reset empties the history and counts, without a history it
// does nothing.
func TestReset(t *testing.T) {
	r := replayWith(8, 1, 3)
	r.Reset()
	if p := r.History().Plan(7, 1, 3, 10); p.Highest != 0 {
		t.Fatalf("after Reset: %+v", p)
	}
	if c := r.Counters(); c.ReplayResets != 1 || c.ReplayRecorded != 3 {
		t.Fatalf("counters %+v", c)
	}
	r = New(Config{})
	r.Reset()
	r.Record(1, 7, histOutput(1, 0))
	if c := r.Counters(); c != (Counters{}) || r.History() != nil {
		t.Fatalf("without a history: %+v", c)
	}
}

// TestFrames: outputs are packed greedily into OUTPUT frames marked
// replay, each carrying its first output's command seq, in order.
func TestFrames(t *testing.T) {
	origin := wire.Origin{Stream: 9, Node: 1, Epoch: 4}
	one := len(histOutput(1, 0))
	for _, tc := range []struct {
		name     string
		outputs  int
		datagram int
		perFrame int
	}{
		{"none", 0, 0, 0},
		{"one frame", 5, 0, 5},
		{"several frames", 10, wire.HeaderLen + 3*(wire.MessageOverhead+one), 3},
		{"one a frame", 4, wire.HeaderLen + wire.MessageOverhead + one, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{History: 64, DatagramBytes: tc.datagram})
			for s := uint64(1); s <= uint64(tc.outputs); s++ {
				r.Record(10*s, 7, histOutput(s, s))
			}
			a := r.Request(Request{Session: 7, From: 1, Leading: true, Released: 1 << 20})
			frames := r.Frames(&a, origin)
			next := uint64(1)
			for frame, ok := frames.Next(); ok; frame, ok = frames.Next() {
				f, _, err := wire.Parse(frame)
				if err != nil || f.Type != wire.TypeOutput || f.Flags&wire.FlagReplay == 0 || f.Origin() != origin || f.Seq != 10*next {
					t.Fatalf("frame %+v (err %v), want OUTPUT marked replay at seq %d", f, err, 10*next)
				}
				it := f.Messages()
				k := 0
				for _, msg, ok := it.Next(); ok; _, msg, ok = it.Next() {
					o, err := engine.ParseOutput(msg)
					if err != nil || o.OutSeq != next || o.TradeID != next {
						t.Fatalf("output %+v (err %v), want out seq %d", o, err, next)
					}
					next++
					k++
				}
				if k != tc.perFrame && next <= uint64(tc.outputs) {
					t.Fatalf("%d outputs in a frame that is not the last, want %d", k, tc.perFrame)
				}
			}
			if next != uint64(tc.outputs)+1 {
				t.Fatalf("frames carried outputs up to %d, want %d", next-1, tc.outputs)
			}
		})
	}
}
