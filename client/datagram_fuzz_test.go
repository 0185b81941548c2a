package client

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// fuzzSources are where a fuzzed datagram comes from: the primary, the
// other node, the witness and a stranger.
var fuzzSources = [4]netip.AddrPort{
	netip.MustParseAddrPort("10.0.0.1:7000"), netip.MustParseAddrPort("10.0.0.2:7000"),
	netip.MustParseAddrPort("10.0.0.5:7000"), netip.MustParseAddrPort("10.0.0.66:7000"),
}

// fuzzDatagram frames one datagram of FuzzClientDatagrams' input: the
// source's index, the length (little-endian u16), the bytes.
func fuzzDatagram(src byte, pkt []byte) []byte {
	b := []byte{src, 0, 0}
	binary.LittleEndian.PutUint16(b[1:], uint16(len(pkt)))
	return append(b, pkt...)
}

// FuzzClientDatagrams: whatever arrives on a client's socket (OUTPUT
// frames cut short or forged, replay ends, NOT_LEADING notices, lease
// replies; from its primary, the other node, the witness or a stranger)
// is refused or counted, never a panic, and the session's accounting
// holds after every datagram: each command is answered at most once, and
// sent = answered + in flight, within the window.
func FuzzClientDatagrams(f *testing.F) {
	ack := func(id uint64) engine.Output {
		return engine.Output{Kind: engine.KindAck, ClientOrderID: id, OrderID: 100 + id, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1, OutSeq: id}
	}
	out := outputFrame(f, 1, 5, 10, ack(1), ack(2))
	dup := outputFrame(f, 2, 6, 11, engine.Output{Kind: engine.KindDuplicate, Original: engine.KindAck, ClientOrderID: 2, OrderID: 102, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1, OutSeq: 2})
	end := (&wire.ReplayEnd{Origin: wire.Origin{Stream: 1, Node: 1, Epoch: 5}, Session: 7, From: 3, Next: 5, Highest: 9, Status: wire.ReplayTooOld}).Append(nil)
	notLeading := (&wire.NotLeading{Origin: wire.Origin{Stream: 1, Node: 1, Epoch: 5}}).Append(nil)
	info := (&wire.Lease{Type: wire.TypeLeaseInfo, Origin: wire.Origin{Stream: 1, Node: 0, Epoch: 8}, Holder: 2}).Append(nil)
	f.Add(fuzzDatagram(0, out))
	f.Add(append(fuzzDatagram(0, out), fuzzDatagram(1, dup)...))
	f.Add(append(fuzzDatagram(0, end), fuzzDatagram(0, notLeading)...))
	f.Add(append(append(fuzzDatagram(2, info), fuzzDatagram(1, out)...), fuzzDatagram(3, out[:len(out)-3])...))
	f.Add(fuzzDatagram(3, []byte{0xff, 0xff}))
	f.Fuzz(func(t *testing.T, data []byte) {
		answers := map[uint64]int{}
		cl := memClient(t, Options{Core: Config{Session: 7, MaxInFlight: 8}, Witness: fuzzSources[2],
			Nodes:    map[uint32]netip.AddrPort{1: fuzzSources[0], 2: fuzzSources[1]},
			OnResult: func(r Result) { answers[r.ClientOrderID]++ }})
		defer cl.Close()
		for range 4 {
			if _, err := cl.Submit(&order); err != nil {
				t.Fatal(err)
			}
		}
		for len(data) >= 3 {
			src := fuzzSources[data[0]%4]
			n := min(int(binary.LittleEndian.Uint16(data[1:3])), len(data)-3)
			pkt := data[3 : 3+n]
			data = data[3+n:]
			cl.onBatch([][]byte{pkt}, []int{len(pkt)}, []netip.AddrPort{src})
			st, inFlight := cl.Stats(), cl.InFlight()
			if inFlight < 0 || inFlight > 8 || st.Sent != st.Answered+uint64(inFlight) {
				t.Fatalf("sent %d, answered %d, in flight %d (window 8)", st.Sent, st.Answered, inFlight)
			}
			for id, k := range answers {
				if k > 1 || id == 0 || id > 4 {
					t.Fatalf("command %d answered %d times (4 sent)", id, k)
				}
			}
		}
		cl.Poll() // the timers after whatever arrived: resends, replay requests
	})
}
