package replica

import (
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// nopJournal is a journal that keeps nothing (the alloc test never NAKs
// below the ring).
type nopJournal struct{ last uint64 }

func (j *nopJournal) ReadFrom(uint64, func(epoch, seq uint64, payload []byte) bool) error {
	return nil
}

// The leader's steady command path does not allocate: a COMMAND frame of
// known sessions through the real engine (orders that cross, so fills
// and market data), each entry's Ready, append and Apply, the batch's
// DATA frame, a HASH, the ack and the durable watermark, and the release
// of every output.
func TestLeaderNoAllocations(t *testing.T) {
	eng, err := engine.New(engine.Config{MaxInstruments: 4, MaxOrders: 1 << 12, MaxSessions: 8, DedupWindow: 64, MaxOrderQty: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := newLeaderRig(t, eng)
	for range 50 {
		r.pass() // warm up: sessions known, buffers grown
	}
	allocs := testing.AllocsPerRun(200, r.pass)
	if allocs != 0 {
		t.Fatalf("%v allocations per pass of %d commands", allocs, leaderRigPerFrame)
	}
	if st := r.l.Sequencer().Stats(); st.Commands == 0 || r.rec.n == 0 || r.sink == 0 || r.lat.n == 0 {
		t.Fatalf("nothing went through: %+v, %d outputs recorded, %d latencies", st, r.rec.n, r.lat.n)
	}
}

// BenchmarkLeaderCommand is the leader core's whole command path per
// command (the pass of TestLeaderNoAllocations over a state machine that
// answers each command and does nothing else, engine.Nop): admission,
// sequencing into DATA frames, Ready and Advance, apply, the gate, the
// release into OUTPUT frames. No socket, no journal.
func BenchmarkLeaderCommand(b *testing.B) {
	r := newLeaderRig(b, &engine.Nop{})
	for range 50 {
		r.pass()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += leaderRigPerFrame {
		r.pass()
	}
}

const leaderRigPerFrame = 8

// leaderRig drives a Leader as the node does, one COMMAND frame of
// leaderRigPerFrame commands a pass.
type leaderRig struct {
	tb     testing.TB
	l      *Leader[string]
	j      nopJournal
	rec    testRecorder
	lat    latencyCounter
	id     uint64
	now    int64
	sink   uint64
	counts rigCounts
	frame  []byte
	cmds   [leaderRigPerFrame][]byte
}

func newLeaderRig(tb testing.TB, sm engine.StateMachine) *leaderRig {
	r := &leaderRig{tb: tb}
	sessions := NewSessions[string](8)
	p, err := NewPrimary(PrimaryConfig{Self: 1, Epoch: 1, Peers: []uint32{2}}, &InSync{}, nil, 0, 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	track, err := NewReleaseTrack(1<<10, &r.lat)
	if err != nil {
		tb.Fatal(err)
	}
	r.l, err = NewLeader[string](LeaderConfig{Sequencer: sequencer.Config{Stream: 9, Node: 1}, Epoch: 1, MarketData: true,
		PublisherCapacity: 256, HashEvery: 16, SnapshotEvery: 1 << 40, Track: track}, p, sm, &r.j, sessions, &r.rec, &testRing{})
	if err != nil {
		tb.Fatal(err)
	}
	r.l.Promoted(0)
	return r
}

func (r *leaderRig) build() {
	for k := range r.cmds {
		r.id++
		side := engine.Side(1 + r.id%2)
		r.cmds[k] = engine.AppendRequest(r.cmds[k][:0], 1+uint64(k%2), r.id, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 100, Qty: 5})
	}
	var err error
	r.frame, err = wire.AppendData(r.frame[:0], wire.TypeCommand, wire.Origin{Stream: 9}, r.id, r.cmds[:]...)
	if err != nil {
		r.tb.Fatal(err)
	}
}

func (r *leaderRig) pass() {
	l := r.l
	r.build()
	fr, _, err := wire.Parse(r.frame)
	if err != nil {
		r.tb.Fatal(err)
	}
	r.now += 1000
	l.Commands(&fr, "client", r.now)
	for {
		e, ok := l.Next()
		r.ready()
		if !ok {
			break
		}
		r.j.last = e.Seq
		l.Apply(e)
		r.ready()
	}
	l.EndBatch(r.now)
	r.ready()
	l.Durable(r.j.last)
	l.Ack(2, 1, r.j.last, 0, r.now)
	rr := l.Release(r.now, ReleaseInput{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 1}, Durable: r.j.last, LeaseHeld: true})
	r.sink += rr.Event.Released
	for fr, ok := l.NextFrame(); ok; fr, ok = l.NextFrame() {
		r.sink += uint64(len(fr.Bytes))
	}
	r.sink += l.Ready().Counts.OutputsReleased
	l.Advance()
}

// ready takes the leader's Ready as the node does (node.leaderReady):
// only when HasReady says there is one; the frames, the counts added to
// the runtime's by pointer (status.Stats.AddLeader), the snapshot read
// before Advance.
func (r *leaderRig) ready() {
	if !r.l.HasReady() {
		return
	}
	rd := r.l.Ready()
	r.sink += uint64(len(rd.Frames))
	r.counts.add(&rd.Counts)
	if rd.Lost != nil {
		r.sink++
	}
	snap := rd.Snapshot
	r.l.Advance()
	r.sink += snap
}

// rigCounts adds a Ready's counts as the runtime's counters do.
type rigCounts struct{ commands, released, other uint64 }

//go:noinline
func (c *rigCounts) add(x *LeaderCounts) {
	c.commands += x.Commands
	c.released += x.OutputsReleased
	c.other += x.BadCommands + x.NotLeading + x.SessionsFull + x.Backpressure + x.AnsweredFromTable + x.OutputsLost
}

// latencyCounter is a LatencyRecorder that counts.
type latencyCounter struct{ n, sumUs int64 }

func (c *latencyCounter) RecordValue(v int64) error { c.n++; c.sumUs += v; return nil }
