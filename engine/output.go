package engine

import "encoding/binary"

// OutputKind is the first byte of every output payload.
type OutputKind uint8

// Output kinds.
const (
	// KindAck: a new order was accepted and assigned OrderID. It is the
	// result of a new order, sent to its session before any of its fills.
	KindAck OutputKind = 1
	// KindReject: a command was refused (Reason); nothing else happened.
	KindReject OutputKind = 2
	// KindExecution: a fill. Both sides' sessions get one, each describing
	// its own order (aggressor first).
	KindExecution OutputKind = 3
	// KindCancelled: an order's remaining quantity was removed, at its
	// owner's request (then it is the result of the cancel command) or
	// because a market order could not fill completely.
	KindCancelled OutputKind = 4
	// KindMarketData: a trade or a book level update on the public stream,
	// numbered by MDSeq, which is replicated state and so continues across
	// failover.
	KindMarketData OutputKind = 5
	// KindDuplicate: a resend of an already-applied (session, client order
	// id). The payload is this byte followed by the exact payload of the
	// original result (an Ack, Reject or Cancelled); nothing is re-applied.
	KindDuplicate OutputKind = 6
)

// Reason says why a command was rejected or an order cancelled.
type Reason uint8

// Reasons. Reject reasons come first, then cancel reasons.
const (
	ReasonNone Reason = 0
	// ReasonBadCommand: the body is not a well-formed Request.
	ReasonBadCommand Reason = 1
	// ReasonBadClientOrderID: client order id 0 (ids start at 1). Not
	// recorded for dedup.
	ReasonBadClientOrderID Reason = 2
	// ReasonUnknownInstrument: instrument >= Config.MaxInstruments.
	ReasonUnknownInstrument Reason = 3
	// ReasonBadSide: side is neither Buy nor Sell.
	ReasonBadSide Reason = 4
	// ReasonBadOrderType: type is neither Limit nor Market.
	ReasonBadOrderType Reason = 5
	// ReasonBadQty: qty is 0 or above Config.MaxOrderQty.
	ReasonBadQty Reason = 6
	// ReasonBookFull: a limit order would rest but Config.MaxOrders orders
	// already rest. The check is made before matching, so nothing trades.
	ReasonBookFull Reason = 7
	// ReasonUnknownOrder: a cancel names no resting order of this session.
	// An order of another session is reported the same way, so that a
	// session cannot probe another's orders.
	ReasonUnknownOrder Reason = 8
	// ReasonTooOld: the client order id is older than the session's dedup
	// window, so the engine cannot tell whether it was applied; it is not
	// applied. Not recorded for dedup.
	ReasonTooOld Reason = 9
	// ReasonTooManySessions: the dedup table already holds
	// Config.MaxSessions sessions. Not recorded for dedup.
	ReasonTooManySessions Reason = 10
	// ReasonCancelRequested: Cancelled at the owner's request.
	ReasonCancelRequested Reason = 11
	// ReasonMarketUnfilled: Cancelled remainder of a market order.
	ReasonMarketUnfilled Reason = 12
)

func (r Reason) isReject() bool { return r >= ReasonBadCommand && r <= ReasonTooManySessions }
func (r Reason) isCancel() bool { return r == ReasonCancelRequested || r == ReasonMarketUnfilled }

// MDKind is the kind of a market-data output.
type MDKind uint8

// Market-data kinds.
const (
	// MDTrade: a trade of Qty at Price; Side is the aggressor's side.
	MDTrade MDKind = 1
	// MDLevel: the level Side/Price now holds Qty in total (0: it is gone).
	MDLevel MDKind = 2
)

// Output is a decoded output payload. One flat struct (rather than a type
// per kind) keeps decoding allocation-free; each field says which kinds
// use it, the others are zero.
type Output struct {
	Kind OutputKind
	// Original is, for KindDuplicate, the kind of the original result; the
	// other fields then describe that original.
	Original OutputKind
	// ClientOrderID: Ack, Reject, Cancelled (the command that caused it),
	// Execution (the recipient's order).
	ClientOrderID uint64
	// OrderID: Ack, Cancelled, Execution (the recipient's order).
	OrderID uint64
	// ContraOrderID: Execution (the other side's order).
	ContraOrderID uint64
	// TradeID: Execution, MarketData trades; both executions of one fill
	// and its MDTrade share it.
	TradeID uint64
	// Instrument: Ack, Cancelled, Execution, MarketData.
	Instrument uint32
	// Side: Ack, Cancelled, Execution (the recipient's), MarketData.
	Side Side
	// Type: Ack.
	Type OrderType
	// Aggressor: Execution, whether the recipient's order was the incoming
	// one.
	Aggressor bool
	// Price: Ack (0 for market orders), Execution (the resting order's
	// price), MarketData.
	Price int64
	// Qty: Ack (order qty), Execution (fill qty), Cancelled (qty removed),
	// MarketData (trade qty or level total).
	Qty uint64
	// LeavesQty: Execution, the recipient's remaining qty after the fill.
	LeavesQty uint64
	// Reason: Reject, Cancelled.
	Reason Reason
	// MDSeq, MDKind: MarketData.
	MDSeq  uint64
	MDKind MDKind
	// OutSeq: Ack, Reject, Execution, Cancelled (and a Duplicate, which
	// carries its original's): the recipient session's output sequence
	// number, 1, 2, 3, ... per session, assigned by the engine (replicated
	// state), so a client sees a gap and asks for a replay. 0 marks an
	// answer that is not part of the session's history: a reject the dedup
	// table answers without recording it (BadClientOrderID, TooOld,
	// TooManySessions), which Apply and Answer emit alike.
	OutSeq uint64
}

