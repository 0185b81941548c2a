package engine

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// outSeqChecker follows every session's output seqs as a client would.
type outSeqChecker struct {
	last map[uint64]uint64
}

// check verifies that every numbered output of a session is the next one
// (1..n, no gap, no repeat) and that a Duplicate repeats a seq already given.
func (c *outSeqChecker) check(t *rapid.T, cmd int, outs []emitted) {
	for j, out := range outs {
		if out.to == MarketData {
			continue
		}
		o, err := ParseOutput(out.payload)
		if err != nil {
			t.Fatalf("cmd %d output %d: %v", cmd, j, err)
		}
		seq, ok := SessionOutSeq(out.payload)
		switch {
		case o.Kind == KindDuplicate:
			if ok || o.OutSeq == 0 || o.OutSeq > c.last[out.to] {
				t.Fatalf("cmd %d: duplicate with out seq %d, session at %d", cmd, o.OutSeq, c.last[out.to])
			}
		case o.OutSeq == 0:
			// An unrecorded reject: not part of the history.
			if o.Kind != KindReject || (o.Reason != ReasonBadClientOrderID && o.Reason != ReasonTooOld && o.Reason != ReasonTooManySessions) {
				t.Fatalf("cmd %d: unnumbered %s", cmd, format(out.to, o))
			}
		default:
			if !ok || seq != o.OutSeq || o.OutSeq != c.last[out.to]+1 {
				t.Fatalf("cmd %d: session %d out seq %d after %d", cmd, out.to, o.OutSeq, c.last[out.to])
			}
			c.last[out.to] = o.OutSeq
		}
	}
}

// TestOutSeqGapFreeAcrossSnapshot: per session, output seqs run 1..n with
// no gap through any stream; an engine restored from a snapshot taken at
// any point continues them exactly (same bytes as the one that never
// snapshotted), and the engine's SessionOutSeq agrees with the last seen.
func TestOutSeqGapFreeAcrossSnapshot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		cmds := drawStream(t, cfg, rapid.IntRange(1, 120).Draw(t, "n"))
		cut := rapid.IntRange(0, len(cmds)).Draw(t, "cut")
		a, _ := New(cfg)
		var ra, rb recorder
		c := outSeqChecker{last: map[uint64]uint64{}}
		var b *Engine
		for i, cmd := range cmds {
			if i == cut {
				var buf bytes.Buffer
				if err := a.Snapshot(&buf); err != nil {
					t.Fatal(err)
				}
				b, _ = New(cfg)
				if err := b.Restore(&buf); err != nil {
					t.Fatalf("restore at %d: %v", i, err)
				}
			}
			a.Apply(uint64(i+1), cmd, &ra)
			outs := ra.take()
			c.check(t, i, outs)
			if b != nil {
				b.Apply(uint64(i+1), cmd, &rb)
				if !equalOutputs(outs, rb.take()) || a.StateHash() != b.StateHash() {
					t.Fatalf("restored engine diverged at cmd %d", i)
				}
			}
		}
		for s, last := range c.last {
			if got := a.SessionOutSeq(s); got != last {
				t.Fatalf("session %d: SessionOutSeq %d, last output %d", s, got, last)
			}
		}
	})
}

// TestOutSeqInHash: two states that differ only in a session's output seq
// hash differently, and a snapshot that lies about it is refused.
func TestOutSeqInHash(t *testing.T) {
	e := mustNew(t, testConfig())
	var rec recorder
	e.Apply(1, limitCmd(1, 1, 0, Buy, 100, 5), &rec)
	before := e.StateHash()
	e.sessionChanged(0)
	e.sessions[0].outSeq++
	if e.StateHash() == before {
		t.Fatal("state hash ignores the session's output seq")
	}
	if e.recomputeHash() != e.sum() {
		t.Fatal("recomputed hash differs")
	}
	// A snapshot whose session out seq is below its recorded results'.
	f := mustNew(t, testConfig())
	f.Apply(1, limitCmd(1, 1, 0, Buy, 100, 5), &rec)
	f.Apply(2, limitCmd(1, 2, 0, Buy, 100, 5), &rec)
	f.sessions[0].outSeq = 1 // result of clOrd 2 carries out seq 2
	var buf bytes.Buffer
	if err := f.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	g := mustNew(t, testConfig())
	if err := g.Restore(&buf); err == nil {
		t.Fatal("restored a snapshot whose out seq is below its results'")
	}
}

// TestOutSeqRestingSide: the passive side's execution is numbered in its
// owner's history, not the aggressor's.
func TestOutSeqRestingSide(t *testing.T) {
	e := mustNew(t, testConfig())
	var rec recorder
	e.Apply(1, limitCmd(1, 1, 0, Sell, 100, 5), &rec) // s1: ack #1
	e.Apply(2, limitCmd(2, 1, 0, Buy, 100, 5), &rec)  // s2: ack #1, exec #2; s1: exec #2
	want := map[uint64][]uint64{}
	for _, out := range rec.take() {
		if seq, ok := SessionOutSeq(out.payload); ok {
			want[out.to] = append(want[out.to], seq)
		}
	}
	if len(want[1]) != 2 || want[1][1] != 2 || len(want[2]) != 2 || want[2][1] != 2 {
		t.Fatalf("out seqs %v", want)
	}
}
