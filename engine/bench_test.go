package engine

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// benchStream is a deterministic mix on one hot instrument and a few cold
// ones: limit orders near the touch (about a third cross), ~6% market
// orders, and a cancel of every order 1..4000 commands after it (of an
// already filled order, that is a reject), so the book holds a steady
// ~1000 orders and is empty at the end of each pass. Client order ids are
// rewritten on each pass so that every command is new to the dedup table;
// cancels are rewritten to the id the engine gave their order.
type benchStream struct {
	cmds     [][]byte
	sessions []uint64
	nextID   []uint64
	cancelOf []uint64 // for cancels: the generated order number; 0 otherwise
	orders   uint64   // new orders per pass
	pos      int      // commands handed out so far
}

const benchSessions = 64

type benchEvent struct {
	at       int
	cmd      []byte
	session  uint64
	cancelOf uint64
}

func newBenchStream(orders int) *benchStream {
	rng := rand.New(rand.NewPCG(1, 2))
	s := &benchStream{nextID: make([]uint64, benchSessions+1), orders: uint64(orders)}
	var events []benchEvent
	for i := range orders {
		session := 1 + rng.Uint64N(benchSessions)
		inst := uint32(0)
		if rng.IntN(4) == 0 {
			inst = 1 + uint32(rng.IntN(7))
		}
		var c []byte
		if rng.IntN(100) < 94 {
			side, price := Buy, int64(1000-rng.IntN(12)+3)
			if rng.IntN(2) == 0 {
				side, price = Sell, int64(1000+rng.IntN(12)-3)
			}
			c = limitCmd(session, 0, inst, side, price, 1+rng.Uint64N(20))
		} else {
			c = marketCmd(session, 0, inst, Side(1+rng.IntN(2)), 1+rng.Uint64N(10))
		}
		events = append(events,
			benchEvent{at: i, cmd: c, session: session},
			benchEvent{at: i + 1 + rng.IntN(4000), cmd: cancelCmd(session, 0, 0), session: session, cancelOf: uint64(i + 1)})
	}
	slices.SortStableFunc(events, func(a, b benchEvent) int { return a.at - b.at })
	for _, ev := range events {
		s.cmds = append(s.cmds, ev.cmd)
		s.sessions = append(s.sessions, ev.session)
		s.cancelOf = append(s.cancelOf, ev.cancelOf)
	}
	return s
}

// next returns the next command (cycling) with a fresh client order id and, for a
// cancel, the id the engine gave its order (assuming no new order was
// rejected, which holds while the book has room).
func (s *benchStream) next() []byte {
	i := s.pos
	s.pos++
	j := i % len(s.cmds)
	sess := s.sessions[j]
	s.nextID[sess]++
	c := s.cmds[j]
	binary.LittleEndian.PutUint64(c[8:], s.nextID[sess])
	if n := s.cancelOf[j]; n != 0 {
		pass := uint64(i / len(s.cmds))
		binary.LittleEndian.PutUint64(c[CommandHeaderLen+1:], pass*s.orders+n)
	}
	return c
}

// copyEmitter copies payloads into a preallocated ring, as a gate would.
type copyEmitter struct {
	buf [256][MaxOutputLen]byte
	n   int
}

func (c *copyEmitter) Emit(_ uint64, p []byte) {
	copy(c.buf[c.n%len(c.buf)][:], p)
	c.n++
}

func BenchmarkApply(b *testing.B) {
	e := mustNew(b, DefaultConfig())
	s := newBenchStream(1 << 16)
	var out copyEmitter
	seq := uint64(0)
	for range 1 << 16 { // warm up to a steady-state book
		seq++
		e.Apply(seq, s.next(), &out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq++
		e.Apply(seq, s.next(), &out)
	}
	b.StopTimer()
	b.ReportMetric(float64(out.n)/float64(b.N+1<<16), "outputs/op")
	b.ReportMetric(float64(e.RestingOrders()), "resting")
}

// BenchmarkApplyOpaque is one session's stream of commands with no op
// the engine knows (`seqbus bench throughput --sizes 32`): each is
// rejected and recorded, so its cost is the dedup table's and the state
// hash's (its entry, and its session's highest id and output seq), with
// no book in the way.
func BenchmarkApplyOpaque(b *testing.B) {
	e := mustNew(b, DefaultConfig())
	cmd := make([]byte, 32)
	binary.LittleEndian.PutUint64(cmd, 1)
	cmd[CommandHeaderLen] = 0xEE
	var out copyEmitter
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		binary.LittleEndian.PutUint64(cmd[8:], uint64(i+1))
		e.Apply(uint64(i+1), cmd, &out)
	}
}

func BenchmarkApplyDuplicate(b *testing.B) {
	e := mustNew(b, DefaultConfig())
	cmd := limitCmd(1, 1, 0, Buy, 100, 1)
	e.Apply(1, cmd, nil)
	var out copyEmitter
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		e.Apply(uint64(i+2), cmd, &out)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	e := mustNew(b, DefaultConfig())
	s := newBenchStream(1 << 16)
	for i := range 1 << 16 {
		e.Apply(uint64(i+1), s.next(), nil)
	}
	var w countWriter
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := e.Snapshot(&w); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.n)/float64(b.N), "bytes/op")
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestApplyZeroAllocs asserts the hot path's allocation budget: none, with
// a copying emitter and with a nil one, including duplicates and rejects.
func TestApplyZeroAllocs(t *testing.T) {
	e := mustNew(t, DefaultConfig())
	s := newBenchStream(1 << 12)
	var out copyEmitter
	seq := uint64(0)
	for range 1 << 12 {
		seq++
		e.Apply(seq, s.next(), &out)
	}
	allocs := testing.AllocsPerRun(2000, func() {
		seq++
		e.Apply(seq, s.next(), &out)
		seq++
		e.Apply(seq, s.next(), nil)
		seq++
		e.Apply(seq, s.cmds[(s.pos-1)%len(s.cmds)], &out) // resend: a duplicate
	})
	if allocs != 0 {
		t.Errorf("Apply allocates %v times per run", allocs)
	}
	if e.RestingOrders() == 0 || out.n == 0 {
		t.Errorf("benchmark stream is degenerate: resting %d outputs %d", e.RestingOrders(), out.n)
	}
}
