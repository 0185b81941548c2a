package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// controlBytes is the per-datagram control buffer: room for IP_PKTINFO
// (12 bytes), SO_RXQ_OVFL (4 bytes) and UDP_GRO (4 bytes) with their
// headers, rounded up.
const controlBytes = 96

// groSlotBytes is one coalesced read's buffer: the largest UDP payload
// (65,507 bytes over IPv4, 65,527 over IPv6), so a run is never cut
// short. groSlots is how many runs one recvmmsg reads at most: a run
// holds up to 64 datagrams of a GSO sender (more from a NIC's GRO), so
// eight of them already fill several passes' buffers.
const (
	groSlotBytes = 1 << 16
	groSlots     = 8
)

// GROBufferBytes is what UDP_GRO costs a receiving socket (Tuning.GRO).
const GROBufferBytes = groSlots * groSlotBytes

// sockaddrBytes holds a sockaddr_in6, the larger of the two families.
const sockaddrBytes = unix.SizeofSockaddrInet6

// udpSys is the Linux part of UDP: the recvmmsg/sendmmsg arrays, allocated
// once with the socket and reused by every call, so neither path allocates.
// These are the same syscalls x/net/ipv4 ReadBatch/WriteBatch make, but
// ReadBatch allocates a *net.UDPAddr per datagram and can only block.
type udpSys struct {
	rx struct {
		hs      [BatchSizeMax]unix.Mmsghdr
		iov     [BatchSizeMax]unix.Iovec
		names   [BatchSizeMax][sockaddrBytes]byte
		control [BatchSizeMax][controlBytes]byte
		// Arguments and results of one call, shared with fn.
		count int
		block bool
		n     int
		errno syscall.Errno
		fn    func(fd uintptr) bool
		// single: read with recvfrom into names[0]; recvfrom copies no
		// msghdr in, so one datagram costs less than recvmmsg with vlen 1.
		single     bool
		singleLen  uint32 // recvfrom's address length in/out
		singleSize int    // recvfrom's result with MSG_TRUNC: the datagram's real size
		// vlen adapts the batch to the arrival pattern; see nextVlen.
		vlen          int
		emptiesBefore int // empty polls since the last read
	}
	tx struct {
		hs      [BatchSizeMax]unix.Mmsghdr
		iov     [BatchSizeMax]unix.Iovec
		name    [sockaddrBytes]byte
		nameLen uint32
		// names: one address per datagram, for SendEach.
		names  [BatchSizeMax][sockaddrBytes]byte
		count  int
		single bool // one datagram: sendto, which copies no msghdr in
		// msgs is the array the next sendmmsg sends: hs, or gso.hs.
		msgs  *[BatchSizeMax]unix.Mmsghdr
		n     int
		errno syscall.Errno
		fn    func(fd uintptr) bool
	}
	// gso: Send's messages that carry several datagrams each, cut by the
	// kernel (UDP_SEGMENT): a run of equal-length datagrams to one address
	// (and one shorter last) crosses the stack once. Their iovecs are
	// tx.iov, one a datagram.
	gso struct {
		hs   [BatchSizeMax]unix.Mmsghdr
		ctl  [BatchSizeMax][gsoControlBytes]byte
		segs [BatchSizeMax]int // datagrams in message j
		// maxBytes bounds a message: gsoMaxBytes, or a quarter of the
		// socket's send buffer when that is less (gsoBytes).
		maxBytes int
		// off: the kernel refused UDP_SEGMENT once (no offload, an old
		// kernel, a datagram past the route's MTU): plain from then on.
		off bool
	}
	// gro: what a receive with UDP_GRO on read and has not handed out
	// (runs that arrived as one message each, cut back into datagrams).
	gro     groRuns
	control bool // IP_PKTINFO, SO_RXQ_OVFL or UDP_GRO is on
}

// groRuns holds the messages one recvmmsg read into buf with UDP_GRO on,
// each a run of datagrams of seg bytes (the last may be shorter), and how
// far Receive has handed them out: message next, from offset off.
type groRuns struct {
	buf         []byte // groSlots × groSlotBytes; nil while UDP_GRO is off
	msgs        [groSlots]groMessage
	count, next int
}

type groMessage struct {
	size, seg, off int
	addr           netip.AddrPort
	reason         DropReason
	truncated      bool
}

