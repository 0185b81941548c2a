package sim

import (
	"strings"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// The checker's rules, each shown failing on a hand-made history, without
// running a cluster.

func newTestChecker(t *testing.T) (*sim, *checker) {
	t.Helper()
	s := &sim{nodes: make([]*simNode, DefaultNodes+1), numNodes: DefaultNodes}
	for i := range s.nodes {
		s.nodes[i] = &simNode{id: i}
	}
	s.chk = newChecker(s)
	return s, s.chk
}

func order(session, id uint64, price int64) []byte {
	r := engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: price, Qty: 5}
	return engine.AppendRequest(nil, session, id, &r)
}

func apply(t *testing.T, c *checker, id int, cmds ...[]byte) engine.StateMachine {
	t.Helper()
	sm, err := c.newStateMachine(id)()
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		sm.Apply(uint64(i+1), cmd, nil)
	}
	return sm
}

func grant(s *sim, c *checker, id uint32, epoch uint64) {
	c.onWitnessReply(id, &arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: epoch, DurationNs: 300_000_000})
}

func release(c *checker, id uint32, epoch, upto uint64) {
	c.onRelease(nodeconfig.ReleaseEvent{Node: id, Epoch: epoch, Released: upto, Applied: upto, Durable: upto, RequiredAck: upto, RequiredOK: true, LeaseHeld: true})
}

func wantViolation(t *testing.T, c *checker, inv string) {
	t.Helper()
	for _, v := range c.violations {
		if strings.HasPrefix(v, inv) {
			return
		}
	}
	t.Fatalf("want a violation of %q, got %q", inv, c.violations)
}

func TestCheckerAgreeingReleasesPass(t *testing.T) {
	s, c := newTestChecker(t)
	a, b := order(1, 1, 1000), order(2, 1, 1001)
	apply(t, c, 1, a, b)
	grant(s, c, 1, 1)
	release(c, 1, 1, 2)
	apply(t, c, 2, a, b)
	s.now = 400_000_000
	grant(s, c, 2, 2)
	c.onPromoted(2, 2, 1)
	release(c, 2, 2, 2)
	if len(c.violations) > 0 || c.refApplied != 2 {
		t.Fatalf("violations %q refApplied %d", c.violations, c.refApplied)
	}
}

func TestCheckerConflictingRelease(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000))
	grant(s, c, 1, 1)
	release(c, 1, 1, 1)
	apply(t, c, 2, order(1, 2, 999)) // another command at seq 1
	s.now = 400_000_000
	grant(s, c, 2, 2)
	c.onPromoted(2, 2, 1)
	wantViolation(t, c, "invariant 1")
	release(c, 2, 2, 1)
	wantViolation(t, c, "invariant 2")
}

func TestCheckerPromotedBehind(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1000))
	grant(s, c, 1, 1)
	release(c, 1, 1, 2)
	apply(t, c, 2, order(1, 1, 1000))
	c.onPromoted(2, 2, 1)
	wantViolation(t, c, "invariant 1")
}

func TestCheckerReleaseOutsideGrant(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000))
	grant(s, c, 1, 1)
	s.now = 300_000_000 // the grant ended
	release(c, 1, 1, 1)
	wantViolation(t, c, "invariant 2")
}

func TestCheckerOverlappingGrants(t *testing.T) {
	s, c := newTestChecker(t)
	grant(s, c, 1, 1)
	s.now = 100_000_000
	grant(s, c, 2, 2)
	wantViolation(t, c, "invariant 2")
}

func TestCheckerGateInputs(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1000))
	grant(s, c, 1, 1)
	c.onRelease(nodeconfig.ReleaseEvent{Node: 1, Epoch: 1, Released: 2, Applied: 2, Durable: 1, RequiredAck: 2, RequiredOK: true, LeaseHeld: true})
	wantViolation(t, c, "invariant 4")
}

func TestCheckerUnackedRelease(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000))
	c.onWitnessReply(1, &arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 1, DurationNs: 300_000_000, InSyncVersion: 2})
	c.witnessSet = []uint32{2} // standby 2 is in sync but acknowledged nothing
	release(c, 1, 1, 1)
	wantViolation(t, c, "invariant 4")
	_ = s
}

func TestCheckerEpochGoesBack(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1000))
	grant(s, c, 1, 3)
	release(c, 1, 3, 1)
	grant(s, c, 1, 2)
	release(c, 1, 2, 2)
	wantViolation(t, c, "invariant 2")
	wantViolation(t, c, "invariant 5")
}

