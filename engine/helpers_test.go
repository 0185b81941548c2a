package engine

import (
	"bytes"
	"fmt"
	"testing"
)

// emitted is one output as the bus would see it.
type emitted struct {
	to      uint64
	payload []byte
}

// recorder is an Emitter that keeps copies of everything.
type recorder struct{ outs []emitted }

func (r *recorder) Emit(to uint64, payload []byte) {
	r.outs = append(r.outs, emitted{to, bytes.Clone(payload)})
}

func (r *recorder) take() []emitted {
	outs := r.outs
	r.outs = nil
	return outs
}

// discard is an Emitter that drops everything without allocating.
type discard struct{ n int }

func (d *discard) Emit(uint64, []byte) { d.n++ }

func limitCmd(session, clOrd uint64, inst uint32, side Side, price int64, qty uint64) []byte {
	return AppendRequest(nil, session, clOrd, &Request{Op: OpNewOrder, Instrument: inst, Side: side, Type: Limit, Price: price, Qty: qty})
}

func marketCmd(session, clOrd uint64, inst uint32, side Side, qty uint64) []byte {
	return AppendRequest(nil, session, clOrd, &Request{Op: OpNewOrder, Instrument: inst, Side: side, Type: Market, Qty: qty})
}

func cancelCmd(session, clOrd, orderID uint64) []byte {
	return AppendRequest(nil, session, clOrd, &Request{Op: OpCancel, OrderID: orderID})
}

func newCmd(session, clOrd uint64, r Request) []byte {
	return AppendRequest(nil, session, clOrd, &r)
}

func testConfig() Config {
	return Config{MaxInstruments: 2, MaxOrders: 4, MaxSessions: 3, DedupWindow: 4, MaxOrderQty: 1000}
}

func mustNew(tb testing.TB, cfg Config) *Engine {
	tb.Helper()
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

var reasonNames = map[Reason]string{
	ReasonBadCommand: "bad-command", ReasonBadClientOrderID: "bad-clordid",
	ReasonUnknownInstrument: "unknown-instrument", ReasonBadSide: "bad-side",
	ReasonBadOrderType: "bad-type", ReasonBadQty: "bad-qty", ReasonBookFull: "book-full",
	ReasonUnknownOrder: "unknown-order", ReasonTooOld: "too-old",
	ReasonTooManySessions: "too-many-sessions", ReasonCancelRequested: "requested",
	ReasonMarketUnfilled: "market-unfilled",
}

func sideName(s Side) string {
	switch s {
	case Buy:
		return "B"
	case Sell:
		return "S"
	}
	return "?"
}

// format renders an output compactly for table tests.
func format(to uint64, o Output) string {
	switch o.Kind {
	case KindDuplicate:
		inner := o
		inner.Kind = o.Original
		return fmt.Sprintf("s%d dup[%s]", to, format(to, inner)[len(fmt.Sprint(to))+2:])
	case KindAck:
		typ := "L"
		if o.Type == Market {
			typ = "M"
		}
		return fmt.Sprintf("s%d ack c%d o%d i%d %s %s %dx%d", to, o.ClientOrderID, o.OrderID, o.Instrument, sideName(o.Side), typ, o.Price, o.Qty)
	case KindReject:
		return fmt.Sprintf("s%d reject c%d %s", to, o.ClientOrderID, reasonNames[o.Reason])
	case KindExecution:
		role := "pas"
		if o.Aggressor {
			role = "agg"
		}
		return fmt.Sprintf("s%d exec c%d o%d/o%d t%d i%d %s %dx%d leaves %d %s", to, o.ClientOrderID, o.OrderID, o.ContraOrderID, o.TradeID, o.Instrument, sideName(o.Side), o.Price, o.Qty, o.LeavesQty, role)
	case KindCancelled:
		return fmt.Sprintf("s%d cancelled c%d o%d i%d %s %d %s", to, o.ClientOrderID, o.OrderID, o.Instrument, sideName(o.Side), o.Qty, reasonNames[o.Reason])
	case KindMarketData:
		if to != MarketData {
			return fmt.Sprintf("BAD md to s%d", to)
		}
		if o.MDKind == MDTrade {
			return fmt.Sprintf("md%d trade i%d %s %dx%d t%d", o.MDSeq, o.Instrument, sideName(o.Side), o.Price, o.Qty, o.TradeID)
		}
		return fmt.Sprintf("md%d level i%d %s %dx%d", o.MDSeq, o.Instrument, sideName(o.Side), o.Price, o.Qty)
	}
	return "?"
}

// fataler is what formatAll needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func formatAll(tb fataler, outs []emitted) []string {
	tb.Helper()
	var s []string
	for _, x := range outs {
		o, err := ParseOutput(x.payload)
		if err != nil {
			tb.Fatalf("engine emitted an unparsable output %x: %v", x.payload, err)
		}
		s = append(s, format(x.to, o))
	}
	return s
}

// checkInvariants walks the whole engine and reports the first broken
// structural invariant, including the incremental hash.
func checkInvariants(e *Engine) error {
	count := 0
	for i := range e.books {
		for side := 0; side < 2; side++ {
			prev := nilIndex
			for li := e.books[i].best[side]; li != nilIndex; li = e.levels[li].worse {
				lv := &e.levels[li]
				if lv.better != prev {
					return fmt.Errorf("i%d side %d: level back link", i, side)
				}
				if prev != nilIndex {
					p, q := e.levels[prev].price, lv.price
					if (side == 0 && p <= q) || (side == 1 && p >= q) {
						return fmt.Errorf("i%d side %d: levels out of order %d %d", i, side, p, q)
					}
				}
				var sum uint64
				var lastID uint64
				po := nilIndex
				if lv.head == nilIndex {
					return fmt.Errorf("empty level")
				}
				for oi := lv.head; oi != nilIndex; oi = e.orders[oi].next {
					o := &e.orders[oi]
					if o.prev != po || o.level != li || o.price != lv.price || int(o.side) != side+1 || o.instrument != uint32(i) || o.qty == 0 || o.id <= lastID {
						return fmt.Errorf("order %d inconsistent", o.id)
					}
					if got, ok := e.orderIndex.get(o.id); !ok || got != oi {
						return fmt.Errorf("order %d not indexed", o.id)
					}
					lastID = o.id
					sum += o.qty
					po = oi
					count++
				}
				if lv.tail != po || lv.total != sum {
					return fmt.Errorf("level %d total %d != %d", lv.price, lv.total, sum)
				}
				prev = li
			}
		}
		bid, ask := e.books[i].best[0], e.books[i].best[1]
		if bid != nilIndex && ask != nilIndex && e.levels[bid].price >= e.levels[ask].price {
			return fmt.Errorf("i%d crossed", i)
		}
	}
	if count != e.resting || e.orderIndex.live != count {
		return fmt.Errorf("resting %d, counted %d, indexed %d", e.resting, count, e.orderIndex.live)
	}
	if e.recomputeHash() != e.sum() {
		return fmt.Errorf("incremental hash differs from recomputed hash")
	}
	return nil
}
