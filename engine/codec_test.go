package engine

import (
	"bytes"
	"testing"
)

func sampleOutputs() []Output {
	return []Output{
		{Kind: KindAck, OutSeq: 1 << 40, ClientOrderID: 7, OrderID: 9, Instrument: 3, Side: Buy, Type: Limit, Price: -5, Qty: 10},
		{Kind: KindReject, OutSeq: 3, ClientOrderID: 7, Reason: ReasonBookFull},
		{Kind: KindExecution, OutSeq: 12, ClientOrderID: 1, OrderID: 2, ContraOrderID: 3, TradeID: 4, Instrument: 5, Side: Sell, Aggressor: true, Price: 6, Qty: 7, LeavesQty: 8},
		{Kind: KindCancelled, ClientOrderID: 1, OrderID: 2, Instrument: 3, Side: Sell, Qty: 4, Reason: ReasonMarketUnfilled},
		{Kind: KindMarketData, MDSeq: 1, MDKind: MDTrade, Instrument: 2, Side: Buy, Price: 3, Qty: 4, TradeID: 5},
		{Kind: KindMarketData, MDSeq: 1, MDKind: MDLevel, Instrument: 2, Side: Sell, Price: 3, Qty: 0},
		{Kind: KindDuplicate, Original: KindAck, OutSeq: 99, ClientOrderID: 7, OrderID: 9, Side: Sell, Type: Market, Qty: 1},
		{Kind: KindDuplicate, Original: KindReject, ClientOrderID: 7, Reason: ReasonTooOld},
		{Kind: KindDuplicate, Original: KindCancelled, ClientOrderID: 1, OrderID: 2, Side: Buy, Qty: 4, Reason: ReasonCancelRequested},
	}
}

func TestOutputRoundTripAndTruncation(t *testing.T) {
	for _, o := range sampleOutputs() {
		b := AppendOutput(nil, &o)
		if len(b) > MaxOutputLen {
			t.Errorf("%+v: %d bytes > MaxOutputLen", o, len(b))
		}
		got, err := ParseOutput(b)
		if err != nil || got != o {
			t.Errorf("round trip %+v: got %+v, %v", o, got, err)
		}
		for i := 0; i < len(b); i++ {
			if _, err := ParseOutput(b[:i]); err == nil {
				t.Errorf("%+v: prefix of %d bytes parsed", o, i)
			}
		}
		if _, err := ParseOutput(append(b, 0)); err != ErrTrailingBytes {
			t.Errorf("%+v: trailing byte: %v", o, err)
		}
	}
}