// gsoControlBytes holds one UDP_SEGMENT control message (a uint16) with
// its header, aligned, on any platform; gsoControlLen is its length here
// (unix.CmsgSpace(2): 24 on 64-bit Linux, 16 on 32-bit).
const gsoControlBytes = 24

var gsoControlLen = unix.CmsgSpace(2)

// gsoMaxBytes bounds one segmented message: the whole, with its UDP and
// IP headers, must fit an IP datagram's 16-bit length (and a quarter of
// the send buffer: gsoBytes). gsoSegmentsMax is
// the kernel's UDP_MAX_SEGMENTS on every kernel that has UDP_SEGMENT
// (4.18 on; later ones allow 128).
const (
	gsoMaxBytes    = 65000
	gsoSegmentsMax = 64
)

func (s *udpSys) init(multicastReceiver bool) {
	s.control = multicastReceiver
	for i := range s.rx.hs {
		h := &s.rx.hs[i].Hdr
		h.Name = &s.rx.names[i][0]
		h.Iov = &s.rx.iov[i]
		h.Iovlen = 1
		if s.control {
			h.Control = &s.rx.control[i][0]
		}
	}
	for i := range s.tx.hs {
		h := &s.tx.hs[i].Hdr
		h.Name = &s.tx.name[0]
		h.Iov = &s.tx.iov[i]
		h.Iovlen = 1
	}
	for j := range s.gso.hs {
		h := &s.gso.hs[j].Hdr
		h.Name = &s.tx.name[0]
		c := (*unix.Cmsghdr)(unsafe.Pointer(&s.gso.ctl[j][0]))
		c.Level, c.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		c.SetLen(unix.CmsgLen(2))
	}
	s.tx.msgs = &s.tx.hs
	// Method values are made once here; making them per call would allocate.
	s.rx.fn = s.recvmmsg
	s.tx.fn = s.sendmmsg
}

func (s *udpSys) recvmmsg(fd uintptr) bool {
	for {
		var n uintptr
		var errno syscall.Errno
		if s.rx.single {
			s.rx.singleLen = sockaddrBytes
			n, _, errno = unix.Syscall6(unix.SYS_RECVFROM, fd,
				uintptr(unsafe.Pointer(s.rx.iov[0].Base)), uintptr(s.rx.iov[0].Len), unix.MSG_TRUNC,
				uintptr(unsafe.Pointer(&s.rx.names[0][0])), uintptr(unsafe.Pointer(&s.rx.singleLen)))
			if errno == 0 {
				s.rx.singleSize = int(n)
				n = 1
			}
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_RECVMMSG, fd,
				uintptr(unsafe.Pointer(&s.rx.hs[0])), uintptr(s.rx.count), 0, 0, 0)
		}
		if errno == unix.EINTR {
			continue
		}
		if errno == unix.EAGAIN {
			// Blocking: returning false parks on the netpoller until readable.
			s.rx.n, s.rx.errno = 0, 0
			return !s.rx.block
		}
		if errno != 0 {
			s.rx.n, s.rx.errno = 0, errno
			return true
		}
		s.rx.n, s.rx.errno = int(n), 0
		return true
	}
}

func (s *udpSys) sendmmsg(fd uintptr) bool {
	for {
		var n uintptr
		var errno syscall.Errno
		if s.tx.single {
			h := &s.tx.hs[0].Hdr
			n, _, errno = unix.Syscall6(unix.SYS_SENDTO, fd,
				uintptr(unsafe.Pointer(s.tx.iov[0].Base)), uintptr(s.tx.iov[0].Len), 0,
				uintptr(unsafe.Pointer(h.Name)), uintptr(h.Namelen))
			if errno == 0 {
				s.tx.hs[0].Len = uint32(n)
				n = 1
			}
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_SENDMMSG, fd,
				uintptr(unsafe.Pointer(&s.tx.msgs[0])), uintptr(s.tx.count), 0, 0, 0)
		}
		if errno == unix.EINTR {
			continue
		}
		if errno == unix.EAGAIN {
			s.tx.n, s.tx.errno = 0, 0
			return false // socket buffer full: park until writable
		}
		s.tx.n, s.tx.errno = int(n), errno
		if errno != 0 {
			s.tx.n = 0
		}
		return true
	}
}

