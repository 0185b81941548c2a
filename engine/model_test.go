package engine

import (
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

// model is the obviously-correct reference: unsorted slices of orders
// scanned linearly for the best price and the oldest order, Go maps for the
// dedup table. It shares only the codecs with the engine.
type model struct {
	cfg                          Config
	books                        [][2][]mOrder // [instrument][side-1]
	sessions                     map[uint64]*mSession
	nextOrderID, nextTradeID, md uint64
}

type mOrder struct {
	id, session, clOrd uint64
	price              int64
	qty                uint64
}

type mSession struct {
	hi      uint64
	out     uint64 // last output seq given to the session
	results map[uint64]Output
}

type mOut struct {
	to uint64
	o  Output
}

func newModel(cfg Config) *model {
	return &model{
		cfg: cfg, books: make([][2][]mOrder, cfg.MaxInstruments),
		sessions: map[uint64]*mSession{}, nextOrderID: 1, nextTradeID: 1,
	}
}

func (m *model) resting() int {
	n := 0
	for _, b := range m.books {
		n += len(b[0]) + len(b[1])
	}
	return n
}

// best returns the index of the best order on a side: best price, then
// lowest id (oldest).
func best(orders []mOrder, side Side) int {
	bi := -1
	for i, o := range orders {
		if bi < 0 {
			bi = i
			continue
		}
		b := orders[bi]
		better := (side == Buy && o.price > b.price) || (side == Sell && o.price < b.price)
		if better || (o.price == b.price && o.id < b.id) {
			bi = i
		}
	}
	return bi
}

func levelTotal(orders []mOrder, price int64) uint64 {
	var sum uint64
	for _, o := range orders {
		if o.price == price {
			sum += o.qty
		}
	}
	return sum
}

func other(s Side) Side { return 3 - s }

func (m *model) apply(cmd []byte) []mOut {
	if len(cmd) < 16 {
		return nil
	}
	session := binary.LittleEndian.Uint64(cmd)
	clOrd := binary.LittleEndian.Uint64(cmd[8:])
	if session == 0 {
		return nil
	}
	rej := func(r Reason) []mOut {
		return []mOut{{session, Output{Kind: KindReject, ClientOrderID: clOrd, Reason: r}}}
	}
	if clOrd == 0 {
		return rej(ReasonBadClientOrderID)
	}
	s := m.sessions[session]
	if s == nil {
		if len(m.sessions) == int(m.cfg.MaxSessions) {
			return rej(ReasonTooManySessions)
		}
		s = &mSession{results: map[uint64]Output{}}
		m.sessions[session] = s
	} else if clOrd <= s.hi {
		if s.hi-clOrd >= uint64(m.cfg.DedupWindow) {
			return rej(ReasonTooOld)
		}
		if r, ok := s.results[clOrd]; ok {
			r.Original, r.Kind = r.Kind, KindDuplicate
			return []mOut{{session, r}}
		}
	}
	outs := m.exec(session, clOrd, cmd[16:])
	// Every output to a session of an applied command is the next in that
	// session's history (the resting side's too).
	for i := range outs {
		if to := outs[i].to; to != 0 {
			rs := m.sessions[to]
			rs.out++
			outs[i].o.OutSeq = rs.out
		}
	}
	s.results[clOrd] = outs[0].o
	s.hi = max(s.hi, clOrd)
	return outs
}

func (m *model) exec(session, clOrd uint64, body []byte) []mOut {
	rej := func(r Reason) []mOut {
		return []mOut{{session, Output{Kind: KindReject, ClientOrderID: clOrd, Reason: r}}}
	}
	r, err := ParseRequest(body)
	if err != nil {
		return rej(ReasonBadCommand)
	}
	if r.Op == OpCancel {
		for inst := range m.books {
			for si := range 2 {
				side := Side(si + 1)
				orders := m.books[inst][si]
				for i, o := range orders {
					if o.id != r.OrderID || o.session != session {
						continue
					}
					m.books[inst][si] = append(orders[:i:i], orders[i+1:]...)
					m.md++
					return []mOut{
						{session, Output{Kind: KindCancelled, ClientOrderID: clOrd, OrderID: o.id, Instrument: uint32(inst), Side: side, Qty: o.qty, Reason: ReasonCancelRequested}},
						{0, Output{Kind: KindMarketData, MDSeq: m.md, MDKind: MDLevel, Instrument: uint32(inst), Side: side, Price: o.price, Qty: levelTotal(m.books[inst][si], o.price)}},
					}
				}
			}
		}
		return rej(ReasonUnknownOrder)
	}
	switch {
	case r.Instrument >= m.cfg.MaxInstruments:
		return rej(ReasonUnknownInstrument)
	case r.Side != Buy && r.Side != Sell:
		return rej(ReasonBadSide)
	case r.Type != Limit && r.Type != Market:
		return rej(ReasonBadOrderType)
	case r.Qty == 0 || r.Qty > m.cfg.MaxOrderQty:
		return rej(ReasonBadQty)
	}
	market := r.Type == Market
	if market {
		r.Price = 0
	}
	crosses := func(p int64) bool {
		return market || (r.Side == Buy && p <= r.Price) || (r.Side == Sell && p >= r.Price)
	}
	book := &m.books[r.Instrument]
	opp := &book[other(r.Side)-1]
	if !market && m.resting() == int(m.cfg.MaxOrders) {
		var avail uint64
		for _, o := range *opp {
			if crosses(o.price) {
				avail += o.qty
			}
		}
		if avail < r.Qty {
			return rej(ReasonBookFull)
		}
	}
	id := m.nextOrderID
	m.nextOrderID++
	outs := []mOut{{session, Output{Kind: KindAck, ClientOrderID: clOrd, OrderID: id, Instrument: r.Instrument, Side: r.Side, Type: r.Type, Price: r.Price, Qty: r.Qty}}}
	qty := r.Qty
	for qty > 0 {
		bi := best(*opp, other(r.Side))
		if bi < 0 || !crosses((*opp)[bi].price) {
			break
		}
		o := &(*opp)[bi]
		fill := min(qty, o.qty)
		qty -= fill
		o.qty -= fill
		t := m.nextTradeID
		m.nextTradeID++
		price := o.price
		outs = append(outs,
			mOut{session, Output{Kind: KindExecution, ClientOrderID: clOrd, OrderID: id, ContraOrderID: o.id, TradeID: t, Instrument: r.Instrument, Side: r.Side, Aggressor: true, Price: price, Qty: fill, LeavesQty: qty}},
			mOut{o.session, Output{Kind: KindExecution, ClientOrderID: o.clOrd, OrderID: o.id, ContraOrderID: id, TradeID: t, Instrument: r.Instrument, Side: other(r.Side), Price: price, Qty: fill, LeavesQty: o.qty}},
		)
		if o.qty == 0 {
			*opp = append((*opp)[:bi:bi], (*opp)[bi+1:]...)
		}
		m.md += 2
		outs = append(outs,
			mOut{0, Output{Kind: KindMarketData, MDSeq: m.md - 1, MDKind: MDTrade, Instrument: r.Instrument, Side: r.Side, Price: price, Qty: fill, TradeID: t}},
			mOut{0, Output{Kind: KindMarketData, MDSeq: m.md, MDKind: MDLevel, Instrument: r.Instrument, Side: other(r.Side), Price: price, Qty: levelTotal(*opp, price)}},
		)
	}
	if qty == 0 {
		return outs
	}
	if market {
		return append(outs, mOut{session, Output{Kind: KindCancelled, ClientOrderID: clOrd, OrderID: id, Instrument: r.Instrument, Side: r.Side, Qty: qty, Reason: ReasonMarketUnfilled}})
	}
	own := &book[r.Side-1]
	*own = append(*own, mOrder{id: id, session: session, clOrd: clOrd, price: r.Price, qty: qty})
	m.md++
	return append(outs, mOut{0, Output{Kind: KindMarketData, MDSeq: m.md, MDKind: MDLevel, Instrument: r.Instrument, Side: r.Side, Price: r.Price, Qty: levelTotal(*own, r.Price)}})
}

// gen draws command streams that hit every rule: a few sessions (one more
// than the table holds), mostly increasing client order ids with resends,
// stale and zero ids, prices around 100 so orders cross, cancels of live
// and dead ids, bad fields and garbage.
type gen struct {
	cfg   Config
	hi    map[uint64]uint64
	maxID uint64 // an upper bound on assigned order ids
}

func (g *gen) command(t *rapid.T) []byte {
	session := rapid.Uint64Range(1, uint64(g.cfg.MaxSessions)+1).Draw(t, "session")
	var clOrd uint64
	switch k := rapid.IntRange(0, 19).Draw(t, "idKind"); {
	case k < 14:
		clOrd = g.hi[session] + rapid.Uint64Range(1, 2).Draw(t, "step")
		g.hi[session] = clOrd
	case k < 19:
		back := rapid.Uint64Range(0, uint64(g.cfg.DedupWindow)+1).Draw(t, "back")
		if back < g.hi[session] {
			clOrd = g.hi[session] - back
		}
	}
	switch k := rapid.IntRange(0, 19).Draw(t, "cmdKind"); {
	case k < 13:
		r := Request{
			Op:         OpNewOrder,
			Instrument: rapid.Uint32Range(0, g.cfg.MaxInstruments).Draw(t, "inst"),
			Side:       Side(rapid.SampledFrom([]uint8{1, 1, 1, 2, 2, 2, 0, 3}).Draw(t, "side")),
			Type:       OrderType(rapid.SampledFrom([]uint8{1, 1, 1, 1, 1, 2, 2, 9}).Draw(t, "type")),
			Price:      rapid.Int64Range(95, 105).Draw(t, "price"),
			Qty:        rapid.SampledFrom([]uint64{1, 2, 3, 5, 8, 13, 0, g.cfg.MaxOrderQty, g.cfg.MaxOrderQty + 1}).Draw(t, "qty"),
		}
		g.maxID++
		return AppendRequest(nil, session, clOrd, &r)
	case k < 18:
		return cancelCmd(session, clOrd, rapid.Uint64Range(0, g.maxID+1).Draw(t, "orderID"))
	case k < 19:
		return AppendCommand(nil, session, clOrd, rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, "body"))
	default:
		return rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "raw")
	}
}

