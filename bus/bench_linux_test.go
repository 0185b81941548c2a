//go:build linux

package bus

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Benchmarks run on 127.0.0.1 in the host namespace: they only ever send to
// loopback.

func benchPair(b *testing.B) (*UDP, *UDP) {
	b.Helper()
	a, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := ListenUnicast(UnicastConfig{Tuning: Tuning{RecvBufferBytes: 4 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(); c.Close() })
	return a, c
}

func frames32(count int) [][]byte {
	out := make([][]byte, count)
	for i := range out {
		out[i] = make([]byte, 32)
	}
	return out
}

// BenchmarkSendBatch: one sendmmsg of 64 × 32 bytes (the receiver never
// reads; loopback drops what does not fit, the sender never blocks).
func BenchmarkSendBatch(b *testing.B) {
	a, c := benchPair(b)
	msgs := frames32(BatchSizeMax)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(msgs, c.LocalAddr()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*BatchSizeMax)/b.Elapsed().Seconds(), "datagrams/s")
}

// BenchmarkSendReceiveBatch: one batch of 64 × 32 bytes sent and received.
func BenchmarkSendReceiveBatch(b *testing.B) {
	a, c := benchPair(b)
	msgs := frames32(BatchSizeMax)
	rb := newBatch(BatchSizeMax, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(msgs, c.LocalAddr()); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < BatchSizeMax; {
			n, err := c.Receive(rb.bufs, rb.sizes, rb.from, 0)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
}

// BenchmarkPollEmpty: the cost of one empty non-blocking recvmmsg, the unit
// a spinning receiver pays while idle.
func BenchmarkPollEmpty(b *testing.B) {
	_, c := benchPair(b)
	rb := newBatch(BatchSizeMax, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Receive(rb.bufs, rb.sizes, rb.from, 0)
	}
}

// rtt records round trips and reports HDR percentiles.
type rtt struct{ h *hdrhistogram.Histogram }

func newRTT() rtt { return rtt{hdrhistogram.New(100, int64(time.Second), 3)} }

func (r rtt) record(d time.Duration) { _ = r.h.RecordValue(int64(d)) }

func (r rtt) report(b *testing.B) {
	b.ReportMetric(float64(r.h.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(r.h.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(r.h.ValueAtQuantile(99.9)), "p999-ns")
	b.ReportMetric(float64(r.h.Max()), "max-ns")
	b.ReportMetric(0, "ns/op") // the percentiles are the result
}

const pingWarmup = 500

// benchBackoffSpins are the back-off spin budgets compared to pick the default.
var benchBackoffSpins = []int{20, 500}

// BenchmarkPingPong: round trip of a 32-byte frame over loopback, for plain
// net.UDPConn, a raw spinning syscall pair, and the bus with each idle
// strategy (both ends use the same strategy).
func BenchmarkPingPong(b *testing.B) {
	b.Run("udpconn", benchPingPongUDPConn)
	b.Run("raw-spin", benchPingPongRawSpin)
	for _, kind := range []IdleKind{IdleBusySpin, IdleYield, IdleBackoff, IdleBlock} {
		b.Run("bus-"+kind.String(), func(b *testing.B) { benchPingPongBus(b, Idle{Kind: kind}) })
	}
	for _, spins := range benchBackoffSpins {
		b.Run(fmt.Sprintf("bus-backoff-spins-%d", spins), func(b *testing.B) {
			benchPingPongBus(b, Idle{Kind: IdleBackoff, Spins: spins})
		})
	}
}

func benchPingPongBus(b *testing.B, idle Idle) {
	a, c := benchPair(b)
	echo, err := StartLoop(c, LoopConfig{Idle: idle, BatchSize: 8, DatagramBytes: 64},
		func(bufs [][]byte, sizes []int, from []netip.AddrPort) {
			for i := range sizes {
				c.Send(bufs[i : i+1][:1:1], from[i]) // one reply per ping
				_ = sizes
			}
		})
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Stop()
	if idle.spinning() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	ping := frames32(1)
	rb := newBatch(8, 64)
	to := c.LocalAddr()
	h := newRTT()
	roundTrip := func() time.Duration {
		start := time.Now()
		if err := a.Send(ping, to); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := idle.Receive(a, rb.bufs, rb.sizes, rb.from)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				return time.Since(start)
			}
		}
	}
	for i := 0; i < pingWarmup; i++ {
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.record(roundTrip())
	}
	b.StopTimer()
	h.report(b)
}

func benchPingPongUDPConn(b *testing.B) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	a, err := net.ListenUDP("udp4", lo)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c, err := net.ListenUDP("udp4", lo)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	defer func() { c.Close(); <-done }()
	to := c.LocalAddr().(*net.UDPAddr).AddrPort()
	ping := make([]byte, 32)
	buf := make([]byte, 64)
	h := newRTT()
	roundTrip := func() time.Duration {
		start := time.Now()
		if _, err := a.WriteToUDPAddrPort(ping, to); err != nil {
			b.Fatal(err)
		}
		if _, _, err := a.ReadFromUDPAddrPort(buf); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := 0; i < pingWarmup; i++ {
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.record(roundTrip())
	}
	b.StopTimer()
	h.report(b)
}

// rawFD returns the socket's descriptor; valid while the conn is open.
func rawFD(b *testing.B, c *net.UDPConn) uintptr {
	raw, err := c.SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	var fd uintptr
	raw.Control(func(f uintptr) { fd = f })
	return fd
}

// rawRecv is a non-blocking recvfrom into preallocated memory.
func rawRecv(fd uintptr, buf []byte, sa *[sockaddrBytes]byte, saLen *uint32) int {
	*saLen = sockaddrBytes
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&sa[0])), uintptr(unsafe.Pointer(saLen)))
	if errno != 0 {
		return -1
	}
	return int(n)
}

