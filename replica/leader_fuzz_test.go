package replica

import (
	"math/rand/v2"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// leaderInvariants drives a Leader with the input sequence ops encodes,
// as node would, and fails when it panics or when:
//   - an entry is not the next seq, or comes after the journal failed;
//   - the state machine applied anything the journal does not hold;
//   - a command of a frame is neither sequenced nor counted once;
//   - an output is released above the gate's Release, above what was
//     applied, above what is durable or acknowledged, or out of seq order;
//   - anything is released after the journal failed.
func leaderInvariants(t *testing.T, ops []byte) {
	sm := newTestSM()
	var rec testRecorder
	ring := testRing{enabled: len(ops) > 0 && ops[0]%2 == 1}
	j := testJournal{recs: map[uint64][]byte{}}
	sessions := NewSessions[string](3)
	p, err := NewPrimary(PrimaryConfig{Self: 1, Epoch: 1, Peers: []uint32{2}}, &InSync{}, nil, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLeader[string](LeaderConfig{Sequencer: sequencer.Config{Stream: 9, Node: 1}, Epoch: 1,
		PublisherCapacity: 6, HashEvery: 5, SnapshotEvery: 7, MarketData: true}, p, sm, &j, sessions, &rec, &ring)
	if err != nil {
		t.Fatal(err)
	}
	l.Promoted(1)
	var (
		now                  int64
		last, durable, acked uint64
		released, framed     uint64
		lastOut              = map[uint64]uint64{} // session (0: market data) -> seq of its last frame
		broken               bool
		buf                  []byte
		counted, offered     uint64
		reported, watermark  uint64 // the released watermark last reported, and the highest released
		firsts               int    // first releases after the promotion reported
	)
	next := func(i int) byte {
		if i < len(ops) {
			return ops[i]
		}
		return 0
	}
	ready := func() {
		if !l.HasReady() {
			return
		}
		rd := l.Ready()
		for _, o := range rd.Frames {
			if _, _, err := wire.Parse(o.Frame); err != nil {
				t.Fatalf("the sequencer's frame does not parse: %v", err)
			}
		}
		c := rd.Counts
		released += c.OutputsReleased
		counted += c.Commands + c.BadCommands + c.NotLeading + c.SessionsFull + c.Backpressure + c.AnsweredFromTable
		l.Advance()
	}
	for i := 0; i < len(ops); i += 3 {
		op, x, y := ops[i], next(i+1), next(i+2)
		switch op % 8 {
		case 0, 1: // a COMMAND frame of 1..4 commands
			msgs := make([][]byte, 1+int(y)%4)
			for k := range msgs {
				session := 1 + uint64(x)%5
				id := uint64(x/5) + uint64(k)
				msgs[k] = engine.AppendCommand(nil, session, id, []byte{y % 3, (y / 3) % 2})
				if (x+byte(k))%17 == 0 {
					msgs[k] = msgs[k][:5] // no header
				}
			}
			buf, err = wire.AppendData(buf[:0], wire.TypeCommand, wire.Origin{Stream: 9}, 1, msgs...)
			if err != nil {
				t.Fatal(err)
			}
			fr, _, err := wire.Parse(buf)
			if err != nil {
				t.Fatal(err)
			}
			offered += uint64(len(msgs))
			l.Commands(&fr, string(rune('a'+y%4)), now)
			for {
				e, ok := l.Next()
				ready()
				if !ok {
					break
				}
				if broken || e.Seq != last+1 {
					t.Fatalf("entry %d after %d (journal failed: %v)", e.Seq, last, broken)
				}
				last = e.Seq
				if op%8 == 1 && x%5 == 0 {
					j.fail = true
				}
				if err := j.Append(e.Seq, e.Cmd); err != nil {
					broken = true
					l.JournalFailed() // the failed one and the frame's rest are not counted
					break
				}
				l.Apply(e)
				if sm.AppliedSeq() != e.Seq {
					t.Fatalf("applied %d, appended %d", sm.AppliedSeq(), e.Seq)
				}
				ready()
			}
		case 2: // durable never above what was journaled
			if !broken {
				durable = max(durable, min(last, durable+uint64(x)%6))
				l.Durable(durable)
			}
		case 3:
			acked = max(acked, min(last, acked+uint64(x)%6))
			l.Ack(2, 1, acked, 0, now)
		case 4:
			l.Primary().SetLease(x%4 != 0) // even after the journal failed: nothing may leave
		case 5:
			l.EndBatch(now)
		case 6:
			now += int64(x) * 1_000_000
			l.Tick(now)
		case 7: // the release
			rr := l.Release(now, ReleaseInput{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 1}, Durable: durable, LeaseHeld: true})
			rel := rr.Released
			if broken && rel != 0 {
				t.Fatalf("released %d after the journal failed", rel)
			}
			if rel > min(durable, acked) || rel > sm.AppliedSeq() || rel < watermark && rel != 0 {
				t.Fatalf("release %d with durable %d, acked %d, applied %d, released before %d", rel, durable, acked, sm.AppliedSeq(), watermark)
			}
			if rr.Report != (rel > reported) || rr.Report && (rr.Event.Released != rel || rr.Event.Applied != sm.AppliedSeq() || rr.Event.Durable != durable) {
				t.Fatalf("release %d after %d reported: %v %+v", rel, reported, rr.Report, rr.Event)
			}
			reported, watermark = max(reported, rel), max(watermark, rel)
			sent := false
			for fr, ok := l.NextFrame(); ok && rel != 0; fr, ok = l.NextFrame() {
				f, _, err := wire.Parse(fr.Bytes)
				if err != nil || f.Type != wire.TypeOutput || f.Count == 0 {
					t.Fatalf("released frame %v (%v)", f.Type, err)
				}
				if f.Seq > rel || f.Seq < lastOut[fr.Session] {
					t.Fatalf("a frame of seq %d for session %d released at %d after one of %d", f.Seq, fr.Session, rel, lastOut[fr.Session])
				}
				lastOut[fr.Session] = f.Seq
				framed += uint64(f.Count)
				sent = true
			}
			if l.HasReady() {
				if first := l.Ready().FirstRelease; first != 0 && (!sent || first != rel || firsts > 0) {
					t.Fatalf("first release %d reported (release %d, sent %v, reported before %d)", first, rel, sent, firsts)
				} else if first != 0 {
					firsts++
				}
			}
			if sent && firsts == 0 {
				t.Fatalf("release %d sent frames: not reported as the first after the promotion", rel)
			}
		}
		ready()
	}
	ready()
	if framed != released {
		t.Fatalf("%d outputs in the released frames, %d counted released", framed, released)
	}
	if broken {
		// The frame whose append failed: the failed command and the
		// frame's rest are counted nowhere; only a bound holds.
		if counted >= offered {
			t.Fatalf("%d commands counted of %d offered", counted, offered)
		}
		return
	}
	if counted != offered {
		t.Fatalf("%d commands counted of %d offered", counted, offered)
	}
}

func FuzzLeader(fz *testing.F) {
	fz.Add([]byte{0, 7, 3, 5, 0, 0, 2, 5, 0, 3, 5, 0, 7, 0, 0})
	fz.Add([]byte{1, 11, 2, 1, 30, 1, 4, 0, 0, 0, 12, 3, 4, 1, 0, 7, 0, 0, 1, 25, 0})
	fz.Fuzz(func(t *testing.T, ops []byte) { leaderInvariants(t, ops) })
}

// TestLeaderRandomInputs runs the fuzz target's invariants over random
// input sequences, so that go test exercises them beyond the seeds.
func TestLeaderRandomInputs(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		ops := make([]byte, 3*(50+r.IntN(300)))
		for i := range ops {
			ops[i] = byte(r.UintN(256))
		}
		leaderInvariants(t, ops)
	}
}
