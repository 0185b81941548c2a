//go:build linux

package bus

import (
	"bytes"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/internal/netns"
)

// BenchmarkLoopbackSegments measures, on raw sockets over 127.0.0.1, what
// a burst of 40 full datagrams (1,400 bytes) costs from one sendmmsg to
// the last one read, against the same bytes sent as one UDP GSO message
// (UDP_SEGMENT: the kernel cuts it into the same 40 datagrams), read by a
// plain socket and by one with UDP_GRO (which reads the 40 as one buffer
// and a segment size). The bus uses neither yet; this is the measurement
// behind docs/tuning.md's "Segmentation offload". ns/op is a burst.
func BenchmarkLoopbackSegments(b *testing.B) {
	for _, mode := range []string{"sendmmsg", "gso", "gso+gro"} {
		b.Run(mode, func(b *testing.B) { benchSegments(b, mode) })
	}
}

const (
	segBurst = 40
	segBytes = 1400
)

func benchSegments(b *testing.B, mode string) {
	rfd, sfd, to := segmentSockets(b, mode == "gso+gro")
	payload := make([]byte, segBurst*segBytes)
	send := sendBurst(b, sfd, to, payload, mode != "sendmmsg")
	read := readBurst(rfd)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		send()
		for got := 0; got < len(payload); {
			n, err := read()
			if err != nil {
				b.Fatalf("%s: read %d of %d bytes of burst %d: %v", mode, got, len(payload), i, err)
			}
			got += n
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*segBurst), "ns/datagram")
}

// segmentSockets opens a receiver on 127.0.0.1 (with UDP_GRO when gro)
// and a sender; reads time out after a second, so a lost datagram fails
// the benchmark instead of hanging it.
func segmentSockets(b *testing.B, gro bool) (rfd, sfd int, to *unix.SockaddrInet4) {
	b.Helper()
	rfd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(rfd) })
	_ = unix.SetsockoptInt(rfd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	_ = unix.SetsockoptTimeval(rfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1})
	if gro {
		if err := unix.SetsockoptInt(rfd, unix.IPPROTO_UDP, unix.UDP_GRO, 1); err != nil {
			b.Skipf("UDP_GRO: %v", err)
		}
	}
	if err := unix.Bind(rfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		b.Fatal(err)
	}
	sa, err := unix.Getsockname(rfd)
	if err != nil {
		b.Fatal(err)
	}
	sfd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(sfd) })
	return rfd, sfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: sa.(*unix.SockaddrInet4).Port}
}

// sendBurst returns a function that sends payload to `to` as segBurst
// datagrams: one sendmmsg, or one sendmsg with UDP_SEGMENT.
func sendBurst(b *testing.B, fd int, to *unix.SockaddrInet4, payload []byte, gso bool) func() {
	if gso {
		oob := make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = segBytes
		return func() {
			if err := unix.Sendmsg(fd, payload, oob, to, 0); err != nil {
				b.Skipf("UDP_SEGMENT: %v", err)
			}
		}
	}
	var name [sockaddrBytes]byte
	nameLen := encodeSockaddr(&name, netip.AddrPortFrom(netip.AddrFrom4(to.Addr), uint16(to.Port)), true)
	hs := make([]unix.Mmsghdr, segBurst)
	iov := make([]unix.Iovec, segBurst)
	for i := range hs {
		iov[i].Base = &payload[i*segBytes]
		iov[i].SetLen(segBytes)
		hs[i].Hdr.Iov, hs[i].Hdr.Iovlen = &iov[i], 1
		hs[i].Hdr.Name, hs[i].Hdr.Namelen = &name[0], nameLen
	}
	return func() {
		for off := 0; off < segBurst; {
			n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hs[off])), uintptr(segBurst-off), 0, 0, 0)
			if errno != 0 && errno != unix.EINTR {
				b.Fatal(errno)
			}
			off += int(n)
		}
	}
}