func rawSend(fd uintptr, buf []byte, sa *[sockaddrBytes]byte, saLen uint32) {
	unix.Syscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		0, uintptr(unsafe.Pointer(&sa[0])), uintptr(saLen))
}

// benchPingPongRawSpin is the floor: both ends spin on a raw non-blocking
// recvfrom on locked OS threads, with nothing of the bus in the way.
func benchPingPongRawSpin(b *testing.B) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	a, err := net.ListenUDP("udp4", lo)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c, err := net.ListenUDP("udp4", lo)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	afd, cfd := rawFD(b, a), rawFD(b, c)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 64)
		var sa [sockaddrBytes]byte
		var saLen uint32
		for !stop.Load() {
			if n := rawRecv(cfd, buf, &sa, &saLen); n > 0 {
				rawSend(cfd, buf[:n], &sa, saLen)
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var to [sockaddrBytes]byte
	toLen := encodeSockaddr(&to, c.LocalAddr().(*net.UDPAddr).AddrPort(), true)
	ping := make([]byte, 32)
	buf := make([]byte, 64)
	var sa [sockaddrBytes]byte
	var saLen uint32
	h := newRTT()
	roundTrip := func() time.Duration {
		start := time.Now()
		rawSend(afd, ping, &to, toLen)
		for rawRecv(afd, buf, &sa, &saLen) < 0 {
		}
		return time.Since(start)
	}
	for i := 0; i < pingWarmup; i++ {
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.record(roundTrip())
	}
	b.StopTimer()
	h.report(b)
}

// BenchmarkThroughput: one-way 32-byte messages, sender-side rate, with a
// receiver draining through a Loop; recv-% is the share that arrived.
func BenchmarkThroughput(b *testing.B) {
	const packed = 40 // 32-byte messages per DATA frame (1280 bytes + header)
	cases := []struct {
		name              string
		datagramsPerSend  int
		messagesPerFrame  int
		frameBytes        int
		receiverBatchSize int
	}{
		{"one-datagram-per-message", 1, 1, 32, BatchSizeMax},
		{"sendmmsg-64-datagrams", BatchSizeMax, 1, 32, BatchSizeMax},
		{"sendmmsg-64-frames-of-40", BatchSizeMax, packed, 16 + packed*32, BatchSizeMax},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			a, c := benchPair(b)
			var frames atomic.Uint64
			loop, err := StartLoop(c, LoopConfig{BatchSize: tc.receiverBatchSize, DatagramBytes: 2048},
				func(_ [][]byte, sizes []int, _ []netip.AddrPort) { frames.Add(uint64(len(sizes))) })
			if err != nil {
				b.Fatal(err)
			}
			defer loop.Stop()
			bufs := make([][]byte, tc.datagramsPerSend)
			for i := range bufs {
				bufs[i] = make([]byte, tc.frameBytes)
			}
			perSend := tc.datagramsPerSend * tc.messagesPerFrame
			to := c.LocalAddr()
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for sent < b.N {
				if err := a.Send(bufs, to); err != nil {
					b.Fatal(err)
				}
				sent += perSend
			}
			b.StopTimer()
			elapsed := b.Elapsed().Seconds()
			// Let the receiver finish what is queued (bounded).
			for wait := 0; wait < 100 && frames.Load()*uint64(tc.messagesPerFrame) < uint64(sent); wait++ {
				time.Sleep(time.Millisecond)
			}
			b.ReportMetric(float64(sent)/elapsed, "msgs/s")
			b.ReportMetric(100*float64(frames.Load()*uint64(tc.messagesPerFrame))/float64(sent), "recv-%")
		})
	}
}

