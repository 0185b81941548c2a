package engine

import (
	"strings"
	"testing"
)

func TestDescribeCommand(t *testing.T) {
	buy := AppendRequest(nil, 7, 42, &Request{Op: OpNewOrder, Instrument: 3, Side: Buy, Type: Limit, Price: 101, Qty: 5})
	v := DescribeCommand(buy)
	want := CommandView{Session: 7, ClientOrderID: 42, Op: "new_order", Instrument: 3, Side: "buy", Type: "limit", Price: 101, Qty: 5}
	if v != want {
		t.Fatalf("got %+v, want %+v", v, want)
	}
	if s := v.String(); s != "session 7 order 42: new_order buy limit instrument 3 qty 5 price 101" {
		t.Fatalf("text %q", s)
	}
	cancel := AppendRequest(nil, 7, 43, &Request{Op: OpCancel, OrderID: 9})
	if v := DescribeCommand(cancel); v.Op != "cancel" || v.OrderID != 9 || v.ClientOrderID != 43 {
		t.Fatalf("cancel: %+v", v)
	}
	// Undecodable input: the identity when it parses, the reason, no panic.
	bad := AppendCommand(nil, 7, 44, []byte{0x99, 1})
	if v := DescribeCommand(bad); v.Session != 7 || v.ClientOrderID != 44 || v.BodyHex != "9901" || v.Error == "" {
		t.Fatalf("bad body: %+v", v)
	}
	for i := range buy {
		v := DescribeCommand(buy[:i])
		if v.Error == "" || !strings.Contains(v.String(), "undecodable") {
			t.Fatalf("prefix %d decoded: %+v", i, v)
		}
	}
}