// readBurst returns a function that reads with one recvmmsg into segBurst
// buffers of 64 KiB (room for a GRO buffer of the whole burst) and
// returns the bytes read.
func readBurst(fd int) func() (int, error) {
	bufs := make([]byte, segBurst<<16)
	hs := make([]unix.Mmsghdr, segBurst)
	iov := make([]unix.Iovec, segBurst)
	for i := range hs {
		iov[i].Base = &bufs[i<<16]
		iov[i].SetLen(1 << 16)
		hs[i].Hdr.Iov, hs[i].Hdr.Iovlen = &iov[i], 1
	}
	return func() (int, error) {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hs[0])), segBurst, unix.MSG_WAITFORONE, 0, 0)
		if errno != 0 {
			return 0, errno
		}
		got := 0
		for _, h := range hs[:n] {
			got += int(h.Len)
		}
		return got, nil
	}
}

// segmentMix is datagrams of the lengths Send coalesces and those it must
// not: runs of one length (past gsoSegmentsMax, past BatchSizeMax, past
// gsoMaxBytes), a shorter one ending a run, a longer one breaking it,
// empty ones, singles.
func segmentMix() [][]byte {
	var lens []int
	add := func(n, size int) {
		for i := 0; i < n; i++ {
			lens = append(lens, size)
		}
	}
	add(70, 1000) // 64 to a message at most, and 64 datagrams a call
	add(1, 300)   // ends the run
	add(3, 200)
	add(1, 900) // longer: a new message
	add(2, 0)   // empty datagrams go alone
	add(50, 1400)
	add(1, 1)
	add(7, 9000) // 65000 bytes: 7 to a message at most
	out := make([][]byte, len(lens))
	for i, n := range lens {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i + j)
		}
		if n >= 2 {
			p[0], p[1] = byte(i>>8), byte(i)
		}
		out[i] = p
	}
	return out
}

