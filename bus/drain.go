package bus

import "net/netip"

// drainRoundsMax bounds one Drain call: at most drainRoundsMax full batches
// (BatchSizeMax datagrams each) are read. A send-only socket has the
// kernel's smallest receive buffer, so it never holds more than a few
// datagrams; the bound only matters if a platform ignores that floor.
const drainRoundsMax = 16

// DrainEndpoint is what a Drainer reads: a receiver whose counters say how
// many datagrams each read took (its Filter drops them all, so Receive
// itself returns 0).
type DrainEndpoint interface {
	Receiver
	CounterReader
}

// Drainer empties send-only endpoints (multicast senders): anyone can send
// datagrams to a sender's address, and a queue nobody reads would hold them
// unseen. The endpoint's Filter (SendOnly) counts each one as DropSendOnly;
// on Linux the kernel's own drops once the tiny buffer is full arrive as
// ReceiveOverflows with the next datagram read. It owns its buffers, so a
// drain never allocates; it is not safe for concurrent use.
type Drainer struct {
	bufs  [BatchSizeMax][]byte
	sizes [BatchSizeMax]int
	from  [BatchSizeMax]netip.AddrPort
}

// NewDrainer returns a Drainer with its buffers allocated, each
// datagramBytes long (0 or less: DatagramBytesDefault). Sized like the
// owner's receive buffers, a drain counts as truncated only what they
// would truncate too.
func NewDrainer(datagramBytes int) *Drainer {
	if datagramBytes <= 0 {
		datagramBytes = DatagramBytesDefault
	}
	d := &Drainer{}
	arena := make([]byte, BatchSizeMax*datagramBytes)
	for i := range d.bufs {
		d.bufs[i] = arena[i*datagramBytes : (i+1)*datagramBytes : (i+1)*datagramBytes]
	}
	return d
}

// Drain reads whatever is queued on c without blocking, in at most
// drainRoundsMax reads, and returns how many datagrams it read. With
// nothing queued it costs one non-blocking read. Every one
// is counted by c (received, and dropped as its Filter says, or truncated);
// datagrams the Filter accepts are discarded all the same.
func (d *Drainer) Drain(c DrainEndpoint) (int, error) {
	total := 0
	for range drainRoundsMax {
		before := c.Counters().DatagramsReceived
		if _, err := c.Receive(d.bufs[:], d.sizes[:], d.from[:], 0); err != nil {
			return total, err
		}
		read := int(c.Counters().DatagramsReceived - before)
		total += read
		if read == 0 {
			// Not read < batch: Receive adapts its batch to the last
			// read, so a short read does not mean the queue is empty.
			return total, nil
		}
	}
	return total, nil
}