func TestCheckerStateHashDivergence(t *testing.T) {
	_, c := newTestChecker(t)
	a := apply(t, c, 1, order(1, 1, 1000))
	c.noteState(2, 1, c.cur[1].head, a.StateHash()+1)
	wantViolation(t, c, "invariant 3")
}

func TestCheckerGap(t *testing.T) {
	_, c := newTestChecker(t)
	sm, _ := c.newStateMachine(1)()
	sm.Apply(2, order(1, 1, 1000), nil)
	wantViolation(t, c, "invariant 3")
}

func TestCheckerReceivedOutputs(t *testing.T) {
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000))
	grant(s, c, 1, 1)
	release(c, 1, 1, 1)
	ack := engine.AppendOutput(nil, &engine.Output{Kind: engine.KindAck, OutSeq: 1, ClientOrderID: 1, OrderID: 1, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 5})
	c.onClientOutput(1, ack)
	c.checkReceived()
	if len(c.violations) > 0 {
		t.Fatalf("the released ack was refused: %q (released %v)", c.violations, c.outputs)
	}
	forged := engine.AppendOutput(nil, &engine.Output{Kind: engine.KindAck, OutSeq: 2, ClientOrderID: 1, OrderID: 9, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 5})
	c.onClientOutput(1, forged)
	wantViolation(t, c, "invariant 6") // a second, different result for order 1
	c.checkReceived()
	wantViolation(t, c, "invariant 1")
}

func TestCheckerRestoreFindsHistory(t *testing.T) {
	_, c := newTestChecker(t)
	a := apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1001))
	var snap strings.Builder
	if err := a.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	b, _ := c.newStateMachine(2)()
	if err := b.Restore(strings.NewReader(snap.String())); err != nil {
		t.Fatal(err)
	}
	tb := c.cur[2]
	if tb.chainAt(2) != c.cur[1].chainAt(2) || tb.chainAt(1) != c.cur[1].chainAt(1) || tb.chainAt(1) == chainUnknown {
		t.Fatal("a restored replica's history was not identified")
	}
}

func TestCheckerEpochLedTwice(t *testing.T) {
	_, c := newTestChecker(t)
	apply(t, c, 1)
	c.onPromoted(1, 1, 1)
	c.onPromoted(1, 1, 1) // the same process again: fine
	if len(c.violations) > 0 {
		t.Fatal(c.violations)
	}
	c.onPromoted(1, 1, 2) // restarted, same epoch
	wantViolation(t, c, "invariant 2")
	c.violate(1, "downstream")
	if !strings.Contains(c.violations[len(c.violations)-1], "[after "+DiagEpochReused+"]") {
		t.Fatal("a later violation is not attributed to the open bug")
	}
}

type firstOutputs struct{ acks [][]byte }

func (f *firstOutputs) Emit(_ uint64, p []byte) {
	if o, err := engine.ParseOutput(p); err == nil && o.Kind == engine.KindAck {
		f.acks = append(f.acks, append([]byte(nil), p...))
	}
}

// A primary answers resends from its dedup table without sequencing them
// (engine.Deduper), so such an answer is in no released command's
// outputs: the checker accepts it only when the released history backs it
// (the original result was released; the released table gives the reject).
func TestCheckerAnsweredFromTable(t *testing.T) {
	cmds := [][]byte{order(1, 1, 1000), order(1, 100, 1000), order(1, 101, 1000)}
	ref, err := engine.New(engineConfig())
	if err != nil {
		t.Fatal(err)
	}
	var acks firstOutputs
	for i, c := range cmds {
		ref.Apply(uint64(i+1), c, &acks)
	}
	dup := func(i int) []byte { return append([]byte{byte(engine.KindDuplicate)}, acks.acks[i]...) }
	tooOld := func(id uint64) []byte {
		return engine.AppendOutput(nil, &engine.Output{Kind: engine.KindReject, ClientOrderID: id, Reason: engine.ReasonTooOld})
	}
	cases := []struct {
		name   string
		output []byte
		ok     bool
	}{
		{"duplicate of a released result", dup(0), true},
		{"duplicate of an unreleased result", dup(2), false},
		{"too old for the released table", tooOld(100 - 64), true},
		{"too old only for the unreleased table", tooOld(101 - 64), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newTestChecker(t)
			apply(t, c, 1, cmds...)
			grant(s, c, 1, 1)
			release(c, 1, 1, 2) // the first two commands only
			c.onClientOutput(1, tc.output)
			c.checkReceived()
			if tc.ok && len(c.violations) > 0 {
				t.Fatalf("refused: %q", c.violations)
			}
			if !tc.ok {
				wantViolation(t, c, "invariant 1")
			}
		})
	}
}

