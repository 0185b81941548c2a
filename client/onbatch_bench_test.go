package client

import (
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// BenchmarkOnBatchAnswer: the client's receive path for one answer (one
// OUTPUT frame from the primary, parsed, fenced, admitted, matched), the
// per-command cost on the round trip.
func BenchmarkOnBatchAnswer(b *testing.B) {
	primary := netip.MustParseAddrPort("10.0.0.1:7000")
	cl := memClient(b, Options{Core: Config{Session: 9, MaxInFlight: 1 << 12}, Primary: primary, Poll: true,
		Nodes: map[uint32]netip.AddrPort{1: primary, 2: netip.MustParseAddrPort("10.0.0.2:7000")}})
	batch := wire.NewBatch(0)
	var outBuf []byte
	bufs, sizes, from := [][]byte{make([]byte, 0, 2048)}, make([]int, 1), []netip.AddrPort{primary}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := uint64(i + 1)
		cl.core.Next(&order, 0, 0)
		batch.Reset(wire.TypeOutput, wire.Origin{Stream: 1, Node: 1, Epoch: 3}, id)
		outBuf = engine.AppendOutput(outBuf[:0], &engine.Output{Kind: engine.KindAck, ClientOrderID: id, OrderID: id, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 1, OutSeq: id})
		batch.Add(outBuf)
		bufs[0] = append(bufs[0][:0], batch.Bytes()...)
		sizes[0] = len(bufs[0])
		cl.onBatch(bufs, sizes, from)
	}
	if st := cl.Stats(); st.Answered == 0 || st.StaleEpoch != 0 {
		b.Fatalf("answered %d, stale %d", st.Answered, st.StaleEpoch)
	}
}

// BenchmarkPollFullWindow: the resend timer's pass (every 2 ms in poll
// mode) over a full window of 8,192 commands none of which is due, as in
// a flat-out run: what the scan costs when it finds nothing to resend.
func BenchmarkPollFullWindow(b *testing.B) {
	c := NewCore(Config{Session: 9, MaxInFlight: 8192, ResendAfterNs: 250_000_000})
	for i := range 8192 {
		if _, _, err := c.Next(&order, int64(i), int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	resend := func([]byte) { b.Fatal("resent a command that is not due") }
	b.ReportAllocs()
	for b.Loop() {
		c.Poll(10_000, resend)
	}
}