// receive reads one batch. It returns how many datagrams were read from the
// kernel and how many survived into bufs[:n].
func (s *udpSys) receive(u *UDP, bufs [][]byte, sizes []int, from []netip.AddrPort, block bool) (read, n int, err error) {
	if s.gro.buf != nil {
		return s.receiveRuns(u, bufs, sizes, from, block)
	}
	count := min(len(bufs), max(s.rx.vlen, 1))
	for i := 0; i < count; i++ {
		iov := &s.rx.iov[i]
		if len(bufs[i]) > 0 {
			iov.Base = &bufs[i][0]
		} else {
			iov.Base = nil
		}
		iov.SetLen(len(bufs[i]))
		h := &s.rx.hs[i].Hdr
		h.Namelen = sockaddrBytes
		h.Flags = 0
		if s.control {
			h.SetControllen(controlBytes)
		}
	}
	s.rx.count = count
	s.rx.block = block
	s.rx.single = count == 1 && !s.control
	if err := u.raw.Read(s.rx.fn); err != nil {
		return 0, 0, err
	}
	if s.rx.errno != 0 {
		return 0, 0, fmt.Errorf("bus: recvmmsg: %w", s.rx.errno)
	}
	read = s.rx.n
	s.rx.vlen, s.rx.emptiesBefore = nextVlen(s.rx.vlen, len(bufs), read, s.rx.emptiesBefore)
	if s.rx.single && read == 1 {
		// Fill in what recvmmsg would have reported.
		m := &s.rx.hs[0]
		m.Len = uint32(min(s.rx.singleSize, len(bufs[0])))
		m.Hdr.Namelen = s.rx.singleLen
		if s.rx.singleSize > len(bufs[0]) {
			m.Hdr.Flags = unix.MSG_TRUNC
		}
	}
	var t rxTally
	w := 0
	for r := 0; r < read; r++ {
		m := &s.rx.hs[r]
		addr, reason, _ := s.header(u, r)
		w = deliver(&t, u.filter, bufs, sizes, from, w, r, int(m.Len), m.Hdr.Flags&unix.MSG_TRUNC != 0, addr, reason)
	}
	u.counters.addReceive(&t, read)
	return read, w, nil
}

// header reads what message r of the last recvmmsg says besides its
// bytes: the sender, whether the group check drops it (IP_PKTINFO), and
// UDP_GRO's segment length (0: one datagram); the kernel's overflow count
// (SO_RXQ_OVFL) is taken on the way.
func (s *udpSys) header(u *UDP, r int) (addr netip.AddrPort, reason DropReason, segment int) {
	m := &s.rx.hs[r]
	addr = decodeSockaddr(s.rx.names[r][:min(int(m.Hdr.Namelen), sockaddrBytes)])
	if !s.control {
		return addr, Accept, 0
	}
	info := parseControl(s.rx.control[r][:min(int(m.Hdr.Controllen), controlBytes)])
	if info.hasOverflow {
		u.counters.overflowSeen(uint64(info.overflow))
	}
	if info.hasDestination && u.group.IsValid() && info.destination != u.group.Addr() {
		reason = DropWrongGroup
	}
	return addr, reason, info.segment
}

