package bus

import (
	"math/bits"
	"net/netip"
	"sync/atomic"
)

// BatchBuckets is the number of batch-size histogram buckets. Bucket b
// counts calls that moved between 2^b and 2^(b+1)-1 datagrams, so with
// BatchSizeMax = 64 the last bucket holds exactly 64.
const BatchBuckets = 7

// Counters is a snapshot of what a user tunes by.
type Counters struct {
	DatagramsSent uint64 // datagrams the kernel accepted
	BytesSent     uint64
	// DatagramsReceived counts every datagram read from the socket,
	// including those then dropped; delivered = received − truncated − dropped.
	DatagramsReceived uint64
	BytesReceived     uint64

	SendBatches    [BatchBuckets]uint64 // per sendmmsg call, by datagrams sent
	ReceiveBatches [BatchBuckets]uint64 // per recvmmsg call that read ≥ 1, by datagrams read
	// EmptyReceives counts receive calls that found nothing to read (a
	// non-blocking poll of an empty socket, or a wait that timed out): the
	// syscalls an idle strategy wastes.
	EmptyReceives uint64

	ShortSends uint64 // sendmmsg calls that sent fewer than asked (then looped)
	// SegmentedSends counts messages that carried several datagrams for
	// the kernel to cut (UDP GSO, Linux): a run of equal-length datagrams
	// to one address. SegmentationRefused is 1 once the kernel refused
	// it on this socket, which sends every datagram as itself from then on.
	SegmentedSends      uint64
	SegmentationRefused uint64
	// CoalescedReceives counts messages read that carried several
	// datagrams (UDP_GRO, Linux: a run a sender segmented, or a NIC's GRO
	// merged); their datagrams are counted one by one as any others.
	CoalescedReceives uint64

	SendErrors    uint64 // Send calls that returned an error
	ReceiveErrors uint64 // Receive calls that returned an error other than ErrClosed

	// ReceiveTruncations counts datagrams longer than their buffer; they are
	// dropped, not delivered cut short.
	ReceiveTruncations uint64
	// ReceiveOverflows is the kernel's count of datagrams dropped because
	// the socket receive buffer was full (SO_RXQ_OVFL, Linux; it is reported
	// with the next datagram that does arrive).
	ReceiveOverflows uint64

	// Drops by DropReason; Drops[Accept] stays 0. Its JSON name is "drops",
	// so a status that embeds Counters and names the drops itself (node.
	// SocketStatus) shadows this array instead of writing both.
	Drops [DropReasonsMax]uint64 `json:"drops"`
}

// Delivered is the number of datagrams handed to the caller.
func (c Counters) Delivered() uint64 {
	return c.DatagramsReceived - c.ReceiveTruncations - c.Dropped()
}

// Dropped is the sum of Drops.
func (c Counters) Dropped() uint64 {
	var sum uint64
	for _, d := range c.Drops {
		sum += d
	}
	return sum
}

// counters is the live, atomically updated form. One Receive or Send call
// adds its totals once, so the cost is a few atomic adds per batch.
type counters struct {
	datagramsSent      atomic.Uint64
	bytesSent          atomic.Uint64
	datagramsReceived  atomic.Uint64
	bytesReceived      atomic.Uint64
	sendBatches        [BatchBuckets]atomic.Uint64
	receiveBatches     [BatchBuckets]atomic.Uint64
	emptyReceives      atomic.Uint64
	shortSends         atomic.Uint64
	gsoMessages        atomic.Uint64
	gsoRefused         atomic.Uint64
	coalescedReceives  atomic.Uint64
	sendErrors         atomic.Uint64
	receiveErrors      atomic.Uint64
	receiveTruncations atomic.Uint64
	receiveOverflows   atomic.Uint64
	drops              [DropReasonsMax]atomic.Uint64
}

