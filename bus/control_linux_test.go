//go:build linux

package bus

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message the way the kernel lays it out.
func cmsg(level, kind int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	if unix.SizeofPtr == 8 {
		binary.NativeEndian.PutUint64(b, uint64(unix.CmsgLen(len(data))))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(unix.CmsgLen(len(data))))
	}
	binary.NativeEndian.PutUint32(b[unix.SizeofCmsghdr-8:], uint32(level))
	binary.NativeEndian.PutUint32(b[unix.SizeofCmsghdr-4:], uint32(kind))
	copy(b[unix.SizeofCmsghdr:], data)
	return b
}

func pktinfo(dst [4]byte) []byte {
	d := make([]byte, unix.SizeofInet4Pktinfo)
	binary.NativeEndian.PutUint32(d[0:4], 1)
	copy(d[4:8], []byte{127, 0, 0, 1})
	copy(d[8:12], dst[:])
	return cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, d)
}

func overflow(n uint32) []byte {
	d := make([]byte, 4)
	binary.NativeEndian.PutUint32(d, n)
	return cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, d)
}

func groSegment(n int32) []byte {
	d := make([]byte, 4)
	binary.NativeEndian.PutUint32(d, uint32(n))
	return cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, d)
}

func TestParseControl(t *testing.T) {
	group := [4]byte{239, 7, 7, 7}
	cases := []struct {
		name string
		b    []byte
		want controlInfo
	}{
		{"empty", nil, controlInfo{}},
		{"pktinfo", pktinfo(group), controlInfo{destination: netip.AddrFrom4(group), hasDestination: true}},
		{"overflow", overflow(42), controlInfo{overflow: 42, hasOverflow: true}},
		{"both", append(pktinfo(group), overflow(7)...),
			controlInfo{destination: netip.AddrFrom4(group), hasDestination: true, overflow: 7, hasOverflow: true}},
		{"unknown type skipped", append(cmsg(unix.SOL_SOCKET, 99, []byte{1, 2, 3}), overflow(3)...),
			controlInfo{overflow: 3, hasOverflow: true}},
		{"truncated header", pktinfo(group)[:unix.SizeofCmsghdr-1], controlInfo{}},
		{"length past end", pktinfo(group)[:unix.SizeofCmsghdr+4], controlInfo{}},
		{"short pktinfo ignored", cmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, []byte{1, 2, 3}), controlInfo{}},
		{"gro segment", groSegment(1400), controlInfo{segment: 1400}},
		{"all three", append(append(pktinfo(group), overflow(7)...), groSegment(1000)...),
			controlInfo{destination: netip.AddrFrom4(group), hasDestination: true, overflow: 7, hasOverflow: true, segment: 1000}},
		{"short gro ignored", cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, []byte{1, 2}), controlInfo{}},
	}
	if n := len(pktinfo(group)) + len(overflow(7)) + len(groSegment(1)); n > controlBytes {
		t.Fatalf("the three control messages take %d bytes, more than controlBytes %d", n, controlBytes)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseControl(tc.b); got != tc.want {
				t.Errorf("parseControl = %+v, want %+v", got, tc.want)
			}
		})
	}
	var b [controlBytes]byte
	copy(b[:], append(pktinfo(group), overflow(7)...))
	if allocs := testing.AllocsPerRun(100, func() { parseControl(b[:]) }); allocs != 0 {
		t.Errorf("parseControl: %v allocs/op", allocs)
	}
}

func TestSockaddrRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1:1", "10.77.0.2:65535", "[::1]:40000", "[fe80::1]:9"} {
		ap := netip.MustParseAddrPort(s)
		var b [sockaddrBytes]byte
		n := encodeSockaddr(&b, ap, ap.Addr().Is4())
		if got := decodeSockaddr(b[:n]); got != ap {
			t.Errorf("%v round-trips to %v", ap, got)
		}
		if got := decodeSockaddr(b[:n-1]); got.IsValid() {
			t.Errorf("short %v decodes to %v", ap, got)
		}
	}
}

// Control messages come from the kernel, but the walker must stay inside
// its buffer whatever the lengths say.
func FuzzParseControl(f *testing.F) {
	f.Add(pktinfo([4]byte{239, 1, 2, 3}))
	f.Add(append(pktinfo([4]byte{239, 1, 2, 3}), overflow(9)...))
	f.Add(cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, nil))
	f.Add(append(overflow(1), groSegment(-5)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		info := parseControl(b)
		if info.hasDestination != info.destination.IsValid() {
			t.Fatalf("destination flag and value disagree: %+v", info)
		}
		if !info.hasOverflow && info.overflow != 0 {
			t.Fatalf("overflow without flag: %+v", info)
		}
	})
}

func FuzzDecodeSockaddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:1", "[::1]:2"} {
		ap := netip.MustParseAddrPort(s)
		var b [sockaddrBytes]byte
		n := encodeSockaddr(&b, ap, ap.Addr().Is4())
		f.Add(b[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ap := decodeSockaddr(b)
		if !ap.IsValid() {
			return
		}
		var out [sockaddrBytes]byte
		n := encodeSockaddr(&out, ap, ap.Addr().Is4())
		if again := decodeSockaddr(out[:n]); again != ap {
			t.Fatalf("%v re-encodes to %v", ap, again)
		}
	})
}

func TestNextVlen(t *testing.T) {
	cases := []struct {
		name                         string
		vlen, capacity, read, before int
		next, empties                int
	}{
		{"unset starts at capacity", 0, 64, 0, 0, 64, 1},
		{"empty poll keeps vlen, counts", 8, 64, 0, 3, 8, 4},
		{"short read shrinks to what came", 64, 64, 1, 5, 1, 0},
		{"full read after idle keeps", 1, 64, 1, 2, 1, 0},
		{"full read back to back doubles", 1, 64, 1, 0, 2, 0},
		{"doubling stops at capacity", 48, 64, 48, 0, 64, 0},
		{"capacity shrank under vlen", 64, 8, 8, 0, 8, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, empties := nextVlen(tc.vlen, tc.capacity, tc.read, tc.before)
			if next != tc.next || empties != tc.empties {
				t.Errorf("nextVlen = %d, %d; want %d, %d", next, empties, tc.next, tc.empties)
			}
		})
	}
}

// A ping-pong settles on single reads; a backlog is read in full batches.
func TestAdaptiveBatch(t *testing.T) {
	a, b := genPair(t, true, nil)
	u := b.(*UDP)
	rb := newBatch(BatchSizeMax, 64)
	for i := 0; i < 5; i++ {
		a.Send(frames(1), u.LocalAddr())
		for n := 0; n == 0; {
			n, _ = u.Receive(rb.bufs, rb.sizes, rb.from, time.Second)
		}
		u.Receive(rb.bufs, rb.sizes, rb.from, 0) // the empty poll between pings
	}
	if u.sys.rx.vlen != 1 {
		t.Errorf("after ping-pong vlen = %d, want 1", u.sys.rx.vlen)
	}
	// The single-datagram (recvfrom) path reports sender and truncation too.
	if n, _ := u.Receive(rb.bufs, rb.sizes, rb.from, 0); n != 0 || u.sys.rx.vlen != 1 {
		t.Fatalf("unexpected datagram or vlen %d", u.sys.rx.vlen)
	}
	a.Send([][]byte{make([]byte, 100)}, u.LocalAddr())
	short := newBatch(1, 10)
	for n, calls := 0, 0; n == 0 && u.Counters().ReceiveTruncations == 0 && calls < 100; calls++ {
		n, _ = u.Receive(short.bufs, short.sizes, short.from, 10*time.Millisecond)
	}
	if c := u.Counters(); c.ReceiveTruncations != 1 {
		t.Errorf("single-read truncations = %d, want 1", c.ReceiveTruncations)
	}
	a.Send(frames(1), u.LocalAddr())
	if n, _ := u.Receive(rb.bufs[:1], rb.sizes, rb.from, time.Second); n != 1 || rb.from[0] != a.LocalAddr() || rb.sizes[0] != 32 {
		t.Errorf("single read: n %d from %v size %d; want 1 from %v size 32", n, rb.from[0], rb.sizes[0], a.LocalAddr())
	}
	before := u.Counters().ReceiveBatches
	a.Send(frames(200), u.LocalAddr())
	if got := receiveN(t, u, 200, 64); len(got) != 200 {
		t.Fatalf("got %d of 200", len(got))
	}
	after := u.Counters().ReceiveBatches
	var calls uint64
	for i := range after {
		calls += after[i] - before[i]
	}
	// Doubling from 1: 1+1+2+4+8+16+32+64+64 covers 200 in about 9 reads.
	if calls > 16 {
		t.Errorf("a 200-datagram backlog took %d reads", calls)
	}
}

func frames(count int) [][]byte {
	out := make([][]byte, count)
	for i := range out {
		out[i] = make([]byte, 32)
	}
	return out
}