// Output layouts (little endian), after the kind byte (outSeq first in
// every session output, so SessionOutSeq reads it without parsing):
//
//	Ack:        outSeq u64, clOrdID u64, orderID u64, instrument u32, side u8, type u8, price i64, qty u64
//	Reject:     outSeq u64, clOrdID u64, reason u8
//	Execution:  outSeq u64, clOrdID u64, orderID u64, contra u64, tradeID u64, instrument u32,
//	            side u8, aggressor u8, price i64, qty u64, leaves u64
//	Cancelled:  outSeq u64, clOrdID u64, orderID u64, instrument u32, side u8, qty u64, reason u8
//	MarketData: mdSeq u64, mdKind u8, instrument u32, side u8, price i64, qty u64, tradeID u64
//	Duplicate:  the whole original Ack, Reject or Cancelled payload, kind byte included
const (
	ackLen        = 1 + 8 + 8 + 8 + 4 + 1 + 1 + 8 + 8
	rejectLen     = 1 + 8 + 8 + 1
	executionLen  = 1 + 8 + 8 + 8 + 8 + 8 + 4 + 1 + 1 + 8 + 8 + 8
	cancelledLen  = 1 + 8 + 8 + 8 + 4 + 1 + 8 + 1
	marketDataLen = 1 + 8 + 1 + 4 + 1 + 8 + 8 + 8
	// maxResultLen is the longest result (Ack, Reject, Cancelled) the dedup
	// table stores.
	maxResultLen = ackLen
	// MaxOutputLen is the longest payload Apply emits; an Emitter may size
	// its buffers by it.
	MaxOutputLen = executionLen
)

