package client

import (
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

// Dial refuses a datagram size outside wire.MinDatagramLen..MaxFrameLen
// before it opens anything, and takes 0 as the default.
func TestDialDatagramBytesBounds(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{0, true}, {wire.MinDatagramLen, true}, {8972, true}, {wire.MaxFrameLen, true},
		{wire.MinDatagramLen - 1, false}, {wire.MaxFrameLen + 1, false}, {-1, false}} {
		cl, err := Dial(Options{Core: Config{Session: 3}, Primary: netip.MustParseAddrPort("127.0.0.1:9"), DatagramBytes: tc.size, Poll: true})
		if (err == nil) != tc.ok {
			t.Fatalf("DatagramBytes %d: err %v, want ok %v", tc.size, err, tc.ok)
		}
		if err == nil {
			cl.Close()
		}
	}
}

// The client packs its commands into datagrams of DatagramBytes (less the
// MAC tag with a key): a resend of many unanswered commands goes out in
// frames up to that size, never larger, and with the default never over
// wire.DefaultDatagramLen.
func TestClientDatagramBytes(t *testing.T) {
	for _, size := range []int{0, 8972} {
		want := size
		if want == 0 {
			want = wire.DefaultDatagramLen
		}
		sink, err := bus.ListenUnicast(bus.UnicastConfig{Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := Dial(Options{Core: Config{Session: 3, MaxInFlight: 1024, ResendAfterNs: int64(time.Millisecond)},
			Primary: sink.LocalAddr(), DatagramBytes: size, Poll: true})
		if err != nil {
			sink.Close()
			t.Fatal(err)
		}
		const commands = 600 // ~30 KB of new orders: several full frames of either size
		for range commands {
			if _, err := cl.Submit(&order); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond) // past ResendAfterNs: Poll resends all in full frames
		for range (commands + MaxResendsPerPoll - 1) / MaxResendsPerPoll {
			cl.Poll() // each resends at most MaxResendsPerPoll
		}
		largest, resent := 0, 0
		bufs := [][]byte{make([]byte, 65536)}
		sizes, from := make([]int, 1), make([]netip.AddrPort, 1)
		deadline := time.Now().Add(10 * time.Second)
		for resent < 2*commands && time.Now().Before(deadline) {
			n, err := sink.Receive(bufs, sizes, from, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				continue
			}
			f, _, err := wire.Parse(bufs[0][:sizes[0]])
			if err != nil {
				t.Fatalf("datagram of %d bytes: %v", sizes[0], err)
			}
			if f.Type != wire.TypeCommand {
				continue // the session's replay probe
			}
			resent += int(f.Count)
			largest = max(largest, sizes[0])
		}
		cl.Close()
		sink.Close()
		if resent < 2*commands {
			t.Fatalf("size %d: %d commands arrived, want %d (sent and resent)", size, resent, 2*commands)
		}
		if largest > want || largest < want-200 {
			t.Fatalf("size %d: largest datagram %d bytes, want full frames of at most %d", size, largest, want)
		}
	}
}