func TestParseOutputRejectsBadFields(t *testing.T) {
	ack := AppendOutput(nil, &sampleOutputs()[0])
	exec := AppendOutput(nil, &sampleOutputs()[2])
	md := AppendOutput(nil, &sampleOutputs()[4])
	rej := AppendOutput(nil, &sampleOutputs()[1])
	canc := AppendOutput(nil, &sampleOutputs()[3])
	set := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"unknown kind", []byte{0}, ErrUnknownKind},
		{"unknown kind 7", []byte{7}, ErrUnknownKind},
		{"ack side 0", set(ack, 8+21, 0), ErrBadField},
		{"ack type 3", set(ack, 8+22, 3), ErrBadField},
		{"exec aggressor 2", set(exec, 8+38, 2), ErrBadField},
		{"exec side 3", set(exec, 8+37, 3), ErrBadField},
		{"reject with cancel reason", set(rej, 8+9, byte(ReasonCancelRequested)), ErrBadField},
		{"reject reason 0", set(rej, 8+9, 0), ErrBadField},
		{"cancelled with reject reason", set(canc, 8+30, byte(ReasonBookFull)), ErrBadField},
		{"md kind 0", set(md, 9, 0), ErrBadField},
		{"duplicate of execution", append([]byte{byte(KindDuplicate)}, exec...), ErrUnknownKind},
		{"duplicate of duplicate", append([]byte{byte(KindDuplicate), byte(KindDuplicate)}, ack...), ErrUnknownKind},
		{"duplicate empty", []byte{byte(KindDuplicate)}, ErrTruncated},
	}
	for _, tc := range tests {
		if _, err := ParseOutput(tc.b); err != tc.want {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCommandRoundTrip(t *testing.T) {
	reqs := []Request{
		{Op: OpNewOrder, Instrument: 1 << 31, Side: Sell, Type: Market, Price: -1, Qty: 1<<64 - 1},
		{Op: OpCancel, OrderID: 42},
	}
	for _, r := range reqs {
		c := AppendRequest(nil, 3, 4, &r)
		if len(c) > MaxCommandLen {
			t.Errorf("%d > MaxCommandLen", len(c))
		}
		h, err := ParseCommand(c)
		if err != nil || h.Session != 3 || h.ClientOrderID != 4 {
			t.Fatalf("header %+v %v", h, err)
		}
		got, err := ParseRequest(h.Body)
		if err != nil || got != r {
			t.Errorf("request %+v: got %+v %v", r, got, err)
		}
		for i := 0; i < len(h.Body); i++ {
			if _, err := ParseRequest(h.Body[:i]); err == nil {
				t.Errorf("body prefix %d parsed", i)
			}
		}
		if _, err := ParseRequest(append(bytes.Clone(h.Body), 0)); err != ErrTrailingBytes {
			t.Errorf("trailing: %v", err)
		}
	}
	if _, err := ParseCommand(make([]byte, CommandHeaderLen-1)); err != ErrTruncated {
		t.Errorf("short header: %v", err)
	}
	if _, err := ParseCommand(AppendCommand(nil, 0, 1, nil)); err != ErrZeroSession {
		t.Errorf("session 0: %v", err)
	}
	if _, err := ParseRequest([]byte{3}); err != ErrUnknownKind {
		t.Errorf("unknown op: %v", err)
	}
}

func TestCodecsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 128)
	outs := sampleOutputs()
	cmd := limitCmd(1, 2, 0, Buy, 1, 1)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range outs {
			b := AppendOutput(buf[:0], &outs[i])
			if _, err := ParseOutput(b); err != nil {
				panic(err)
			}
		}
		h, _ := ParseCommand(cmd)
		_, _ = ParseRequest(h.Body)
	})
	if allocs != 0 {
		t.Errorf("codecs allocate %v times per run", allocs)
	}
}

func FuzzParseCommand(f *testing.F) {
	f.Add(limitCmd(1, 2, 3, Buy, 4, 5))
	f.Add(cancelCmd(1, 2, 3))
	f.Add([]byte{})
	f.Add(AppendCommand(nil, 1, 1, []byte{1, 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseCommand(data)
		// The in-place forms agree with the value forms, whatever the
		// value held before (a stale field must not survive a parse).
		dirty := CommandHeader{Session: 9, ClientOrderID: 9, Body: []byte{9}}
		if err2 := dirty.Parse(data); err2 != err || err == nil && (dirty.Session != h.Session || dirty.ClientOrderID != h.ClientOrderID || !bytes.Equal(dirty.Body, h.Body)) {
			t.Fatalf("Parse gave %+v, %v; ParseCommand %+v, %v", dirty, err2, h, err)
		}
		if err != nil {
			return
		}
		if h.Session == 0 {
			t.Fatal("parsed session 0")
		}
		if re := AppendCommand(nil, h.Session, h.ClientOrderID, h.Body); !bytes.Equal(re, data) {
			t.Fatalf("re-encoded %x != %x", re, data)
		}
		r, err := ParseRequest(h.Body)
		dirtyReq := Request{Op: OpNewOrder, Instrument: 9, Side: Sell, Type: Market, Price: 9, Qty: 9, OrderID: 9}
		if err2 := dirtyReq.Parse(h.Body); err2 != err || err == nil && dirtyReq != r {
			t.Fatalf("Request.Parse gave %+v, %v; ParseRequest %+v, %v", dirtyReq, err2, r, err)
		}
		if err != nil {
			return
		}
		if re := appendBody(nil, &r); !bytes.Equal(re, h.Body) {
			t.Fatalf("re-encoded body %x != %x", re, h.Body)
		}
	})
}

func FuzzParseOutput(f *testing.F) {
	for _, o := range sampleOutputs() {
		f.Add(AppendOutput(nil, &o))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseOutput(data)
		for _, dirty := range sampleOutputs() { // every field set by some kind
			if err2 := dirty.Parse(data); err2 != err || err == nil && dirty != o {
				t.Fatalf("Output.Parse gave %+v, %v; ParseOutput %+v, %v", dirty, err2, o, err)
			}
		}
		if err != nil {
			return
		}
		if re := AppendOutput(nil, &o); !bytes.Equal(re, data) {
			t.Fatalf("re-encoded %x != %x", re, data)
		}
	})
}