// receiveRuns is receive with UDP_GRO on. What the last read left is
// handed out first, without a system call; otherwise one recvmmsg reads
// up to groSlots messages into the socket's own buffers, each a run of
// datagrams (or one), and they are handed out, copied into bufs one
// datagram each, until bufs is full. What is left stays for the next
// call (Buffered). The datagrams are counted, checked, filtered and
// dropped as receive's are; read is how many were handed out or dropped.
func (s *udpSys) receiveRuns(u *UDP, bufs [][]byte, sizes []int, from []netip.AddrPort, block bool) (read, n int, err error) {
	g := &s.gro
	var t rxTally
	if g.next < g.count {
		n = g.handOut(&t, u.filter, bufs, sizes, from)
		u.counters.addCarried(&t)
		u.buffered.Store(g.next < g.count)
		return int(t.datagrams), n, nil
	}
	count := min(groSlots, max(s.rx.vlen, 1))
	for i := 0; i < count; i++ {
		iov := &s.rx.iov[i]
		iov.Base = &g.buf[i*groSlotBytes]
		iov.SetLen(groSlotBytes)
		h := &s.rx.hs[i].Hdr
		h.Namelen = sockaddrBytes
		h.Flags = 0
		h.SetControllen(controlBytes)
	}
	s.rx.count, s.rx.block, s.rx.single = count, block, false
	if err := u.raw.Read(s.rx.fn); err != nil {
		return 0, 0, err
	}
	if s.rx.errno != 0 {
		return 0, 0, fmt.Errorf("bus: recvmmsg: %w", s.rx.errno)
	}
	msgs := s.rx.n
	s.rx.vlen, s.rx.emptiesBefore = nextVlen(s.rx.vlen, groSlots, msgs, s.rx.emptiesBefore)
	coalesced := uint64(0)
	for r := 0; r < msgs; r++ {
		m := &s.rx.hs[r]
		addr, reason, segment := s.header(u, r)
		gm := &g.msgs[r]
		*gm = groMessage{size: int(m.Len), seg: int(m.Len), truncated: m.Hdr.Flags&unix.MSG_TRUNC != 0, addr: addr, reason: reason}
		if segment > 0 && segment < gm.size {
			gm.seg = segment
			coalesced++
		}
	}
	g.count, g.next = msgs, 0
	n = g.handOut(&t, u.filter, bufs, sizes, from)
	u.counters.addReceive(&t, int(t.datagrams))
	if coalesced > 0 {
		u.counters.coalescedReceives.Add(coalesced)
	}
	u.buffered.Store(g.next < g.count)
	return int(t.datagrams), n, nil
}

// handOut cuts the runs read into datagrams, from where the last call
// stopped, and delivers them into bufs until it is full or the runs are
// done; it returns how many it delivered. A datagram longer than its
// buffer is dropped as a truncation, as a plain read drops it; a message
// the kernel cut short (longer than a slot, which no UDP payload is) is
// one truncation.
func (g *groRuns) handOut(t *rxTally, filter Filter, bufs [][]byte, sizes []int, from []netip.AddrPort) int {
	w := 0
	for g.next < g.count && w < len(bufs) {
		m := &g.msgs[g.next]
		if m.truncated {
			w = deliver(t, filter, bufs, sizes, from, w, w, m.size, true, m.addr, m.reason)
			g.next++
			continue
		}
		at := g.next*groSlotBytes + m.off
		size := min(m.seg, m.size-m.off)
		short := size > len(bufs[w])
		if !short {
			copy(bufs[w], g.buf[at:at+size])
		}
		w = deliver(t, filter, bufs, sizes, from, w, w, size, short, m.addr, m.reason)
		m.off += size
		if m.off >= m.size {
			g.next++
		}
	}
	return w
}

// nextVlen adapts how many datagrams the next recvmmsg asks for. Asking
// for more than are queued is not free: after the first datagram the kernel
// copies in and tries the next msghdr before it gives up. So the batch
// shrinks to what the last read found, and doubles (up to capacity) only
// when a read filled it with no empty poll before it, i.e. a backlog. A
// ping-pong settles at 1 (and recvfrom); a stream grows to the full batch
// in log2(BatchSizeMax) reads.
func nextVlen(vlen, capacity, read, emptiesBefore int) (next, empties int) {
	if vlen < 1 || vlen > capacity {
		vlen = capacity
	}
	switch {
	case read == 0:
		return vlen, emptiesBefore + 1
	case read < vlen:
		return read, 0
	case emptiesBefore == 0:
		return min(2*vlen, capacity), 0
	}
	return vlen, 0
}

// setTxBuf points datagram i of the next sendmmsg at b.
func (s *udpSys) setTxBuf(i int, b []byte) {
	iov := &s.tx.iov[i]
	if len(b) > 0 {
		iov.Base = &b[0]
	} else {
		iov.Base = nil
	}
	iov.SetLen(len(b))
}

