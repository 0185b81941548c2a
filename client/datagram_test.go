package client

import (
	"errors"
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

// Dial refuses a window above MaxInFlightMax (or negative) before it
// opens anything; inside the bounds the window is what Next enforces.
func TestDialMaxInFlightBounds(t *testing.T) {
	for _, tc := range []struct {
		window int
		ok     bool
	}{{0, true}, {1, true}, {8192, true}, {MaxInFlightMax, true}, {-1, false}, {MaxInFlightMax + 1, false}} {
		cl, err := Dial(Options{Core: Config{Session: 3, MaxInFlight: tc.window}, Primary: netip.MustParseAddrPort("127.0.0.1:9"), Poll: true})
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadMaxInFlight)) {
			t.Fatalf("MaxInFlight %d: err %v, want ok %v", tc.window, err, tc.ok)
		}
		if err != nil {
			continue
		}
		want := tc.window
		if want == 0 {
			want = DefaultMaxInFlight
		}
		if got := len(cl.core.slots); got != want {
			t.Errorf("MaxInFlight %d: a window of %d slots, want %d", tc.window, got, want)
		}
		cl.Close()
	}
}

// The client packs its commands into datagrams of DatagramBytes (less the
// MAC tag with a key): resending everything in flight (a new primary)
// goes out in frames up to that size, never larger; the overdue resends
// of Poll go out in default-sized frames (at most wire.DefaultDatagramLen),
// so they reach a primary configured smaller or cross a path that drops
// jumbo frames.
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
		cl.SetPrimary(sink.LocalAddr()) // resends all in full frames
		if got, largest := receiveCommands(t, sink, 2*commands); largest > want || largest < want-200 {
			t.Fatalf("size %d: largest datagram %d bytes of %d commands, want full frames of at most %d", size, largest, got, want)
		}
		time.Sleep(5 * time.Millisecond) // past ResendAfterNs: Poll resends them all
		for range (commands + MaxResendsPerPoll - 1) / MaxResendsPerPoll {
			cl.Poll() // each resends at most MaxResendsPerPoll
		}
		if got, largest := receiveCommands(t, sink, commands); largest > wire.DefaultDatagramLen || largest < wire.DefaultDatagramLen-200 {
			t.Fatalf("size %d: Poll's resends: largest datagram %d bytes of %d commands, want full default frames (at most %d)", size, largest, got, wire.DefaultDatagramLen)
		}
		cl.Close()
		sink.Close()
	}
}

// receiveCommands reads COMMAND frames from sink until want commands
// arrived (failing after 10 s) and returns how many and the largest
// datagram.
func receiveCommands(t *testing.T, sink *bus.UDP, want int) (got, largest int) {
	t.Helper()
	bufs := [][]byte{make([]byte, 65536)}
	sizes, from := make([]int, 1), make([]netip.AddrPort, 1)
	deadline := time.Now().Add(10 * time.Second)
	for got < want && time.Now().Before(deadline) {
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
		got += int(f.Count)
		largest = max(largest, sizes[0])
	}
	if got < want {
		t.Fatalf("%d commands arrived, want %d", got, want)
	}
	return got, largest
}