// AppendOutput appends the encoding of o to dst. It panics on an unknown
// kind (or a Duplicate whose Original is not a result kind): that is a bug
// in the caller. Enumerated fields are written as they are; ParseOutput is
// the one that validates.
func AppendOutput(dst []byte, o *Output) []byte {
	kind := o.Kind
	if kind == KindDuplicate {
		dst = append(dst, byte(KindDuplicate))
		kind = o.Original
		if kind != KindAck && kind != KindReject && kind != KindCancelled {
			panic("engine: AppendOutput: duplicate of a non-result kind")
		}
	}
	le := binary.LittleEndian
	dst = append(dst, byte(kind))
	if kind != KindMarketData {
		dst = le.AppendUint64(dst, o.OutSeq)
	}
	switch kind {
	case KindAck:
		dst = le.AppendUint64(dst, o.ClientOrderID)
		dst = le.AppendUint64(dst, o.OrderID)
		dst = le.AppendUint32(dst, o.Instrument)
		dst = append(dst, byte(o.Side), byte(o.Type))
		dst = le.AppendUint64(dst, uint64(o.Price))
		dst = le.AppendUint64(dst, o.Qty)
	case KindReject:
		dst = le.AppendUint64(dst, o.ClientOrderID)
		dst = append(dst, byte(o.Reason))
	case KindExecution:
		dst = le.AppendUint64(dst, o.ClientOrderID)
		dst = le.AppendUint64(dst, o.OrderID)
		dst = le.AppendUint64(dst, o.ContraOrderID)
		dst = le.AppendUint64(dst, o.TradeID)
		dst = le.AppendUint32(dst, o.Instrument)
		dst = append(dst, byte(o.Side), boolByte(o.Aggressor))
		dst = le.AppendUint64(dst, uint64(o.Price))
		dst = le.AppendUint64(dst, o.Qty)
		dst = le.AppendUint64(dst, o.LeavesQty)
	case KindCancelled:
		dst = le.AppendUint64(dst, o.ClientOrderID)
		dst = le.AppendUint64(dst, o.OrderID)
		dst = le.AppendUint32(dst, o.Instrument)
		dst = append(dst, byte(o.Side))
		dst = le.AppendUint64(dst, o.Qty)
		dst = append(dst, byte(o.Reason))
	case KindMarketData:
		dst = le.AppendUint64(dst, o.MDSeq)
		dst = append(dst, byte(o.MDKind))
		dst = le.AppendUint32(dst, o.Instrument)
		dst = append(dst, byte(o.Side))
		dst = le.AppendUint64(dst, uint64(o.Price))
		dst = le.AppendUint64(dst, o.Qty)
		dst = le.AppendUint64(dst, o.TradeID)
	default:
		panic("engine: AppendOutput: unknown kind")
	}
	return dst
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ParseOutput decodes one output payload. Every kind has one exact length
// and every enumerated field is range-checked, so a payload that parses
// re-encodes (AppendOutput) to the same bytes. It never allocates. A
// per-output path uses Output.Parse instead (same result, no copy).
func ParseOutput(b []byte) (Output, error) {
	var o Output
	if err := o.Parse(b); err != nil {
		return Output{}, err
	}
	return o, nil
}

// Parse decodes one output payload into o, as ParseOutput does; on an
// error o holds nothing of use. It is the form for a per-output path:
// an Output and an error returned by value were built on the stack and
// copied out (CommandHeader.Parse has the measurement).
func (o *Output) Parse(b []byte) error {
	if len(b) < 1 {
		return ErrTruncated
	}
	if OutputKind(b[0]) == KindDuplicate {
		if err := o.parseOne(b[1:]); err != nil {
			return err
		}
		if o.Kind != KindAck && o.Kind != KindReject && o.Kind != KindCancelled {
			return ErrUnknownKind
		}
		o.Original, o.Kind = o.Kind, KindDuplicate
		return nil
	}
	return o.parseOne(b)
}

func outputLen(k OutputKind) int {
	switch k {
	case KindAck:
		return ackLen
	case KindReject:
		return rejectLen
	case KindExecution:
		return executionLen
	case KindCancelled:
		return cancelledLen
	case KindMarketData:
		return marketDataLen
	}
	return 0
}

func (o *Output) parseOne(b []byte) error {
	if len(b) < 1 {
		return ErrTruncated
	}
	*o = Output{Kind: OutputKind(b[0])}
	want := outputLen(o.Kind)
	if want == 0 {
		return ErrUnknownKind
	}
	if len(b) < want {
		return ErrTruncated
	}
	if len(b) > want {
		return ErrTrailingBytes
	}
	le := binary.LittleEndian
	ok := true
	if o.Kind != KindMarketData {
		o.OutSeq = le.Uint64(b[1:])
		b = b[8:] // the per-kind fields below start after outSeq
	}
	switch o.Kind {
	case KindAck:
		o.ClientOrderID = le.Uint64(b[1:])
		o.OrderID = le.Uint64(b[9:])
		o.Instrument = le.Uint32(b[17:])
		o.Side = Side(b[21])
		o.Type = OrderType(b[22])
		o.Price = int64(le.Uint64(b[23:]))
		o.Qty = le.Uint64(b[31:])
		ok = o.Side.valid() && o.Type.valid()
	case KindReject:
		o.ClientOrderID = le.Uint64(b[1:])
		o.Reason = Reason(b[9])
		ok = o.Reason.isReject()
	case KindExecution:
		o.ClientOrderID = le.Uint64(b[1:])
		o.OrderID = le.Uint64(b[9:])
		o.ContraOrderID = le.Uint64(b[17:])
		o.TradeID = le.Uint64(b[25:])
		o.Instrument = le.Uint32(b[33:])
		o.Side = Side(b[37])
		o.Aggressor = b[38] == 1
		o.Price = int64(le.Uint64(b[39:]))
		o.Qty = le.Uint64(b[47:])
		o.LeavesQty = le.Uint64(b[55:])
		ok = o.Side.valid() && b[38] <= 1
	case KindCancelled:
		o.ClientOrderID = le.Uint64(b[1:])
		o.OrderID = le.Uint64(b[9:])
		o.Instrument = le.Uint32(b[17:])
		o.Side = Side(b[21])
		o.Qty = le.Uint64(b[22:])
		o.Reason = Reason(b[30])
		ok = o.Side.valid() && o.Reason.isCancel()
	case KindMarketData:
		o.MDSeq = le.Uint64(b[1:])
		o.MDKind = MDKind(b[9])
		o.Instrument = le.Uint32(b[10:])
		o.Side = Side(b[14])
		o.Price = int64(le.Uint64(b[15:]))
		o.Qty = le.Uint64(b[23:])
		o.TradeID = le.Uint64(b[31:])
		ok = o.Side.valid() && (o.MDKind == MDTrade || o.MDKind == MDLevel)
	}
	if !ok {
		return ErrBadField
	}
	return nil
}

// SessionOutSeq reads the output sequence number of an encoded output
// payload without decoding it (the node's output history keys on it):
// ok is false for market data, for a payload too short to hold one, and
// for a Duplicate (an answer that repeats an output of the history, not a
// new one; its original's OutSeq is in it at offset 2). It never allocates.
func SessionOutSeq(payload []byte) (seq uint64, ok bool) {
	if len(payload) < 9 {
		return 0, false
	}
	switch OutputKind(payload[0]) {
	case KindAck, KindReject, KindExecution, KindCancelled:
		return binary.LittleEndian.Uint64(payload[1:]), true
	}
	return 0, false
}