// send writes bufs to `to`, looping over partial batches.
func (s *udpSys) send(u *UDP, bufs [][]byte, to netip.AddrPort) error {
	s.tx.nameLen = encodeSockaddr(&s.tx.name, to, u.is4)
	zeroProgress := 0
	for off := 0; off < len(bufs); {
		if !s.gso.off && len(bufs)-off > 1 {
			sent, err := s.writeSegmented(u, bufs[off:], &zeroProgress)
			switch {
			case err == nil:
				off += sent
				continue
			case !gsoRefused(err):
				return fmt.Errorf("bus: sendmmsg to %v: %w", to, err)
			}
			s.gso.off = true // and send them plainly below
			u.counters.gsoRefused.Add(1)
		}
		count := min(len(bufs)-off, BatchSizeMax)
		s.tx.single = count == 1
		for i := 0; i < count; i++ {
			s.setTxBuf(i, bufs[off+i])
			s.tx.hs[i].Hdr.Name = &s.tx.name[0]
			s.tx.hs[i].Hdr.Namelen = s.tx.nameLen
		}
		sent, err := s.write(u, count, &zeroProgress)
		if err != nil {
			return fmt.Errorf("bus: sendmmsg to %v: %w", to, err)
		}
		off += sent
	}
	return nil
}

// write sends the count datagrams set up in tx with one sendmmsg (or
// sendto) and counts them; it returns how many the kernel took.
func (s *udpSys) write(u *UDP, count int, zeroProgress *int) (int, error) {
	sent, err := s.call(u, &s.tx.hs, count, zeroProgress)
	if sent == 0 {
		return 0, err
	}
	var bytes uint64
	for i := 0; i < sent; i++ {
		bytes += uint64(s.tx.hs[i].Len)
	}
	u.counters.addSend(uint64(sent), bytes)
	if sent < count {
		u.counters.shortSends.Add(1)
	}
	return sent, nil
}

// call makes one sendmmsg (or sendto) of the first count messages of
// msgs and returns how many the kernel took; a call that took none counts
// against zeroProgress, errNoProgress at sendZeroProgressMax in a row.
func (s *udpSys) call(u *UDP, msgs *[BatchSizeMax]unix.Mmsghdr, count int, zeroProgress *int) (int, error) {
	s.tx.count, s.tx.msgs = count, msgs
	if err := u.raw.Write(s.tx.fn); err != nil {
		return 0, err
	}
	if s.tx.errno != 0 {
		return 0, s.tx.errno
	}
	if s.tx.n == 0 {
		*zeroProgress++
		if *zeroProgress >= sendZeroProgressMax {
			return 0, errNoProgress
		}
		return 0, nil
	}
	*zeroProgress = 0
	return s.tx.n, nil
}

// writeSegmented sends the front of bufs (at most BatchSizeMax
// datagrams) with one sendmmsg of segmented messages: each takes a run of
// datagrams of one length, and a shorter one after them, up to
// gsoSegmentsMax and gsoMaxBytes; a datagram alone goes as itself. The
// receiver reads the same datagrams either way. It returns how many
// datagrams the kernel took.
func (s *udpSys) writeSegmented(u *UDP, bufs [][]byte, zeroProgress *int) (int, error) {
	m, d := 0, 0
	for d < len(bufs) && d < BatchSizeMax {
		size, k := len(bufs[d]), 1
		for total := size; size > 0 && d+k < len(bufs) && d+k < BatchSizeMax && k < gsoSegmentsMax; k++ {
			next := len(bufs[d+k])
			if next > size || next == 0 || total+next > s.gso.maxBytes {
				break
			}
			total += next
			if next < size {
				k++ // a shorter datagram ends the message
				break
			}
		}
		for i := d; i < d+k; i++ {
			s.setTxBuf(i, bufs[i])
		}
		h := &s.gso.hs[m].Hdr
		h.Namelen = s.tx.nameLen
		h.Iov = &s.tx.iov[d]
		h.SetIovlen(k)
		if k > 1 {
			*(*uint16)(unsafe.Pointer(&s.gso.ctl[m][unix.CmsgLen(0)])) = uint16(size)
			h.Control = &s.gso.ctl[m][0]
			h.SetControllen(gsoControlLen)
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
		s.gso.segs[m] = k
		d += k
		m++
	}
	s.tx.single = false
	msgs, err := s.call(u, &s.gso.hs, m, zeroProgress)
	if msgs == 0 {
		return 0, err
	}
	sent, segmented := 0, uint64(0)
	var bytes uint64
	for j := 0; j < msgs; j++ {
		sent += s.gso.segs[j]
		bytes += uint64(s.gso.hs[j].Len)
		if s.gso.segs[j] > 1 {
			segmented++
		}
	}
	u.counters.addSend(uint64(sent), bytes)
	u.counters.gsoMessages.Add(segmented)
	if msgs < m {
		u.counters.shortSends.Add(1)
	}
	return sent, nil
}

// gsoBytes is the largest segmented message a socket whose send buffer
// holds sndbuf bytes sends: a message must fit the buffer whole, so one
// far past a small buffer (a user's --send-buffer) could wait forever for
// room. A quarter leaves room for the others under way.
func gsoBytes(sndbuf int) int {
	if sndbuf <= 0 {
		return gsoMaxBytes
	}
	return min(gsoMaxBytes, sndbuf/4)
}

// gsoRefused reports whether a sendmmsg of segmented messages failed
// because the kernel will not segment for this socket: no UDP_SEGMENT
// (before Linux 4.18), no checksum offload on the route's device, or a
// datagram longer than the route's MTU allows unfragmented.
func gsoRefused(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOPROTOOPT) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EMSGSIZE)
}

