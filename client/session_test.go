package client

import (
	"slices"
	"testing"

	"github.com/seqbus/seqbus/engine"
)

func out(kind engine.OutputKind, seq, coid uint64) *engine.Output {
	o := &engine.Output{Kind: kind, OutSeq: seq, ClientOrderID: coid}
	if kind == engine.KindDuplicate {
		o.Original = engine.KindAck
	}
	return o
}

// deliver runs outputs through Admit and returns the out seqs delivered.
func deliver(c *Core, replay bool, outs ...*engine.Output) []uint64 {
	var got []uint64
	for _, o := range outs {
		if c.Admit(o, replay) {
			got = append(got, o.OutSeq)
		}
	}
	return got
}

func equal(a, b []uint64) bool {
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

// TestAdmitGapAsksReplayAndKeepsOrder: an output beyond the next one is a
// gap: not delivered, and the core asks for a replay from the first one
// missing; the replay delivers the missing ones and the dropped ones in
// order, and what was delivered already is dropped as a repeat.
func TestAdmitGapAsksReplayAndKeepsOrder(t *testing.T) {
	c := NewCore(Config{Session: 7})
	if got := deliver(c, false, out(engine.KindAck, 1, 1), out(engine.KindExecution, 2, 1)); !equal(got, []uint64{1, 2}) {
		t.Fatalf("delivered %v", got)
	}
	var asked []uint64
	send := func(from uint64) { asked = append(asked, from) }
	if c.PollReplay(0, send) {
		t.Fatal("asked for a replay with no gap")
	}
	// 3 and 4 lost; 5 and 6 arrive.
	if got := deliver(c, false, out(engine.KindAck, 5, 3), out(engine.KindExecution, 6, 3)); len(got) != 0 {
		t.Fatalf("delivered %v beyond a gap", got)
	}
	if !c.ReplayWanted() || !c.PollReplay(1, send) || !equal(asked, []uint64{3}) {
		t.Fatalf("gap: asked %v", asked)
	}
	if c.PollReplay(2, send) {
		t.Fatal("second request inside the pacing interval")
	}
	// The replay, with a repeat of 2 in front.
	got := deliver(c, true, out(engine.KindExecution, 2, 1), out(engine.KindAck, 3, 2), out(engine.KindExecution, 4, 2),
		out(engine.KindAck, 5, 3), out(engine.KindExecution, 6, 3))
	if !equal(got, []uint64{3, 4, 5, 6}) {
		t.Fatalf("replay delivered %v", got)
	}
	c.OnReplayEnd(ReplayAnswer{From: 3, Next: 7, Highest: 6})
	if c.ReplayWanted() {
		t.Fatal("still wants a replay after a complete one")
	}
	st := c.SessionStats()
	if st.Gaps != 2 || st.Repeats != 1 || st.ReplayDelivered != 4 || st.ReplayExecutions != 2 || st.LastOutSeq != 6 || st.ReplayRequests != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Late copies of 5, 6 (the originals of the dropped ones): repeats.
	if got := deliver(c, false, out(engine.KindAck, 5, 3), out(engine.KindExecution, 6, 3)); len(got) != 0 {
		t.Fatalf("delivered repeats %v", got)
	}
}

// TestAdmitDuplicateAnswer: a duplicate answer carries its original's seq;
// in that place it answers the command, as a repeat it is dropped, and
// beyond the next it is a gap.
func TestAdmitDuplicateAnswer(t *testing.T) {
	c := NewCore(Config{Session: 7})
	_, _, _ = c.Next(&engine.Request{Op: engine.OpNewOrder}, 0, 0)
	d := out(engine.KindDuplicate, 1, 1)
	if !c.Admit(d, false) {
		t.Fatal("duplicate in its original's place not delivered")
	}
	if res, ok := c.OnOutput(d, 1); !ok || !res.Duplicate {
		t.Fatalf("duplicate did not answer: %+v %v", res, ok)
	}
	if c.Admit(out(engine.KindAck, 1, 1), false) || c.Admit(out(engine.KindDuplicate, 1, 1), false) {
		t.Fatal("repeat of output 1 delivered")
	}
	if c.Admit(out(engine.KindDuplicate, 3, 2), false) || !c.ReplayWanted() {
		t.Fatal("duplicate beyond a gap delivered, or no replay asked")
	}
	// Unnumbered rejects and market data are always delivered.
	if !c.Admit(&engine.Output{Kind: engine.KindReject, Reason: engine.ReasonTooOld}, false) ||
		!c.Admit(&engine.Output{Kind: engine.KindMarketData, MDSeq: 9}, false) {
		t.Fatal("unnumbered output dropped")
	}
}

// reconnectedBehind is a core with outputs 1..4 delivered that
// reconnected at time 100, asked from 5, and was answered that the
// session's outputs reach highest: it is behind. asked collects the
// froms send was called with.
func reconnectedBehind(everyNs int64, highest uint64) (c *Core, asked *[]uint64, send func(uint64)) {
	c = NewCore(Config{Session: 7, LastOutSeq: 4, ReplayEveryNs: everyNs})
	asked = new([]uint64)
	send = func(from uint64) { *asked = append(*asked, from) }
	c.Reconnected()
	c.PollReplay(100, send)
	c.OnReplayEnd(ReplayAnswer{From: 5, Next: 5, Highest: highest})
	return c, asked, send
}

// TestReconnectAsksUntilWithheldDelivered: after a failover the core asks
// from the next output; a Done answer whose Highest is above what it has
// (outputs still behind the new primary's gate) keeps it asking, at its
// pace, until they are delivered.
func TestReconnectAsksUntilWithheldDelivered(t *testing.T) {
	c, asked, send := reconnectedBehind(10, 6) // 5, 6 withheld
	if !c.ReplayWanted() {
		t.Fatal("stopped asking with outputs withheld")
	}
	c.PollReplay(105, send)
	c.PollReplay(110, send)
	deliver(c, true, out(engine.KindExecution, 5, 1), out(engine.KindExecution, 6, 1))
	if c.ReplayWanted() || c.PollReplay(200, send) || !equal(*asked, []uint64{5, 5}) {
		t.Fatalf("asked %v, wanted %v", *asked, c.ReplayWanted())
	}
}

// TestReplayTooOldSkips: a TooOld answer skips what is gone (counted) and
// the core asks on from the oldest held; a refusal changes nothing.
func TestReplayTooOldSkips(t *testing.T) {
	c := NewCore(Config{Session: 7, ReplayEveryNs: 10})
	var asked []uint64
	send := func(from uint64) { asked = append(asked, from) }
	c.Reconnected()
	c.PollReplay(100, send)
	c.OnReplayEnd(ReplayAnswer{From: 1, Refused: true})
	c.OnReplayEnd(ReplayAnswer{From: 1, Next: 4, Highest: 5, TooOld: true})
	c.PollReplay(101, send)
	st := c.SessionStats()
	if st.Skipped != 3 || st.TooOld != 1 || st.Refused != 1 || c.LastOutSeq() != 3 || !equal(asked, []uint64{1, 4}) {
		t.Fatalf("stats %+v asked %v", st, asked)
	}
}

// TestProbeFindsLostTail: with nothing wanted the core still probes at
// its pace; an answer whose Highest is above what it has (the session's
// last outputs were lost, and no later output shows the gap) makes it ask
// until they are delivered.
func TestProbeFindsLostTail(t *testing.T) {
	c := NewCore(Config{Session: 7, ReplayEveryNs: 10, ProbeEveryNs: 1000})
	var asked []uint64
	send := func(from uint64) { asked = append(asked, from) }
	deliver(c, false, out(engine.KindAck, 1, 1))
	if c.PollReplay(500, send) || !c.PollReplay(1000, send) || !equal(asked, []uint64{2}) {
		t.Fatalf("probe: asked %v", asked)
	}
	c.OnReplayEnd(ReplayAnswer{From: 2, Next: 2, Highest: 2})
	if !c.ReplayWanted() || !c.PollReplay(1010, send) {
		t.Fatal("a lost tail output does not make the core ask")
	}
	deliver(c, true, out(engine.KindExecution, 2, 1))
	if c.ReplayWanted() {
		t.Fatal("still asking after the tail was delivered")
	}
	c.OnReplayEnd(ReplayAnswer{From: 3, Next: 3, Highest: 2})
	if c.ReplayWanted() || c.PollReplay(1500, send) {
		t.Fatal("asking with nothing missing before the next probe")
	}
	off := NewCore(Config{Session: 7, ProbeEveryNs: -1})
	if off.PollReplay(1<<40, send) {
		t.Fatal("probed with probes off")
	}
}

// TestBehindButArrivingAsksNothing: a Done answer above what the core has
// (outputs released and on their way) asks nothing more while they keep
// arriving, and asks once they stop.
func TestBehindButArrivingAsksNothing(t *testing.T) {
	c := NewCore(Config{Session: 7, ReplayEveryNs: 10, ProbeEveryNs: 1000})
	var asked []uint64
	send := func(from uint64) { asked = append(asked, from) }
	c.PollReplay(1000, send) // the probe
	c.OnReplayEnd(ReplayAnswer{From: 1, Next: 1, Highest: 5})
	deliver(c, false, out(engine.KindAck, 1, 1))
	c.PollReplay(1010, send) // progress since the answer: no ask
	deliver(c, false, out(engine.KindAck, 2, 2))
	c.PollReplay(1020, send) // progress again
	if len(asked) != 1 {
		t.Fatalf("asked %v while outputs kept arriving", asked)
	}
	c.PollReplay(1030, send) // stalled at 2 for an interval: ask from 3
	if !equal(asked, []uint64{1, 3}) {
		t.Fatalf("asked %v after the outputs stopped", asked)
	}
}

// TestBehindAsksAtItsPace: outputs the primary reported (Highest) that do
// not arrive make the core ask again once per pacing interval, however
// often PollReplay runs, while no answer comes (a primary stopped or cut
// off). It asked at every call before (every 2 ms timer tick and every
// received batch: ~500 requests a second, which a paused primary answered
// all at once on SIGCONT, seen in seqbus chaos).
func TestBehindAsksAtItsPace(t *testing.T) {
	c, asked, send := reconnectedBehind(50, 9) // 5..9 on their way, then nothing
	for now := int64(102); now <= 1100; now += 2 {
		c.PollReplay(now, send)
	}
	// The first request, then one every 50 after the answer's 100: at
	// 150, 200, ..., 1100.
	if n := len(*asked); n < 19 || n > 21 {
		t.Fatalf("%d requests in 1000 ticks of a 50 pacing with nothing arriving, want ~20", n)
	}
}

// TestRefusedWhileRejoiningAsksSoon: the arbiter names the new holder a
// few ms before it promotes, so the replay request a switch sends is
// refused by a node that does not lead yet. Until the new primary has
// delivered something, a refusal makes the core ask again a tenth of the
// pacing later (it waited the whole pacing before: a gap the switch left
// was filled ~40 ms late, seen in seqbus chaos --faults stop-primary); a
// refusal after that (a primary over its rate bound) gets the whole
// pacing.
func TestRefusedWhileRejoiningAsksSoon(t *testing.T) {
	c := NewCore(Config{Session: 7, LastOutSeq: 4, ReplayEveryNs: 50})
	var asked []int64
	refuse := false // every request refused at once
	send := func(uint64) {}
	poll := func(from, to int64) {
		for now := from; now <= to; now++ {
			if c.PollReplay(now, send) {
				asked = append(asked, now)
				if refuse {
					c.OnReplayEnd(ReplayAnswer{From: 5, Refused: true})
				}
			}
		}
	}
	c.Reconnected()
	refuse = true
	poll(100, 120)
	if want := []int64{100, 105, 110, 115, 120}; !slices.Equal(asked, want) {
		t.Fatalf("refused while rejoining: asked at %v, want %v (every tenth of the pacing)", asked, want)
	}
	// The new primary delivers 5; 7 arrives beyond a gap: asked for at
	// the short pacing the last refusal set, and a refusal now is a
	// primary's own: the whole pacing after it.
	deliver(c, false, out(engine.KindAck, 5, 1))
	if c.Admit(out(engine.KindAck, 7, 2), false) {
		t.Fatal("an output beyond a gap delivered")
	}
	asked = nil
	poll(121, 200)
	if want := []int64{125, 175}; !slices.Equal(asked, want) {
		t.Fatalf("refused by a primary that delivered: asked at %v, want %v", asked, want)
	}
}

// TestGapAfterAnswerAsksSoon: a gap seen after the last request was
// answered is news that answer did not cover (a new primary answers the
// switch's request before its gate has released the outputs its
// predecessor never did, and only a replay delivers those), so the core
// asks a tenth of the pacing after that request, not a whole pacing
// (seqbus chaos --faults stop-primary: ~45 ms of held outputs after
// every planned handover). A gap seen while a request is unanswered
// waits for it at the usual pace.
func TestGapAfterAnswerAsksSoon(t *testing.T) {
	c := NewCore(Config{Session: 7, LastOutSeq: 4, ReplayEveryNs: 50})
	var asked []int64
	send := func(uint64) {}
	poll := func(from, to int64) {
		for now := from; now <= to; now++ {
			if c.PollReplay(now, send) {
				asked = append(asked, now)
			}
		}
	}
	c.Reconnected()
	poll(100, 100)
	c.OnReplayEnd(ReplayAnswer{From: 5, Next: 5, Highest: 4}) // nothing released yet
	deliver(c, false, out(engine.KindDuplicate, 5, 1))        // the answer to a resend
	if c.Admit(out(engine.KindAck, 8, 2), false) {            // 6, 7: the old primary's, unreleased
		t.Fatal("an output beyond a gap delivered")
	}
	poll(101, 140)
	if want := []int64{100, 105}; !slices.Equal(asked, want) {
		t.Fatalf("gap after the answer: asked at %v, want %v", asked, want)
	}
	// No answer yet to the request at 105: another gap waits the pacing.
	if c.Admit(out(engine.KindAck, 9, 3), false) {
		t.Fatal("an output beyond a gap delivered")
	}
	asked = nil
	poll(141, 160)
	if len(asked) != 1 || asked[0] != 155 {
		t.Fatalf("gap with a request unanswered: asked at %v, want [155]", asked)
	}
}