// BenchmarkPingPongSpinAB compares the bus's spinning receive with a raw
// spinning recvfrom on the same sockets and threads, alternating blocks of
// round trips, so load from other processes hits both sides alike. It
// reports each side's percentiles and bus/raw ratios.
var abBatch = 8

func BenchmarkPingPongSpinAB(b *testing.B) {
	const block = 200
	a, c := benchPair(b)
	afd, cfd := rawFD(b, a.conn), rawFD(b, c.conn)
	var useBus, stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		rb := newBatch(abBatch, 64)
		var sa [sockaddrBytes]byte
		var saLen uint32
		for !stop.Load() {
			if useBus.Load() {
				n, err := c.Receive(rb.bufs, rb.sizes, rb.from, 0)
				if err != nil {
					return
				}
				for i := 0; i < n; i++ {
					c.Send(rb.bufs[i:i+1], rb.from[i])
				}
				continue
			}
			if n := rawRecv(cfd, rb.bufs[0], &sa, &saLen); n > 0 {
				rawSend(cfd, rb.bufs[0][:n], &sa, saLen)
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	ping := frames32(1)
	rb := newBatch(abBatch, 64)
	var to [sockaddrBytes]byte
	toLen := encodeSockaddr(&to, c.LocalAddr(), true)
	var sa [sockaddrBytes]byte
	var saLen uint32
	rawTrip := func() time.Duration {
		start := time.Now()
		rawSend(afd, ping[0], &to, toLen)
		for rawRecv(afd, rb.bufs[0], &sa, &saLen) < 0 {
		}
		return time.Since(start)
	}
	busTrip := func() time.Duration {
		start := time.Now()
		if err := a.Send(ping, c.LocalAddr()); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := a.Receive(rb.bufs, rb.sizes, rb.from, 0)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				return time.Since(start)
			}
		}
	}
	raw, bus := newRTT(), newRTT()
	for i := 0; i < pingWarmup; i++ {
		rawTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		n := min(block, b.N-i)
		useBus.Store(false)
		for k := 0; k < n; k++ {
			raw.record(rawTrip())
		}
		useBus.Store(true)
		for k := 0; k < n; k++ {
			bus.record(busTrip())
		}
		i += n
	}
	b.StopTimer()
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 50}, {"p99", 99}, {"p999", 99.9}} {
		r, s := raw.h.ValueAtQuantile(q.q), bus.h.ValueAtQuantile(q.q)
		b.ReportMetric(float64(r), "raw-"+q.name+"-ns")
		b.ReportMetric(float64(s), "bus-"+q.name+"-ns")
		b.ReportMetric(float64(s)/float64(r), q.name+"-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPollEmptyRaw: one empty non-blocking recvfrom, for comparison
// with BenchmarkPollEmpty.
func BenchmarkPollEmptyRaw(b *testing.B) {
	_, c := benchPair(b)
	fd := rawFD(b, c.conn)
	buf := make([]byte, 64)
	var sa [sockaddrBytes]byte
	var saLen uint32
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rawRecv(fd, buf, &sa, &saLen)
	}
}

var oneBatch = 8

// BenchmarkSendReceiveOne: one 32-byte datagram sent and received with a
// batch of 8 buffers, the shape of a ping-pong hop.
func BenchmarkSendReceiveOne(b *testing.B) {
	a, c := benchPair(b)
	msg := frames32(1)
	rb := newBatch(oneBatch, 64)
	to := c.LocalAddr()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(msg, to); err != nil {
			b.Fatal(err)
		}
		for {
			n, err := c.Receive(rb.bufs, rb.sizes, rb.from, 0)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				break
			}
		}
	}
}

// BenchmarkSendReceiveOneRaw is BenchmarkSendReceiveOne with sendto and
// recvfrom, the floor.
func BenchmarkSendReceiveOneRaw(b *testing.B) {
	a, c := benchPair(b)
	afd, cfd := rawFD(b, a.conn), rawFD(b, c.conn)
	var to [sockaddrBytes]byte
	toLen := encodeSockaddr(&to, c.LocalAddr(), true)
	msg := make([]byte, 32)
	buf := make([]byte, 64)
	var sa [sockaddrBytes]byte
	var saLen uint32
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rawSend(afd, msg, &to, toLen)
		for rawRecv(cfd, buf, &sa, &saLen) < 0 {
		}
	}
}