func drawConfig(t *rapid.T) Config {
	return Config{
		MaxInstruments: rapid.Uint32Range(1, 3).Draw(t, "instruments"),
		MaxOrders:      rapid.Uint32Range(1, 12).Draw(t, "orders"),
		MaxSessions:    rapid.Uint32Range(1, 3).Draw(t, "sessions"),
		DedupWindow:    rapid.SampledFrom([]uint32{1, 2, 4, 8}).Draw(t, "window"),
		MaxOrderQty:    rapid.SampledFrom([]uint64{8, 100}).Draw(t, "maxQty"),
	}
}

func drawStream(t *rapid.T, cfg Config, n int) [][]byte {
	g := &gen{cfg: cfg, hi: map[uint64]uint64{}}
	cmds := make([][]byte, n)
	for i := range cmds {
		cmds[i] = g.command(t)
	}
	return cmds
}

// TestEngineMatchesModel compares every output of every command with the
// reference model, checks structural invariants and the incremental hash
// after each command, and compares the final books.
func TestEngineMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		cmds := drawStream(t, cfg, rapid.IntRange(1, 150).Draw(t, "n"))
		e, _ := New(cfg)
		m := newModel(cfg)
		var rec recorder
		for i, c := range cmds {
			e.Apply(uint64(i+1), c, &rec)
			got := rec.take()
			want := m.apply(c)
			if len(got) != len(want) {
				t.Fatalf("cmd %d %x: %d outputs, model %d\n got %v\nwant %v", i, c, len(got), len(want), formatAll(t, got), want)
			}
			for j := range got {
				o, err := ParseOutput(got[j].payload)
				if err != nil || got[j].to != want[j].to || o != want[j].o {
					t.Fatalf("cmd %d output %d: got %s, model %s", i, j, format(got[j].to, o), format(want[j].to, want[j].o))
				}
			}
			if err := checkInvariants(e); err != nil {
				t.Fatalf("after cmd %d: %v", i, err)
			}
		}
		if e.RestingOrders() != m.resting() || e.Sessions() != len(m.sessions) || e.MDSeq() != m.md {
			t.Fatalf("counters differ")
		}
	})
}

// TestDeterminism: two engines fed the same stream emit the same bytes to
// the same addresses and agree on the hash after every command.
func TestDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		cmds := drawStream(t, cfg, 100)
		a, _ := New(cfg)
		b, _ := New(cfg)
		var ra, rb recorder
		for i, c := range cmds {
			a.Apply(uint64(i+1), c, &ra)
			b.Apply(uint64(i+1), c, &rb)
			if !equalOutputs(ra.take(), rb.take()) || a.StateHash() != b.StateHash() {
				t.Fatalf("diverged at cmd %d", i)
			}
		}
	})
}

func equalOutputs(a, b []emitted) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].to != b[i].to || string(a[i].payload) != string(b[i].payload) {
			return false
		}
	}
	return true
}