// segmentPair opens a sender tuned by sender and a receiver with a 4 MiB
// buffer on 127.0.0.1, closed when the test ends.
func segmentPair(t *testing.T, sender Tuning) (a, b *UDP) {
	t.Helper()
	a, err := ListenUnicast(UnicastConfig{Tuning: sender})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = ListenUnicast(UnicastConfig{Tuning: Tuning{RecvBufferBytes: 4 << 20}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// TestSendSegmented: Send coalesces runs of equal-length datagrams into
// UDP GSO messages, and the receiver reads every datagram as sent, in
// order; the counters count datagrams, and the messages that carried
// several.
func TestSendSegmented(t *testing.T) {
	a, b := segmentPair(t, Tuning{})
	if gsoControlLen > gsoControlBytes {
		t.Fatalf("a UDP_SEGMENT control message takes %d bytes, more than gsoControlBytes %d", gsoControlLen, gsoControlBytes)
	}
	msgs := segmentMix()
	if err := a.Send(msgs, b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	checkSegmented(t, a, []*UDP{b}, msgs)
}

// TestMulticastSegmented: the same to a group on lo, two members.
func TestMulticastSegmented(t *testing.T) {
	s, rs := multicastHost(t, 2, nil)
	msgs := segmentMix()
	for _, r := range rs {
		if err := r.tune(Tuning{RecvBufferBytes: 4 << 20}, socketOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(msgs, testGroup); err != nil {
		t.Fatal(err)
	}
	checkSegmented(t, s, rs, msgs)
}

func checkSegmented(t *testing.T, s *UDP, rs []*UDP, msgs [][]byte) {
	t.Helper()
	var total uint64
	for _, m := range msgs {
		total += uint64(len(m))
	}
	for i, r := range rs {
		got := receiveN(t, r, len(msgs), 9000)
		if len(got) != len(msgs) {
			t.Fatalf("receiver %d: %d of %d datagrams", i, len(got), len(msgs))
		}
		for j := range msgs {
			if !bytes.Equal(got[j], msgs[j]) {
				t.Fatalf("receiver %d: datagram %d is %d bytes %x..., want %d bytes %x...", i, j, len(got[j]), got[j][:min(4, len(got[j]))], len(msgs[j]), msgs[j][:min(4, len(msgs[j]))])
			}
		}
	}
	c := s.Counters()
	if c.DatagramsSent != uint64(len(msgs)) || c.BytesSent != total || c.SendErrors != 0 {
		t.Fatalf("sent %d datagrams, %d bytes, %d errors; want %d, %d, 0", c.DatagramsSent, c.BytesSent, c.SendErrors, len(msgs), total)
	}
	if c.SegmentationRefused == 0 && c.SegmentedSends == 0 {
		t.Fatal("no segmented message sent, and the kernel did not refuse one")
	}
	t.Logf("%d datagrams in %d segmented messages (refused %d); send calls by size %v", c.DatagramsSent, c.SegmentedSends, c.SegmentationRefused, c.SendBatches)
}

// TestSegmentationRefusedFallsBack: datagrams longer than the route's MTU
// (3,000 bytes over a 1,500-byte veth) cannot go as one segmented
// message; the kernel refuses it, the socket counts that once and sends
// every datagram as itself (fragmented), and the receiver gets them all.
func TestSegmentationRefusedFallsBack(t *testing.T) {
	netns.Require(t)
	lan := netns.NewLAN(t, 2)
	var a, b *UDP
	inHost(t, lan.Hosts[0], func() error {
		var err error
		a, err = ListenUnicast(UnicastConfig{Addr: netip.AddrPortFrom(lan.Hosts[0].Addr, 0)})
		return err
	})
	defer a.Close()
	inHost(t, lan.Hosts[1], func() error {
		var err error
		b, err = ListenUnicast(UnicastConfig{Addr: netip.AddrPortFrom(lan.Hosts[1].Addr, 0), Tuning: Tuning{RecvBufferBytes: 1 << 20}})
		return err
	})
	defer b.Close()
	msgs := make([][]byte, 6)
	for i := range msgs {
		msgs[i] = bytes.Repeat([]byte{byte(i)}, 3000)
	}
	for round := 0; round < 2; round++ {
		if err := a.Send(msgs, b.LocalAddr()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := receiveN(t, b, len(msgs), 4096)
		if len(got) != len(msgs) {
			t.Fatalf("round %d: received %d of %d", round, len(got), len(msgs))
		}
		for i := range msgs {
			if !bytes.Equal(got[i], msgs[i]) {
				t.Fatalf("round %d: datagram %d differs", round, i)
			}
		}
	}
	c := a.Counters()
	if c.SegmentationRefused != 1 || c.SegmentedSends != 0 || c.DatagramsSent != 2*uint64(len(msgs)) || c.SendErrors != 0 {
		t.Fatalf("counters %+v: want segmentation refused once, nothing sent segmented, every datagram sent", c)
	}
}

// TestSegmentedSmallSendBuffer: a socket with a small send buffer sends
// segmented messages of at most a quarter of it (gsoBytes), so a run
// never waits for room it cannot get; every datagram arrives.
func TestSegmentedSmallSendBuffer(t *testing.T) {
	a, b := segmentPair(t, Tuning{SendBufferBytes: 16 << 10})
	if g := a.Report().SendBufferBytesGranted; g <= 0 || g > 64<<10 || a.sys.gso.maxBytes != g/4 {
		t.Fatalf("send buffer granted %d, segmented messages up to %d bytes", g, a.sys.gso.maxBytes)
	}
	msgs := make([][]byte, 200)
	for i := range msgs {
		msgs[i] = bytes.Repeat([]byte{byte(i)}, 1400)
	}
	done := make(chan error, 1)
	go func() { done <- a.Send(msgs, b.LocalAddr()) }()
	got := receiveN(t, b, len(msgs), 2048)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("received %d of %d", len(got), len(msgs))
	}
	if c := a.Counters(); c.SegmentedSends == 0 {
		t.Fatalf("nothing segmented: %+v", c)
	}
}
