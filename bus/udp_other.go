//go:build !linux

package bus

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

// udpSys is the portable fallback: x/net/ipv4 ReadBatch/WriteBatch, which
// move one datagram per call off Linux and allocate an address per datagram.
// Polls use an expired read deadline. No SO_REUSEPORT, no busy polling, no
// wrong-group check (the socket is bound to the group address instead).
type udpSys struct {
	p   *ipv4.PacketConn
	rx  [BatchSizeMax]ipv4.Message
	tx  [BatchSizeMax]ipv4.Message
	one [BatchSizeMax][1][]byte
	two [BatchSizeMax][1][]byte
}

func (s *udpSys) init(bool) {}

func (s *udpSys) receive(u *UDP, bufs [][]byte, sizes []int, from []netip.AddrPort, block bool) (read, n int, err error) {
	if s.p == nil {
		s.p = ipv4.NewPacketConn(u.conn)
	}
	if !block {
		if err := u.conn.SetReadDeadline(time.Unix(1, 0)); err != nil {
			return 0, 0, err
		}
		u.deadlineSet = true
	}
	ms := s.rx[:len(bufs)]
	for i := range ms {
		s.one[i][0] = bufs[i]
		ms[i].Buffers = s.one[i][:]
	}
	read, err = s.p.ReadBatch(ms, 0)
	if err != nil {
		if !block && errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	var t rxTally
	w := 0
	for r := 0; r < read; r++ {
		var addr netip.AddrPort
		if ua, ok := ms[r].Addr.(*net.UDPAddr); ok {
			addr = ua.AddrPort()
		}
		truncated := msgTrunc != 0 && ms[r].Flags&msgTrunc != 0
		w = deliver(&t, u.filter, bufs, sizes, from, w, r, ms[r].N, truncated, addr, Accept)
	}
	u.counters.addReceive(&t, read)
	return read, w, nil
}

func (s *udpSys) send(u *UDP, bufs [][]byte, to netip.AddrPort) error {
	if s.p == nil {
		s.p = ipv4.NewPacketConn(u.conn)
	}
	dst := net.UDPAddrFromAddrPort(to)
	zeroProgress := 0
	for off := 0; off < len(bufs); {
		count := min(len(bufs)-off, BatchSizeMax)
		ms := s.tx[:count]
		for i := range ms {
			s.two[i][0] = bufs[off+i]
			ms[i].Buffers = s.two[i][:]
			ms[i].Addr = dst
		}
		sent, err := s.p.WriteBatch(ms, 0)
		if err != nil {
			return fmt.Errorf("bus: write batch to %v: %w", to, err)
		}
		if sent == 0 {
			zeroProgress++
			if zeroProgress >= sendZeroProgressMax {
				return errNoProgress
			}
			continue
		}
		zeroProgress = 0
		var bytes uint64
		for i := 0; i < sent; i++ {
			bytes += uint64(ms[i].N)
		}
		u.counters.addSend(uint64(sent), bytes)
		if sent < count {
			u.counters.shortSends.Add(1)
		}
		off += sent
	}
	return nil
}

func controlBeforeBind(syscall.RawConn, socketOptions, *Report) error { return nil }

func (u *UDP) tune(t Tuning, opts socketOptions) error {
	r := &u.report
	if opts.sendOnly {
		t.RecvBufferBytes = 0
	}
	r.RecvBufferBytesRequested = t.RecvBufferBytes
	r.SendBufferBytesRequested = t.SendBufferBytes
	if opts.sendOnly {
		_ = u.conn.SetReadBuffer(1) // raised to the platform's floor
	} else if t.RecvBufferBytes > 0 {
		_ = u.conn.SetReadBuffer(t.RecvBufferBytes)
	}
	if t.SendBufferBytes > 0 {
		_ = u.conn.SetWriteBuffer(t.SendBufferBytes)
	}
	if t.BusyPollUs > 0 {
		r.BusyPollErr = ErrUnsupported
	}
	if t.PreferBusyPoll {
		r.PreferBusyPollErr = ErrUnsupported
	}
	if t.BusyPollBudget > 0 {
		r.BusyPollBudgetErr = ErrUnsupported
	}
	return nil
}

// sendEach sends one datagram at a time elsewhere than Linux.
func (s *udpSys) sendEach(u *UDP, bufs [][]byte, to []netip.AddrPort) error {
	for i := range bufs {
		if err := s.send(u, bufs[i:i+1], to[i]); err != nil {
			return err
		}
	}
	return nil
}
