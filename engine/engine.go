package engine

// nilIndex marks the end of an intrusive list.
const nilIndex int32 = -1

// order is a resting order in the preallocated pool. Within a level, orders
// form a FIFO list; since orders are never modified in place except by
// fills, FIFO order is also increasing order id.
type order struct {
	id, session, clOrdID uint64
	price                int64
	qty                  uint64 // remaining; > 0 while resting
	instrument           uint32
	side                 Side
	level                int32
	prev, next           int32  // FIFO neighbours; next also links the free list
	hash                 uint64 // orderHash as last added to Engine.hashSum
}

// level is one price level of one side of one book. A side is a doubly
// linked list of levels, best first. Finding a price walks from the best
// level: O(depth), which is what a simple reference engine affords (orders
// usually arrive near the top of the book).
type level struct {
	price         int64
	total         uint64
	head, tail    int32 // orders
	better, worse int32 // neighbouring levels; worse also links the free list
}

// book holds the best level of each side: [0] bids, [1] asks.
type book struct {
	best [2]int32
}

// Engine is a price-time-priority matching engine over several instruments
// and the dedup table of the sessions that trade on it. It implements
// StateMachine. It is not safe for concurrent use: the bus applies commands
// from one goroutine.
type Engine struct {
	cfg Config

	orders     []order
	orderFree  int32
	resting    int
	levels     []level
	levelFree  int32
	books      []book
	orderIndex index // order id -> orders slot

	sessionIndex index // session -> sessions slot
	sessions     []session
	entries      []entry // DedupWindow entries per session slot

	appliedSeq  uint64
	nextOrderID uint64
	nextTradeID uint64
	mdSeq       uint64
	// hashSum is the sum of the element hashes but the pending ones'
	// (hash.go): StateHash adds those first.
	hashSum  uint64
	pendings pendingHashes

	// Per-Apply context: the emitter and the session slot and client order
	// id whose result is recorded for dedup.
	out       Emitter
	curSlot   int32
	curClOrd  uint64
	curResult bool
	buf       [MaxOutputLen]byte
}

// New returns an empty engine with all its memory allocated.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:          cfg,
		orders:       make([]order, cfg.MaxOrders),
		levels:       make([]level, cfg.MaxOrders),
		books:        make([]book, cfg.MaxInstruments),
		orderIndex:   newIndex(int(cfg.MaxOrders)),
		sessionIndex: newIndex(int(cfg.MaxSessions)),
		sessions:     make([]session, 0, cfg.MaxSessions),
		pendings:     newPendingHashes(),
		entries:      make([]entry, int(cfg.MaxSessions)*int(cfg.DedupWindow)),
		nextOrderID:  1,
		nextTradeID:  1,
	}
	for i := range e.orders {
		e.orders[i].next = int32(i) + 1
	}
	e.orders[len(e.orders)-1].next = nilIndex
	for i := range e.levels {
		e.levels[i].worse = int32(i) + 1
	}
	e.levels[len(e.levels)-1].worse = nilIndex
	for i := range e.books {
		e.books[i].best = [2]int32{nilIndex, nilIndex}
	}
	return e, nil
}

// Config returns the engine's limits.
func (e *Engine) Config() Config { return e.cfg }

// AppliedSeq is the seq of the last applied command, 0 before any.
func (e *Engine) AppliedSeq() uint64 { return e.appliedSeq }

// RestingOrders is the number of orders resting over all books.
func (e *Engine) RestingOrders() int { return e.resting }

// Sessions is the number of sessions in the dedup table.
func (e *Engine) Sessions() int { return len(e.sessions) }

// MDSeq is the sequence number of the last market-data output.
func (e *Engine) MDSeq() uint64 { return e.mdSeq }

// StateHash is the incremental hash of the whole replicated state.
func (e *Engine) StateHash() uint64 {
	h := fold(tagState, e.sum())
	h = fold(h, e.appliedSeq)
	h = fold(h, e.nextOrderID)
	h = fold(h, e.nextTradeID)
	h = fold(h, e.mdSeq)
	return fold(h, e.cfg.digest())
}

// Level is one aggregated price level, for inspection.
type Level struct {
	Price  int64
	Qty    uint64
	Orders int
}

