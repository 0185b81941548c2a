//go:build linux

package bus

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/internal/netns"
)

// sendOnlyBufferMax is well above the kernel's SOCK_MIN_RCVBUF (4608 on
// 64-bit Linux) and far below what a receiver asks for.
const sendOnlyBufferMax = 16 << 10

// readRecvQueue is the socket's Recv-Q as ss shows it (sk_rmem_alloc),
// read from /proc/net/udp for the socket bound to local. thread-self: run
// inside a namespace it reads that namespace's table (the thread is in it).
func readRecvQueue(local netip.AddrPort) (int, error) {
	f, err := os.Open("/proc/thread-self/net/udp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	a := local.Addr().As4()
	// /proc/net/udp prints the address as a native-endian u32 (little
	// endian here) and the port big endian.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], local.Port())
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[1] != want {
			continue
		}
		_, rx, ok := strings.Cut(fields[4], ":")
		if !ok {
			return 0, fmt.Errorf("bad queue field %q", fields[4])
		}
		n, err := strconv.ParseUint(rx, 16, 64)
		return int(n), err
	}
	return 0, fmt.Errorf("socket %v not in /proc/net/udp", local)
}

// sendOnlyFixture is a send-only socket and an injector aimed at it, in a
// private namespace when the test may make one. Every t.Fatal happens on
// the test goroutine (never inside netns.Do, whose goroutine it would end).
type sendOnlyFixture struct {
	h   *netns.Host
	s   *UDP
	inj *net.UDPConn
}

func (f *sendOnlyFixture) recvQueue(t *testing.T) int {
	t.Helper()
	var q int
	inHost(t, f.h, func() (err error) {
		q, err = readRecvQueue(f.s.LocalAddr())
		return err
	})
	return q
}

func rcvbuf(t *testing.T, u *UDP) int {
	t.Helper()
	var size int
	var gerr error
	if err := u.raw.Control(func(fd uintptr) {
		size, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return size
}

// waitQueued polls until the kernel shows something queued on local (the
// injected datagram has arrived), bounded in count.
func (f *sendOnlyFixture) waitQueued(t *testing.T) int {
	t.Helper()
	for range 5000 {
		if q := f.recvQueue(t); q > 0 {
			return q
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("injected datagram never queued")
	return 0
}

// A multicast sender only sends; datagrams injected into it (anyone can
// send to its address) are drained and counted, and its receive buffer is
// the kernel's minimum even when the tuning asks 16 MB, so Recv-Q cannot
// grow. Before the fix the socket took the 16 MB buffer (32 MB granted),
// nothing read it and no counter saw the datagrams.
func TestSendOnlySocketDrainedAndCounted(t *testing.T) {
	f := &sendOnlyFixture{h: privateHost(t)}
	inHost(t, f.h, func() error {
		s, err := NewMulticastSender(MulticastSenderConfig{Group: testGroup, Tuning: Tuning{RecvBufferBytes: 16 << 20}})
		if err != nil {
			return err
		}
		f.s = s
		if !s.LocalAddr().Addr().IsLoopback() {
			return fmt.Errorf("sender bound to %v, want loopback", s.LocalAddr())
		}
		f.inj, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(s.LocalAddr()))
		return err
	})
	defer f.s.Close()
	defer f.inj.Close()
	s, inj := f.s, f.inj
	r := s.Report()
	if !r.SendOnly {
		t.Fatal("a multicast sender does not report SendOnly")
	}
	granted := rcvbuf(t, s)
	if granted > sendOnlyBufferMax || r.RecvBufferBytesGranted != granted {
		t.Fatalf("send-only SO_RCVBUF = %d (report %d), want the kernel minimum (≤ %d)", granted, r.RecvBufferBytesGranted, sendOnlyBufferMax)
	}
	payload := make([]byte, 100)
	d := NewDrainer(0)

	// One at a time: each injected datagram is read and counted exactly.
	const singles = 50
	for i := 1; i <= singles; i++ {
		if _, err := inj.Write(payload); err != nil {
			t.Fatal(err)
		}
		f.waitQueued(t)
		n, err := d.Drain(s)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("drain %d read %d datagrams, want 1", i, n)
		}
		if q := f.recvQueue(t); q != 0 {
			t.Fatalf("Recv-Q %d after a drain", q)
		}
		if got := s.Counters().Drops[DropSendOnly]; got != uint64(i) {
			t.Fatalf("DropSendOnly = %d after %d injected", got, i)
		}
	}

	// A flood: the kernel keeps only what the tiny buffer holds and drops
	// the rest; the drops arrive as ReceiveOverflows with the next datagram
	// read. Every injected datagram is counted one way or the other.
	const flood = 500
	maxQueue := 0
	for range flood {
		if _, err := inj.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	maxQueue = max(maxQueue, f.recvQueue(t))
	if _, err := d.Drain(s); err != nil {
		t.Fatal(err)
	}
	// A marker, read after the flood, carries the kernel's drop count.
	if _, err := inj.Write(payload); err != nil {
		t.Fatal(err)
	}
	f.waitQueued(t)
	if _, err := d.Drain(s); err != nil {
		t.Fatal(err)
	}
	c := s.Counters()
	counted := c.Drops[DropSendOnly] + c.ReceiveOverflows
	if want := uint64(singles + flood + 1); counted != want {
		t.Fatalf("counted %d (send-only %d + overflows %d), injected %d", counted, c.Drops[DropSendOnly], c.ReceiveOverflows, want)
	}
	if c.Delivered() != 0 {
		t.Fatalf("%d datagrams delivered from a send-only socket", c.Delivered())
	}
	if q := f.recvQueue(t); q != 0 {
		t.Fatalf("Recv-Q %d after draining the flood", q)
	}
	// sk_rmem_alloc may pass sk_rcvbuf by the last datagram's truesize.
	if maxQueue > granted+4096 {
		t.Fatalf("Recv-Q reached %d with a %d-byte buffer", maxQueue, granted)
	}
	t.Logf("SO_RCVBUF %d; flood of %d: %d queued and read, %d dropped by the kernel; Recv-Q peak %d",
		granted, flood, c.Drops[DropSendOnly]-singles-1, c.ReceiveOverflows, maxQueue)

	// Draining an empty socket does nothing and never allocates.
	if n, err := d.Drain(s); n != 0 || err != nil {
		t.Fatalf("empty drain = %d, %v", n, err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = d.Drain(s) }); a != 0 {
		t.Fatalf("Drain allocates %.1f per call", a)
	}
}