func (c *counters) snapshot() Counters {
	s := Counters{
		DatagramsSent:       c.datagramsSent.Load(),
		BytesSent:           c.bytesSent.Load(),
		DatagramsReceived:   c.datagramsReceived.Load(),
		BytesReceived:       c.bytesReceived.Load(),
		EmptyReceives:       c.emptyReceives.Load(),
		ShortSends:          c.shortSends.Load(),
		SegmentedSends:      c.gsoMessages.Load(),
		SegmentationRefused: c.gsoRefused.Load(),
		CoalescedReceives:   c.coalescedReceives.Load(),
		SendErrors:          c.sendErrors.Load(),
		ReceiveErrors:       c.receiveErrors.Load(),
		ReceiveTruncations:  c.receiveTruncations.Load(),
		ReceiveOverflows:    c.receiveOverflows.Load(),
	}
	for i := range s.SendBatches {
		s.SendBatches[i] = c.sendBatches[i].Load()
		s.ReceiveBatches[i] = c.receiveBatches[i].Load()
	}
	for i := range s.Drops {
		s.Drops[i] = c.drops[i].Load()
	}
	return s
}

// batchBucket maps a batch size 1..BatchSizeMax to its histogram bucket.
func batchBucket(n int) int {
	if n < 1 {
		panic("bus: batchBucket of an empty batch")
	}
	b := bits.Len(uint(n)) - 1
	if b >= BatchBuckets {
		b = BatchBuckets - 1
	}
	return b
}

// clampReason maps a filter's result onto the counter array.
func clampReason(r DropReason) DropReason {
	if r >= DropReasonsMax {
		return DropOther
	}
	return r
}

// rxTally accumulates one Receive call's counts on the stack.
type rxTally struct {
	datagrams   uint64
	bytes       uint64
	truncations uint64
	drops       [DropReasonsMax]uint64
	dropped     bool
}

func (c *counters) addReceive(t *rxTally, read int) {
	if read == 0 {
		c.emptyReceives.Add(1)
		return
	}
	c.receiveBatches[batchBucket(read)].Add(1)
	c.addCarried(t)
}

// addCarried counts datagrams a Receive handed out without a system call
// (the rest of a coalesced run, UDP_GRO): no batch, no empty receive.
func (c *counters) addCarried(t *rxTally) {
	if t.datagrams == 0 {
		return
	}
	c.datagramsReceived.Add(t.datagrams)
	c.bytesReceived.Add(t.bytes)
	if t.truncations != 0 {
		c.receiveTruncations.Add(t.truncations)
	}
	if t.dropped {
		for i, d := range t.drops {
			if d != 0 {
				c.drops[i].Add(d)
			}
		}
	}
}

// overflowSeen records the kernel's cumulative overflow count, which only
// grows; a stale, smaller value from an earlier datagram is ignored.
func (c *counters) overflowSeen(total uint64) {
	for {
		old := c.receiveOverflows.Load()
		if total <= old || c.receiveOverflows.CompareAndSwap(old, total) {
			return
		}
	}
}

func (c *counters) addSend(datagrams, bytes uint64) {
	c.datagramsSent.Add(datagrams)
	c.bytesSent.Add(bytes)
	c.sendBatches[batchBucket(int(datagrams))].Add(1)
}

// deliver applies the per-datagram rules shared by every transport: count
// it, drop truncated datagrams, run the filter, and compact the survivors to
// the front of bufs. It returns the new write index.
func deliver(t *rxTally, filter Filter, bufs [][]byte, sizes []int, from []netip.AddrPort,
	w, r, size int, truncated bool, addr netip.AddrPort, reason DropReason) int {
	t.datagrams++
	t.bytes += uint64(size)
	if truncated {
		t.truncations++
		return w
	}
	if reason == Accept && filter != nil {
		reason = clampReason(filter(bufs[r][:size], addr))
	}
	if reason != Accept {
		t.drops[reason]++
		t.dropped = true
		return w
	}
	if w != r {
		if len(bufs[w]) < size {
			// Unequal caller buffers: the survivor does not fit its new slot.
			t.truncations++
			return w
		}
		copy(bufs[w], bufs[r][:size])
	}
	sizes[w] = size
	from[w] = addr
	return w + 1
}

// addSendChunks counts a send of datagrams that a real socket would have
// made in BatchSizeMax chunks, so the histograms agree across transports.
func (c *counters) addSendChunks(datagrams int, bytes uint64) {
	if datagrams == 0 {
		return
	}
	c.datagramsSent.Add(uint64(datagrams))
	c.bytesSent.Add(bytes)
	for datagrams > 0 {
		chunk := min(datagrams, BatchSizeMax)
		c.sendBatches[batchBucket(chunk)].Add(1)
		datagrams -= chunk
	}
}