// Depth appends the levels of one side of one instrument to dst, best
// first, and returns it. It allocates only if dst is too small.
func (e *Engine) Depth(instrument uint32, side Side, dst []Level) []Level {
	if instrument >= e.cfg.MaxInstruments || !side.valid() {
		return dst
	}
	for li := e.books[instrument].best[side-1]; li != nilIndex; li = e.levels[li].worse {
		lv := &e.levels[li]
		n := 0
		for oi := lv.head; oi != nilIndex; oi = e.orders[oi].next {
			n++
		}
		dst = append(dst, Level{Price: lv.price, Qty: lv.total, Orders: n})
	}
	return dst
}

// Apply implements StateMachine. Outputs of one command, in order:
//
//	new order:  Ack (the result), then per fill: Execution to the aggressor,
//	            Execution to the resting owner, MDTrade, MDLevel (the resting
//	            level's new total); then either MDLevel for the rested
//	            remainder (limit) or Cancelled ReasonMarketUnfilled (market).
//	cancel:     Cancelled ReasonCancelRequested (the result), MDLevel.
//	otherwise:  one Reject (the result), or one Duplicate, or nothing for a
//	            command without a valid header.
//
// So one Apply emits at most 2 + 4*(resting orders it fills) outputs.
func (e *Engine) Apply(seq uint64, command []byte, out Emitter) {
	if seq <= e.appliedSeq {
		panic("engine: Apply: seq not above AppliedSeq")
	}
	e.appliedSeq = seq
	e.out = out
	e.apply(command)
	e.out = nil
	e.curResult = false
}

func (e *Engine) apply(command []byte) {
	var h CommandHeader
	if err := h.Parse(command); err != nil {
		// No valid session to address a reject to; the bus should refuse
		// such commands at ingress with ParseCommand.
		return
	}
	if h.ClientOrderID == 0 {
		e.emit(h.Session, &Output{Kind: KindReject, Reason: ReasonBadClientOrderID})
		return
	}
	slot, ok := e.lookupSession(h.Session, h.ClientOrderID)
	if !ok {
		return
	}
	e.curSlot, e.curClOrd, e.curResult = slot, h.ClientOrderID, true
	var req Request
	if err := req.Parse(h.Body); err != nil {
		e.reject(h.Session, h.ClientOrderID, ReasonBadCommand)
		return
	}
	switch req.Op {
	case OpNewOrder:
		e.newOrder(h.Session, h.ClientOrderID, &req)
	case OpCancel:
		e.cancel(h.Session, h.ClientOrderID, req.OrderID)
	}
}

// emit encodes o and hands it to the emitter. A market-data output takes
// the next MDSeq even when outputs are discarded: the sequence is state.
func (e *Engine) emit(to uint64, o *Output) {
	if o.Kind == KindMarketData {
		e.mdSeq++
		o.MDSeq = e.mdSeq
	}
	if e.out == nil {
		return
	}
	e.out.Emit(to, AppendOutput(e.buf[:0], o))
}

// nextOutSeq assigns the next output sequence number of the session in
// slot: part of the session's dedup row, so it is replicated, snapshotted
// and hashed with it.
func (e *Engine) nextOutSeq(slot int32) uint64 {
	e.sessionChanged(slot)
	s := &e.sessions[slot]
	s.outSeq++
	return s.outSeq
}

// emitSession numbers o in the history of the session in slot and emits it.
func (e *Engine) emitSession(slot int32, to uint64, o *Output) {
	o.OutSeq = e.nextOutSeq(slot)
	e.emit(to, o)
}

// SessionOutSeq is the output sequence number of the last output to
// session (0 before any, or for a session not in the dedup table).
func (e *Engine) SessionOutSeq(session uint64) uint64 {
	slot, ok := e.sessionIndex.get(session)
	if !ok {
		return 0
	}
	return e.sessions[slot].outSeq
}

// result emits the command's result (Ack, Reject or Cancelled) and records
// it for dedup. Exactly one result is recorded per applied command.
func (e *Engine) result(to uint64, o *Output) {
	if !e.curResult {
		panic("engine: second result for one command")
	}
	o.OutSeq = e.nextOutSeq(e.curSlot)
	b := AppendOutput(e.buf[:0], o)
	e.curResult = false
	e.record(e.curSlot, e.curClOrd, b)
	if e.out != nil {
		e.out.Emit(to, b)
	}
}

func (e *Engine) reject(session, clOrdID uint64, reason Reason) {
	e.result(session, &Output{Kind: KindReject, ClientOrderID: clOrdID, Reason: reason})
}

