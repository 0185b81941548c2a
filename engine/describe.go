package engine

import (
	"encoding/hex"
	"fmt"
)

// CommandView is a command decoded for people and tools (`seqbus journal
// dump`): its identity, and the request in words. A command this engine
// cannot read still yields its identity when the header parses, with the
// body in hex and Error saying why; never a panic.
type CommandView struct {
	Session       uint64 `json:"session"`
	ClientOrderID uint64 `json:"client_order_id"`
	Op            string `json:"op,omitempty"` // "new_order" or "cancel"
	Instrument    uint32 `json:"instrument,omitempty"`
	Side          string `json:"side,omitempty"` // "buy" or "sell"
	Type          string `json:"type,omitempty"` // "limit" or "market"
	Price         int64  `json:"price,omitempty"`
	Qty           uint64 `json:"qty,omitempty"`
	OrderID       uint64 `json:"order_id,omitempty"` // cancel: the order to cancel
	BodyHex       string `json:"body_hex,omitempty"` // only when the body does not decode
	Error         string `json:"error,omitempty"`
}

// DescribeCommand decodes a command (header and request) as the engine
// would read it. Off the hot path: it allocates.
func DescribeCommand(command []byte) CommandView {
	h, err := ParseCommand(command)
	if err != nil {
		return CommandView{BodyHex: hex.EncodeToString(command), Error: err.Error()}
	}
	v := CommandView{Session: h.Session, ClientOrderID: h.ClientOrderID}
	r, err := ParseRequest(h.Body)
	if err != nil {
		v.BodyHex, v.Error = hex.EncodeToString(h.Body), err.Error()
		return v
	}
	switch r.Op {
	case OpNewOrder:
		v.Op, v.Instrument, v.Price, v.Qty = "new_order", r.Instrument, r.Price, r.Qty
		v.Side = map[Side]string{Buy: "buy", Sell: "sell"}[r.Side]
		v.Type = map[OrderType]string{Limit: "limit", Market: "market"}[r.Type]
		if v.Side == "" {
			v.Side = fmt.Sprintf("side(%d)", r.Side)
		}
		if v.Type == "" {
			v.Type = fmt.Sprintf("type(%d)", r.Type)
		}
	case OpCancel:
		v.Op, v.OrderID = "cancel", r.OrderID
	}
	return v
}

// String is the one-line text form.
func (v CommandView) String() string {
	id := fmt.Sprintf("session %d order %d", v.Session, v.ClientOrderID)
	switch {
	case v.Error != "":
		return fmt.Sprintf("%s: undecodable (%s) body %s", id, v.Error, v.BodyHex)
	case v.Op == "cancel":
		return fmt.Sprintf("%s: cancel order_id %d", id, v.OrderID)
	case v.Type == "market":
		return fmt.Sprintf("%s: new_order %s market instrument %d qty %d", id, v.Side, v.Instrument, v.Qty)
	}
	return fmt.Sprintf("%s: new_order %s %s instrument %d qty %d price %d", id, v.Side, v.Type, v.Instrument, v.Qty, v.Price)
}