// sendEach writes bufs[i] to to[i] (addresses already checked and
// unmapped), one sendmmsg per BatchSizeMax datagrams.
func (s *udpSys) sendEach(u *UDP, bufs [][]byte, to []netip.AddrPort) error {
	zeroProgress := 0
	for off := 0; off < len(bufs); {
		count := min(len(bufs)-off, BatchSizeMax)
		s.tx.single = count == 1
		for i := 0; i < count; i++ {
			s.setTxBuf(i, bufs[off+i])
			h := &s.tx.hs[i].Hdr
			h.Name = &s.tx.names[i][0]
			h.Namelen = encodeSockaddr(&s.tx.names[i], to[off+i], u.is4)
		}
		sent, err := s.write(u, count, &zeroProgress)
		if err != nil {
			return fmt.Errorf("bus: sendmmsg to %v: %w", to[off], err)
		}
		off += sent
	}
	return nil
}

// encodeSockaddr writes to as a sockaddr_in (is4) or sockaddr_in6 and
// returns its length.
func encodeSockaddr(b *[sockaddrBytes]byte, to netip.AddrPort, is4 bool) uint32 {
	*b = [sockaddrBytes]byte{}
	binary.BigEndian.PutUint16(b[2:4], to.Port())
	if is4 {
		binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
		a := to.Addr().As4()
		copy(b[4:8], a[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET6)
	a := to.Addr().As16()
	copy(b[8:24], a[:])
	return unix.SizeofSockaddrInet6
}

// decodeSockaddr reads a sockaddr_in or sockaddr_in6 the kernel wrote. It
// returns the zero AddrPort for anything it does not recognise.
func decodeSockaddr(b []byte) netip.AddrPort {
	if len(b) < 2 {
		return netip.AddrPort{}
	}
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		if len(b) < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), binary.BigEndian.Uint16(b[2:4]))
	}
	return netip.AddrPort{}
}

// controlInfo is what Receive reads from a datagram's control messages.
type controlInfo struct {
	destination netip.Addr // IP_PKTINFO ipi_addr: the header destination
	overflow    uint32     // SO_RXQ_OVFL: the socket's cumulative drops
	// segment: UDP_GRO's gso_size, the length of each datagram of a
	// coalesced run but the last (0: the message is one datagram).
	segment        int
	hasDestination bool
	hasOverflow    bool
}

// parseControl walks a control buffer the kernel filled without allocating.
// It never reads outside b, whatever the lengths inside claim.
func parseControl(b []byte) controlInfo {
	var info controlInfo
	headerBytes := unix.SizeofCmsghdr
	for len(b) >= headerBytes {
		var length uint64
		if unix.SizeofPtr == 8 {
			length = binary.NativeEndian.Uint64(b[0:8])
		} else {
			length = uint64(binary.NativeEndian.Uint32(b[0:4]))
		}
		level := int32(binary.NativeEndian.Uint32(b[headerBytes-8 : headerBytes-4]))
		kind := int32(binary.NativeEndian.Uint32(b[headerBytes-4 : headerBytes]))
		if length < uint64(headerBytes) || length > uint64(len(b)) {
			return info
		}
		data := b[headerBytes:length]
		switch {
		case level == unix.IPPROTO_IP && kind == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo { int ifindex; in_addr spec_dst; in_addr addr; }
			info.destination = netip.AddrFrom4([4]byte(data[8:12]))
			info.hasDestination = true
		case level == unix.SOL_SOCKET && kind == unix.SO_RXQ_OVFL && len(data) >= 4:
			info.overflow = binary.NativeEndian.Uint32(data[0:4])
			info.hasOverflow = true
		case level == unix.IPPROTO_UDP && kind == unix.UDP_GRO && len(data) >= 4:
			info.segment = int(int32(binary.NativeEndian.Uint32(data[0:4])))
		}
		next := cmsgAlign(length)
		if next >= uint64(len(b)) {
			return info
		}
		b = b[next:]
	}
	return info
}