func (e *Engine) newOrder(session, clOrdID uint64, r *Request) {
	switch {
	case r.Instrument >= e.cfg.MaxInstruments:
		e.reject(session, clOrdID, ReasonUnknownInstrument)
		return
	case !r.Side.valid():
		e.reject(session, clOrdID, ReasonBadSide)
		return
	case !r.Type.valid():
		e.reject(session, clOrdID, ReasonBadOrderType)
		return
	case r.Qty == 0 || r.Qty > e.cfg.MaxOrderQty:
		e.reject(session, clOrdID, ReasonBadQty)
		return
	}
	price := r.Price
	if r.Type == Market {
		price = 0
	}
	b := &e.books[r.Instrument]
	// Reject before anything trades, so a rejected order has no effect.
	if r.Type == Limit && e.orderFree == nilIndex && e.crossable(b, r.Side, price, r.Qty) < r.Qty {
		e.reject(session, clOrdID, ReasonBookFull)
		return
	}
	id := e.nextOrderID
	e.nextOrderID++
	e.result(session, &Output{
		Kind: KindAck, ClientOrderID: clOrdID, OrderID: id, Instrument: r.Instrument,
		Side: r.Side, Type: r.Type, Price: price, Qty: r.Qty,
	})
	remaining := e.match(b, session, clOrdID, id, r.Instrument, r.Side, r.Type, price, r.Qty)
	if remaining == 0 {
		return
	}
	if r.Type == Market {
		e.emitSession(e.curSlot, session, &Output{
			Kind: KindCancelled, ClientOrderID: clOrdID, OrderID: id, Instrument: r.Instrument,
			Side: r.Side, Qty: remaining, Reason: ReasonMarketUnfilled,
		})
		return
	}
	total := e.rest(b, &order{
		id: id, session: session, clOrdID: clOrdID, price: price, qty: remaining,
		instrument: r.Instrument, side: r.Side,
	})
	e.emit(MarketData, &Output{
		Kind: KindMarketData, MDKind: MDLevel, Instrument: r.Instrument,
		Side: r.Side, Price: price, Qty: total,
	})
}

// crosses reports whether an incoming order on side at limit price (any
// price for market orders) trades with a resting level at levelPrice.
func crosses(side Side, typ OrderType, price, levelPrice int64) bool {
	if typ == Market {
		return true
	}
	if side == Buy {
		return levelPrice <= price
	}
	return levelPrice >= price
}

// opposite is the book side index an order on side trades against.
func opposite(side Side) int { return 2 - int(side) }

// crossable sums the opposite quantity an incoming limit order could trade
// with, stopping once it reaches qty.
func (e *Engine) crossable(b *book, side Side, price int64, qty uint64) uint64 {
	var sum uint64
	for li := b.best[opposite(side)]; li != nilIndex && sum < qty; li = e.levels[li].worse {
		if !crosses(side, Limit, price, e.levels[li].price) {
			break
		}
		sum += e.levels[li].total
	}
	return sum
}

// match fills the incoming order against the opposite side, best level
// first and oldest order first within a level, at the resting price. It
// returns the unfilled quantity.
func (e *Engine) match(b *book, session, clOrdID, id uint64, instrument uint32, side Side, typ OrderType, price int64, qty uint64) uint64 {
	opp := opposite(side)
	for qty > 0 {
		li := b.best[opp]
		if li == nilIndex || !crosses(side, typ, price, e.levels[li].price) {
			break
		}
		lv := &e.levels[li]
		oi := lv.head
		o := &e.orders[oi]
		fill := min(qty, o.qty)
		qty -= fill
		e.hashSum -= o.hash
		o.qty -= fill
		lv.total -= fill
		if o.qty > 0 {
			o.hash = orderHash(o)
			e.hashSum += o.hash
		}
		tradeID := e.nextTradeID
		e.nextTradeID++
		e.emitSession(e.curSlot, session, &Output{
			Kind: KindExecution, ClientOrderID: clOrdID, OrderID: id, ContraOrderID: o.id,
			TradeID: tradeID, Instrument: instrument, Side: side, Aggressor: true,
			Price: lv.price, Qty: fill, LeavesQty: qty,
		})
		// A resting order's owner applied a command before, so it has a row.
		ownerSlot, _ := e.sessionIndex.get(o.session)
		e.emitSession(ownerSlot, o.session, &Output{
			Kind: KindExecution, ClientOrderID: o.clOrdID, OrderID: o.id, ContraOrderID: id,
			TradeID: tradeID, Instrument: instrument, Side: o.side,
			Price: lv.price, Qty: fill, LeavesQty: o.qty,
		})
		e.emit(MarketData, &Output{
			Kind: KindMarketData, MDKind: MDTrade, Instrument: instrument, Side: side,
			Price: lv.price, Qty: fill, TradeID: tradeID,
		})
		levelPrice, levelTotal, restingSide := lv.price, lv.total, o.side
		if o.qty == 0 {
			e.unlink(b, oi)
		}
		e.emit(MarketData, &Output{
			Kind: KindMarketData, MDKind: MDLevel, Instrument: instrument, Side: restingSide,
			Price: levelPrice, Qty: levelTotal,
		})
	}
	return qty
}

