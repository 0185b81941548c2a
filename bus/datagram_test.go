package bus

import (
	"bytes"
	"errors"
	"net"
	"testing"
)

// A runner's receive buffers are DatagramBytes long: with the default a
// jumbo datagram is dropped and counted as a truncation, never delivered
// cut short; with DatagramBytes 9000 the same datagram arrives whole.
func TestRunnerDatagramBytes(t *testing.T) {
	jumbo := bytes.Repeat([]byte{0xab}, 8972)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, tc := range []struct {
				name      string
				size      int
				delivered bool
			}{{"default", 0, false}, {"jumbo", 9000, true}} {
				t.Run(tc.name, func(t *testing.T) {
					a, b := genPair(t, tr.real, nil)
					ag := newTestAgent(0)
					r, err := NewAgentRunner(AgentRunnerConfig{Idle: Idle{Kind: IdleBlock}, NowNs: testNowNs, DatagramBytes: tc.size}, ag, b)
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Start(); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { r.Stop(); r.Close() })
					if err := a.Send([][]byte{jumbo, []byte("small")}, b.LocalAddr()); err != nil {
						t.Fatal(err)
					}
					got := receiveOne(t, ag)
					if tc.delivered {
						if got.payload != string(jumbo) {
							t.Fatalf("got %d bytes, want the %d-byte datagram whole", len(got.payload), len(jumbo))
						}
						got = receiveOne(t, ag)
					}
					if got.payload != "small" {
						t.Fatalf("got %d bytes, want the small datagram", len(got.payload))
					}
					want := uint64(1)
					if tc.delivered {
						want = 0
					}
					if n := b.Counters().ReceiveTruncations; n != want {
						t.Fatalf("ReceiveTruncations = %d, want %d", n, want)
					}
				})
			}
		})
	}
}

// A Drainer's buffers are sized at construction: a datagram over them
// is counted as truncated, one within them as read and dropped.
func TestDrainerDatagramBytes(t *testing.T) {
	for _, tc := range []struct {
		size, datagram int
		truncated      bool
	}{{0, 2000, false}, {0, 3000, true}, {9000, 8972, false}} {
		a, b := genPair(t, false, SendOnly)
		if err := a.Send([][]byte{make([]byte, tc.datagram)}, b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		d := NewDrainer(tc.size)
		if n, err := d.Drain(b); err != nil || n != 1 {
			t.Fatalf("size %d: drained %d, %v; want 1", tc.size, n, err)
		}
		c := b.Counters()
		if got := c.ReceiveTruncations == 1; got != tc.truncated {
			t.Fatalf("size %d, datagram %d: truncations %d, want truncated %v", tc.size, tc.datagram, c.ReceiveTruncations, tc.truncated)
		}
		if got := c.Drops[DropSendOnly] == 1; got == tc.truncated {
			t.Fatalf("size %d, datagram %d: send-only drops %d", tc.size, tc.datagram, c.Drops[DropSendOnly])
		}
	}
}

// CheckInterfaceMTU passes a datagram whose IPv4 and UDP headers bring it
// exactly to the MTU, and refuses one byte more with both numbers.
func TestCheckInterfaceMTU(t *testing.T) {
	lo, err := net.InterfaceByName(DefaultInterface)
	if err != nil || lo.MTU <= IPv4UDPHeaderBytes {
		t.Skipf("no loopback with an MTU: %v", err)
	}
	fits := lo.MTU - IPv4UDPHeaderBytes
	if err := CheckInterfaceMTU("", fits); err != nil {
		t.Fatalf("%d bytes on MTU %d: %v", fits, lo.MTU, err)
	}
	err = CheckInterfaceMTU("", fits+1)
	var me *MTUError
	if !errors.As(err, &me) || me.MTU != lo.MTU || me.DatagramBytes != fits+1 || me.Name != DefaultInterface {
		t.Fatalf("%d bytes on MTU %d: %v, want an MTUError", fits+1, lo.MTU, err)
	}
	if err := CheckInterfaceMTU("no-such-interface0", 1472); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("missing interface: %v, want ErrNoInterface", err)
	}
}

// Receive buffers hold a datagram of the configured size, and never less
// than the default size's, so a peer configured smaller still reads a
// default-size datagram whole.
func TestRecvBufferBytes(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, DatagramBytesDefault}, {1472, DatagramBytesDefault}, {DatagramBytesDefault, DatagramBytesDefault}, {8972, 8972}, {65507, 65507}} {
		if got := RecvBufferBytes(c.in); got != c.want {
			t.Errorf("RecvBufferBytes(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
