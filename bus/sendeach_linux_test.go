package bus

import (
	"errors"
	"net/netip"
	"testing"
)

// SendEach sends datagrams to different addresses with one sendmmsg, in
// order, and allocates nothing.
func TestSendEachOneCallManyAddresses(t *testing.T) {
	a, b, s := unicast(t), unicast(t), unicast(t)
	bufs := [][]byte{[]byte("a1"), []byte("b1"), []byte("a2"), []byte("b2"), []byte("a3")}
	to := []netip.AddrPort{a.LocalAddr(), b.LocalAddr(), a.LocalAddr(), b.LocalAddr(), a.LocalAddr()}
	if err := s.SendEach(bufs, to); err != nil {
		t.Fatal(err)
	}
	c := s.Counters()
	var calls uint64
	for _, k := range c.SendBatches {
		calls += k
	}
	if c.DatagramsSent != 5 || calls != 1 {
		t.Fatalf("%d datagrams in %d calls, want 5 in 1", c.DatagramsSent, calls)
	}
	rb, sizes, from := [][]byte{make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8)}, make([]int, 4), make([]netip.AddrPort, 4)
	for _, want := range []struct {
		u   *UDP
		got []string
	}{{a, []string{"a1", "a2", "a3"}}, {b, []string{"b1", "b2"}}} {
		var got []string
		for len(got) < len(want.got) {
			n, err := want.u.Receive(rb, sizes, from, WaitForever)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				got = append(got, string(rb[i][:sizes[i]]))
			}
		}
		for i := range got {
			if got[i] != want.got[i] {
				t.Fatalf("received %q, want %q", got, want.got)
			}
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := s.SendEach(bufs[:2], to[:2]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("SendEach: %v allocations", allocs)
	}
}

// Mismatched lengths and an address the socket cannot reach are refused
// and counted, never sent.
func TestSendEachRefusesBadInput(t *testing.T) {
	s := unicast(t)
	if err := s.SendEach([][]byte{[]byte("x")}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("1 datagram for 0 addresses: %v", err)
	}
	if err := s.SendEach([][]byte{[]byte("x")}, []netip.AddrPort{netip.MustParseAddrPort("[::1]:9")}); !errors.Is(err, ErrConfig) {
		t.Fatalf("IPv6 address on an IPv4 socket: %v", err)
	}
	if c := s.Counters(); c.SendErrors != 2 || c.DatagramsSent != 0 {
		t.Fatalf("send errors %d, sent %d", c.SendErrors, c.DatagramsSent)
	}
}
