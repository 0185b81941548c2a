package bus

import (
	"io"
	"net/netip"
	"strconv"
	"time"
)

// Implementation limits (not protocol constants).
const (
	// BatchSizeMax is the most datagrams one Receive or Send call moves,
	// and the size of the preallocated recvmmsg/sendmmsg arrays. Receive
	// reads at most min(len(bufs), BatchSizeMax) datagrams; Send loops over
	// larger inputs in chunks of BatchSizeMax. 64 × 1500 bytes fits easily in
	// a socket buffer, and beyond ~32 the per-syscall saving is already gone.
	BatchSizeMax = 64

	// BatchSizeDefault is the batch a Loop reads when its config says 0.
	BatchSizeDefault = 32

	// DatagramBytesDefault is the buffer a Loop allocates per datagram when
	// its config says 0: one Ethernet MTU of payload with room to spare.
	DatagramBytesDefault = 2048

	// WaitForever, passed as Receive's wait, blocks until a datagram
	// arrives or the connection is closed.
	WaitForever time.Duration = -1
)

// RecvBufferBytes is the size of each receive buffer of a member or
// client that sends datagrams of datagramBytes (the MAC tag inside
// them): never less than DatagramBytesDefault, so a peer with a smaller
// size still reads the default size's datagrams whole.
func RecvBufferBytes(datagramBytes int) int { return max(DatagramBytesDefault, datagramBytes) }

// Receiver reads datagrams in batches into buffers the caller owns.
type Receiver interface {
	// Receive fills bufs[i][:sizes[i]] with datagram i and from[i] with its
	// sender, for i < n, and returns n. It reads at most
	// min(len(bufs), len(sizes), len(from), BatchSizeMax) datagrams and
	// never allocates on Linux.
	//
	// wait selects the mode: 0 polls without blocking; a positive duration
	// parks (on the netpoller) for at most that long; WaitForever parks until
	// a datagram arrives. When nothing arrives in time, or every datagram in
	// the batch was dropped (filter, truncation), it returns 0, nil.
	//
	// Datagrams longer than their buffer are dropped and counted as
	// truncations, never delivered cut short. After Close it returns
	// ErrClosed. Concurrent calls are serialised.
	Receive(bufs [][]byte, sizes []int, from []netip.AddrPort, wait time.Duration) (n int, err error)
}

// Sender writes datagrams in batches.
type Sender interface {
	// Send writes every bufs[i] as one datagram to `to`, in order, looping
	// over partial batch writes until all are sent; when the socket buffer is
	// full it parks until writable. It returns the first error; datagrams
	// from the failing one on are not sent. Concurrent calls are serialised.
	Send(bufs [][]byte, to netip.AddrPort) error
}

// Conn is one datagram endpoint: a UDP socket or an in-memory port.
type Conn interface {
	Receiver
	Sender
	io.Closer
}

// CounterReader is the optional ability to report counters.
type CounterReader interface {
	// Counters returns a snapshot; each field is read atomically, the
	// struct as a whole is not one instant.
	Counters() Counters
}

// DropReason says why a datagram was dropped on receive. Zero accepts.
type DropReason uint8

// Drop reasons. A Filter may return its own reasons up to DropReasonsMax-1;
// anything larger is counted as DropOther.
const (
	Accept            DropReason = 0
	DropWrongGroup    DropReason = 1 // destination is not the joined group
	DropBadHeader     DropReason = 2 // frame header did not parse
	DropUnknownSender DropReason = 3 // sender not in the expected set
	DropOther         DropReason = 4 // any filter reason out of range
	// DropSendOnly: a datagram arrived on a send-only socket (a multicast
	// sender). Nobody should send to one; whatever does is drained and
	// counted so it can neither fill the socket nor go unseen.
	DropSendOnly DropReason = 5
	// DropOwnFrame: a node's own multicast frame, looped back to it by
	// the kernel (or queued before it left the group), dropped at the
	// header before any checksum or MAC work.
	DropOwnFrame DropReason = 6

	// DropReasonsMax bounds the drop counter array.
	DropReasonsMax = 8
)

func (r DropReason) String() string {
	switch r {
	case Accept:
		return "accept"
	case DropWrongGroup:
		return "wrong-group"
	case DropBadHeader:
		return "bad-header"
	case DropUnknownSender:
		return "unknown-sender"
	case DropOther:
		return "other"
	case DropSendOnly:
		return "send-only"
	case DropOwnFrame:
		return "own-frame"
	}
	return "reason-" + strconv.Itoa(int(r))
}

// Filter inspects a received datagram before Receive returns it; a non-zero
// result drops and counts it. It runs on the receiving goroutine for every
// datagram, so it must not block or allocate, and must not retain pkt.
type Filter func(pkt []byte, from netip.AddrPort) DropReason

// SendOnly is the Filter of a send-only endpoint: it drops every datagram
// as DropSendOnly. A Drainer reads such an endpoint to empty it.
func SendOnly([]byte, netip.AddrPort) DropReason { return DropSendOnly }
