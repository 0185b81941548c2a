package bus

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestParkerNs: the nanosecond park returns false at its timeout (never
// before it, unless a signal cut it short), wakes at once with true when a
// datagram arrives during a long park, uses epoll_pwait2 where the kernel
// has it, and does not allocate.
func TestParkerNs(t *testing.T) {
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
	const timeoutNs = 300_000
	slept := false
	for try := 0; try < 5 && !slept; try++ { // a signal (EINTR) may end one early
		start := time.Now()
		ok, err := p.ParkNs(timeoutNs)
		if ok || err != nil {
			t.Fatalf("empty socket: ParkNs = %v, %v; want false, nil", ok, err)
		}
		slept = time.Since(start) >= timeoutNs
	}
	if !slept {
		t.Fatal("ParkNs returned before its timeout five times")
	}
	if !p.noPwait2 && !kernelAtLeast(5, 11) {
		t.Fatal("epoll_pwait2 reported working on a kernel before 5.11")
	}
	if p.noPwait2 && kernelAtLeast(5, 11) {
		t.Fatal("epoll_pwait2 refused on a kernel that has it")
	}
	if allocs := testing.AllocsPerRun(20, func() { _, _ = p.ParkNs(1000) }); allocs != 0 {
		t.Fatalf("ParkNs timeout: %v allocs, want 0", allocs)
	}

	s, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sent := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		sent <- s.Send([][]byte{[]byte("x")}, u.LocalAddr())
	}()
	start := time.Now()
	ok, err := p.ParkNs(int64(30 * time.Second))
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !ok || err != nil {
		t.Fatalf("arrival: ParkNs = %v, %v; want true, nil", ok, err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("arrival did not end a 30 s park (%v)", el)
	}
	if allocs := testing.AllocsPerRun(20, func() {
		if ok, _ := p.ParkNs(int64(time.Second)); !ok {
			t.Fatal("readable socket: ParkNs false")
		}
	}); allocs != 0 {
		t.Fatalf("ParkNs readable: %v allocs, want 0", allocs)
	}
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// TestEmptyReceivesCounted: a receive that finds the socket empty counts
// once in EmptyReceives; one that reads does not.
func TestEmptyReceivesCounted(t *testing.T) {
	u, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	bufs, sizes, from := [][]byte{make([]byte, 16)}, make([]int, 1), make([]netip.AddrPort, 1)
	for i := 0; i < 3; i++ {
		if n, err := u.Receive(bufs, sizes, from, 0); n != 0 || err != nil {
			t.Fatalf("Receive = %d, %v", n, err)
		}
	}
	if got := u.Counters().EmptyReceives; got != 3 {
		t.Fatalf("EmptyReceives = %d after 3 empty polls, want 3", got)
	}
	if err := u.Send([][]byte{[]byte("x")}, u.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	for n := 0; n == 0; {
		if n, err = u.Receive(bufs, sizes, from, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got := u.Counters().EmptyReceives; got > 4 {
		t.Fatalf("EmptyReceives = %d, want at most 4 (one poll before the datagram)", got)
	}
}