// cancel removes a resting order of session.
func (e *Engine) cancel(session, clOrdID, orderID uint64) {
	oi, ok := e.orderIndex.get(orderID)
	if !ok || e.orders[oi].session != session {
		e.reject(session, clOrdID, ReasonUnknownOrder)
		return
	}
	o := &e.orders[oi]
	lv := &e.levels[o.level]
	e.result(session, &Output{
		Kind: KindCancelled, ClientOrderID: clOrdID, OrderID: o.id, Instrument: o.instrument,
		Side: o.side, Qty: o.qty, Reason: ReasonCancelRequested,
	})
	e.hashSum -= o.hash
	lv.total -= o.qty
	md := Output{
		Kind: KindMarketData, MDKind: MDLevel, Instrument: o.instrument, Side: o.side,
		Price: lv.price, Qty: lv.total,
	}
	e.unlink(&e.books[o.instrument], oi)
	e.emit(MarketData, &md)
}

// rest adds a copy of o at the tail of its price level, creating the level
// if needed, and returns the level's new total. A free slot must exist.
func (e *Engine) rest(b *book, o *order) uint64 {
	oi := e.orderFree
	if oi == nilIndex {
		panic("engine: rest with no free order slot")
	}
	e.orderFree = e.orders[oi].next
	e.resting++
	li := e.levelFor(b, o.side, o.price)
	lv := &e.levels[li]
	n := &e.orders[oi]
	*n = *o
	n.level, n.prev, n.next = li, lv.tail, nilIndex
	if lv.tail != nilIndex {
		e.orders[lv.tail].next = oi
	} else {
		lv.head = oi
	}
	lv.tail = oi
	lv.total += n.qty
	e.orderIndex.put(n.id, oi)
	n.hash = orderHash(n)
	e.hashSum += n.hash
	return lv.total
}

// levelFor finds the level at price on side, or links a new one in price
// order.
func (e *Engine) levelFor(b *book, side Side, price int64) int32 {
	s := int(side) - 1
	prev, cur := nilIndex, b.best[s]
	for cur != nilIndex {
		p := e.levels[cur].price
		if p == price {
			return cur
		}
		if (side == Buy && p < price) || (side == Sell && p > price) {
			break
		}
		prev, cur = cur, e.levels[cur].worse
	}
	li := e.levelFree
	if li == nilIndex {
		// Levels never outnumber orders and both pools hold MaxOrders.
		panic("engine: level pool exhausted")
	}
	e.levelFree = e.levels[li].worse
	e.levels[li] = level{price: price, head: nilIndex, tail: nilIndex, better: prev, worse: cur}
	if prev != nilIndex {
		e.levels[prev].worse = li
	} else {
		b.best[s] = li
	}
	if cur != nilIndex {
		e.levels[cur].better = li
	}
	return li
}

// unlink removes the order in slot oi from its level (freeing the level if
// it empties), the order index and the pool. Hash and level totals are the
// caller's business.
func (e *Engine) unlink(b *book, oi int32) {
	o := &e.orders[oi]
	li := o.level
	lv := &e.levels[li]
	if o.prev != nilIndex {
		e.orders[o.prev].next = o.next
	} else {
		lv.head = o.next
	}
	if o.next != nilIndex {
		e.orders[o.next].prev = o.prev
	} else {
		lv.tail = o.prev
	}
	e.orderIndex.del(o.id)
	side := o.side
	*o = order{next: e.orderFree}
	e.orderFree = oi
	e.resting--
	if lv.head != nilIndex {
		return
	}
	s := int(side) - 1
	if lv.better != nilIndex {
		e.levels[lv.better].worse = lv.worse
	} else {
		b.best[s] = lv.worse
	}
	if lv.worse != nilIndex {
		e.levels[lv.worse].better = lv.better
	}
	*lv = level{worse: e.levelFree}
	e.levelFree = li
}
