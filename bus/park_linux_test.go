package bus

import (
	"net/netip"
	"testing"
)

// TestParker: Park times out (false) on an empty socket, returns readable
// (true) when a datagram waits, and does not allocate.
func TestParker(t *testing.T) {
	u, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	p, err := NewParker(u)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if ok, err := p.Park(1); ok || err != nil {
		t.Fatalf("empty socket: Park = %v, %v; want false, nil", ok, err)
	}
	s, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send([][]byte{[]byte("x")}, u.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	// Level-triggered: readable on every Park until the datagram is read.
	allocs := testing.AllocsPerRun(50, func() {
		if ok, err := p.Park(1000); !ok || err != nil {
			t.Fatalf("datagram waiting: Park = %v, %v", ok, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Park: %v allocs, want 0", allocs)
	}
	bufs, sizes, from := [][]byte{make([]byte, 16)}, make([]int, 1), make([]netip.AddrPort, 1)
	if n, err := u.Receive(bufs, sizes, from, 0); n != 1 || err != nil {
		t.Fatalf("Receive = %d, %v", n, err)
	}
	if ok, _ := p.Park(1); ok {
		t.Fatal("readable after the datagram was read")
	}
}
