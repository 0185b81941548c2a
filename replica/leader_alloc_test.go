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
	var rec testRecorder
	ring := testRing{}
	var j nopJournal
	sessions := NewSessions[string](8)
	p, err := NewPrimary(PrimaryConfig{Self: 1, Epoch: 1, Peers: []uint32{2}}, &InSync{}, nil, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lat latencyCounter
	track, err := NewReleaseTrack(1<<10, &lat)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLeader[string](LeaderConfig{Sequencer: sequencer.Config{Stream: 9, Node: 1}, Epoch: 1, MarketData: true,
		PublisherCapacity: 256, HashEvery: 16, SnapshotEvery: 1 << 40, Track: track}, p, eng, &j, sessions, &rec, &ring)
	if err != nil {
		t.Fatal(err)
	}
	l.Promoted(0)
	const perFrame = 8
	var id uint64
	var frame []byte
	var cmds [perFrame][]byte
	build := func() {
		for k := range cmds {
			id++
			side := engine.Side(1 + id%2)
			cmds[k] = engine.AppendRequest(cmds[k][:0], 1+uint64(k%2), id, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 100, Qty: 5})
		}
		frame, err = wire.AppendData(frame[:0], wire.TypeCommand, wire.Origin{Stream: 9}, id, cmds[:]...)
		if err != nil {
			t.Fatal(err)
		}
	}
	var now int64
	var sink uint64
	pass := func() {
		build()
		fr, _, err := wire.Parse(frame)
		if err != nil {
			t.Fatal(err)
		}
		now += 1000
		l.Commands(&fr, "client", now)
		for {
			e, ok := l.Next()
			sink += uint64(len(l.Ready().Frames))
			l.Advance()
			if !ok {
				break
			}
			j.last = e.Seq
			l.Apply(e)
			sink += uint64(len(l.Ready().Frames))
			l.Advance()
		}
		l.EndBatch(now)
		sink += uint64(len(l.Ready().Frames))
		l.Advance()
		l.Durable(j.last)
		l.Ack(2, 1, j.last, now)
		rr := l.Release(now, ReleaseInput{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 1}, Durable: j.last, LeaseHeld: true})
		sink += rr.Event.Released
		for fr, ok := l.NextFrame(); ok; fr, ok = l.NextFrame() {
			sink += uint64(len(fr.Bytes))
		}
		sink += l.Ready().Counts.OutputsReleased
		l.Advance()
	}
	for range 50 {
		pass() // warm up: sessions known, buffers grown
	}
	allocs := testing.AllocsPerRun(200, pass)
	if allocs != 0 {
		t.Fatalf("%v allocations per pass of %d commands", allocs, perFrame)
	}
	if st := l.Sequencer().Stats(); st.Commands == 0 || rec.n == 0 || sink == 0 || lat.n == 0 {
		t.Fatalf("nothing went through: %+v, %d outputs recorded, %d latencies", st, rec.n, lat.n)
	}
}

// latencyCounter is a LatencyRecorder that counts.
type latencyCounter struct{ n, sumUs int64 }

func (c *latencyCounter) RecordValue(v int64) error { c.n++; c.sumUs += v; return nil }