func cmsgAlign(n uint64) uint64 {
	const align = unix.SizeofPtr
	return (n + align - 1) &^ (align - 1)
}

// controlBeforeBind sets the options that must precede bind.
func controlBeforeBind(c syscall.RawConn, opts socketOptions, report *Report) error {
	var err error
	cerr := c.Control(func(fd uintptr) {
		if opts.reuse {
			if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
				err = fmt.Errorf("bus: SO_REUSEADDR: %w", err)
				return
			}
			if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
				err = fmt.Errorf("bus: SO_REUSEPORT: %w", err)
				return
			}
		}
		if opts.multicastReceiver {
			// Without this a socket bound to the port would also receive
			// groups joined by other sockets on the host.
			if err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); err != nil {
				err = fmt.Errorf("bus: IP_MULTICAST_ALL: %w", err)
				return
			}
			if err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1); err != nil {
				err = fmt.Errorf("bus: IP_PKTINFO: %w", err)
				return
			}
			if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); err != nil {
				err = fmt.Errorf("bus: SO_RXQ_OVFL: %w", err)
				return
			}
		}
		if opts.sendOnly {
			// Report the kernel's drops with the datagrams a drain reads.
			if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); err != nil {
				err = fmt.Errorf("bus: SO_RXQ_OVFL: %w", err)
				return
			}
		}
		if opts.bindDevice != "" {
			// Best effort: IP_MULTICAST_IF already pins multicast; this pins
			// unicast sent from the same socket too.
			report.BindToDeviceErr = unix.BindToDevice(int(fd), opts.bindDevice)
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// tune applies Tuning after bind and records what the kernel granted.
func (u *UDP) tune(t Tuning, opts socketOptions) error {
	r := &u.report
	if opts.sendOnly {
		t.RecvBufferBytes = 0
	}
	r.RecvBufferBytesRequested = t.RecvBufferBytes
	r.SendBufferBytesRequested = t.SendBufferBytes
	return u.raw.Control(func(fd uintptr) {
		f := int(fd)
		if opts.sendOnly {
			// SO_RCVBUF 0 is raised to the kernel's floor (SOCK_MIN_RCVBUF,
			// a few datagrams): shutdown(SHUT_RD) would not help, an
			// unconnected UDP socket refuses it (ENOTCONN) and queues anyway.
			_ = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUF, 0)
		} else if t.RecvBufferBytes > 0 {
			if unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, t.RecvBufferBytes) != nil {
				_ = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUF, t.RecvBufferBytes)
			}
		}
		if t.SendBufferBytes > 0 {
			if unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, t.SendBufferBytes) != nil {
				_ = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_SNDBUF, t.SendBufferBytes)
			}
		}
		r.RecvBufferBytesGranted, _ = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUF)
		r.SendBufferBytesGranted, _ = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_SNDBUF)
		u.sys.gso.maxBytes = gsoBytes(r.SendBufferBytesGranted)
		if t.BusyPollUs > 0 {
			r.BusyPollErr = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_BUSY_POLL, t.BusyPollUs)
		}
		r.BusyPollUs, _ = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_BUSY_POLL)
		if t.GRO && !opts.sendOnly {
			// Before any datagram can queue as a run: a run queued before
			// would be cut into datagrams by the kernel, which is harmless.
			if r.GROErr = unix.SetsockoptInt(f, unix.IPPROTO_UDP, unix.UDP_GRO, 1); r.GROErr == nil {
				r.GRO = true
				u.sys.gro.buf = make([]byte, GROBufferBytes)
			}
		}
		if t.PreferBusyPoll {
			r.PreferBusyPollErr = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1)
		}
		if t.BusyPollBudget > 0 {
			r.BusyPollBudgetErr = unix.SetsockoptInt(f, unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET, t.BusyPollBudget)
		}
	})
}