func TestCheckerStepDownFromOwnEpoch(t *testing.T) {
	s, c := newTestChecker(t)
	grant(s, c, 1, 2)
	s.now += 400_000_000
	grant(s, c, 2, 3)
	c.onStepDown(1, 2, 3, 2) // deposed by node 2's epoch: fine
	if len(c.violations) != 0 {
		t.Fatalf("step-down for another node's epoch flagged: %q", c.violations)
	}
	s.now += 400_000_000
	grant(s, c, 1, 4)
	c.onStepDown(1, 3, 4, 3) // epoch 4 is ours but the keeper never took it
	if len(c.violations) != 0 {
		t.Fatalf("step-down for a grant the keeper did not hold flagged: %q", c.violations)
	}
	c.onStepDown(1, 4, 5, 5) // not granted by the witness (a deny's epoch)
	if len(c.violations) != 0 {
		t.Fatalf("step-down for an epoch never granted to it flagged: %q", c.violations)
	}
	s.now += 400_000_000
	grant(s, c, 1, 6)
	c.onStepDown(1, 5, 6, 6)
	wantViolation(t, c, "invariant 2")
	if !strings.Contains(c.violations[0], DiagOwnStepDown) {
		t.Fatalf("violation without its diagnosis: %q", c.violations[0])
	}
}

// TestCheckerSessions: invariant 9. Delivering a session's outputs in
// order and all of them passes; delivering one past the next, or stopping
// short of the history at the end, is a violation.
func TestCheckerSessions(t *testing.T) {
	ackOf := func(outSeq, id uint64) []byte {
		return engine.AppendOutput(nil, &engine.Output{Kind: engine.KindAck, OutSeq: outSeq, ClientOrderID: id, OrderID: id,
			Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 5})
	}
	s, c := newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1000))
	grant(s, c, 1, 1)
	release(c, 1, 1, 2)
	c.onClientOutput(1, ackOf(1, 1))
	c.onClientOutput(1, ackOf(2, 2))
	c.checkSessions([]uint64{1})
	if len(c.violations) > 0 || !c.caughtUp([]uint64{1}) {
		t.Fatalf("a complete, in-order session was refused: %q", c.violations)
	}

	s, c = newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1000))
	grant(s, c, 1, 1)
	release(c, 1, 1, 2)
	c.onClientOutput(1, ackOf(2, 2)) // output 1 skipped
	wantViolation(t, c, "invariant 9")

	s, c = newTestChecker(t)
	apply(t, c, 1, order(1, 1, 1000), order(1, 2, 1000))
	grant(s, c, 1, 1)
	release(c, 1, 1, 2)
	c.onClientOutput(1, ackOf(1, 1))
	if c.caughtUp([]uint64{1}) {
		t.Fatal("caught up with output 2 never delivered")
	}
	c.checkSessions([]uint64{1})
	wantViolation(t, c, "invariant 9")
}

// TestCheckerTooOld: a replay's TooOld is the history's bound only when
// the answering node's disk cannot recompute the outputs; a TooOld for
// outputs its journal holds from seq 1 is a violation, one for outputs
// it no longer holds is not.
func TestCheckerTooOld(t *testing.T) {
	tooOld := journal.NewMemFS()
	for _, tc := range []struct {
		name    string
		journal bool
		want    bool
	}{
		{"journal holds them", true, true},
		{"journal empty", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newTestChecker(t)
			cmds := [][]byte{order(1, 1, 1000), order(1, 2, 1000)}
			fs := tooOld
			if tc.journal {
				fs = journal.NewMemFS()
				j, _, err := journal.Open(fs, "/n", journal.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for i, cmd := range cmds {
					if err := j.Append(1, uint64(i+1), cmd, 0); err != nil {
						t.Fatal(err)
					}
				}
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s.nodes[1].fs, s.nodes[1].cfg.Dir = fs, "/n"
			apply(t, c, 1, cmds...)
			grant(s, c, 1, 1)
			release(c, 1, 1, 2)
			end := wire.ReplayEnd{Origin: wire.Origin{Node: 1, Epoch: 1}, Session: 1, From: 1, Next: 3, Highest: 2, Status: wire.ReplayTooOld}
			c.checkTooOld(1, end.Append(nil))
			if got := len(c.violations) > 0; got != tc.want {
				t.Fatalf("violation %v, want %v: %q", got, tc.want, c.violations)
			}
			if tc.want {
				wantViolation(t, c, "invariant 9")
			}
		})
	}
}
