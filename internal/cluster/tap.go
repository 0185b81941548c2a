package cluster

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// Seen is one output message received, with the header of the frame that
// carried it.
type Seen struct {
	At    time.Time
	Node  uint32
	Epoch uint64
	// Seq is the frame's seq: the seq of the command whose output comes
	// first in the frame (a frame packs outputs of that seq and later).
	Seq uint64
	O   engine.Output
}

// RecordOutputs appends every output message of an OUTPUT frame in pkt
// (anything else is ignored).
func RecordOutputs(dst []Seen, pkt []byte, at time.Time) []Seen {
	f, _, err := wire.Parse(pkt)
	if err != nil || f.Type != wire.TypeOutput {
		return dst
	}
	it := f.Messages()
	for {
		_, msg, ok := it.Next()
		if !ok {
			return dst
		}
		if o, err := engine.ParseOutput(msg); err == nil {
			dst = append(dst, Seen{At: at, Node: f.Node, Epoch: f.Epoch, Seq: f.Seq, O: o})
		}
	}
}

// seenLog is a locked list of outputs received.
type seenLog struct {
	mu   sync.Mutex
	seen []Seen
}

// received is when the datagrams of the receive that just returned on u
// reached the socket: the kernel's receive time of the last of them
// (bus.UDP.ReceiveStamp), not when a reader slowed by its machine (a
// loaded CI box, a VM stalled on its host, the race detector) got to
// them. A check of when a node sent ("nothing after its lease") then
// judges the node, not the reader. An earlier datagram of the batch
// carries the later stamp: late by at most the batch's spread, never
// early. Without a stamp it is the time of the call.
func received(u *bus.UDP) time.Time {
	now := time.Now()
	if at, ok := u.ReceiveStamp(); ok && !at.After(now) && now.Sub(at) < time.Minute {
		return at
	}
	return now
}

// add records the n datagrams of one receive, stamped at.
func (l *seenLog) add(at time.Time, bufs [][]byte, sizes []int, n int) {
	l.mu.Lock()
	for i := range n {
		l.seen = RecordOutputs(l.seen, bufs[i][:sizes[i]], at)
	}
	l.mu.Unlock()
}

// Snapshot is a copy of what was received so far, in arrival order.
func (l *seenLog) Snapshot() []Seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// Tap is a client's socket that records every output it receives, with
// the sender and epoch from the frame header, before the client matches
// it (pass it as client.Options.Conn). The record grows with the load:
// one entry per output, so bounded by the commands sent times the outputs
// a command can cause.
type Tap struct {
	*bus.UDP
	seenLog
}

// NewTap taps u.
func NewTap(u *bus.UDP) *Tap {
	u.ReceiveStamp() // turns the kernel's stamping on
	return &Tap{UDP: u}
}

// Receive is bus.UDP's, recording what arrived.
func (c *Tap) Receive(bufs [][]byte, sizes []int, from []netip.AddrPort, wait time.Duration) (int, error) {
	n, err := c.UDP.Receive(bufs, sizes, from, wait)
	if n > 0 {
		c.add(received(c.UDP), bufs, sizes, n)
	}
	return n, err
}

// Observer receives a multicast group (the market data) and records every
// output in it.
type Observer struct {
	conn *bus.UDP
	loop *bus.Loop
	seenLog
}

// Observe starts receiving on conn (a multicast receiver).
func Observe(conn *bus.UDP) (*Observer, error) {
	o := &Observer{conn: conn}
	conn.ReceiveStamp() // turns the kernel's stamping on
	var err error
	o.loop, err = bus.StartLoop(conn, bus.LoopConfig{Idle: bus.Idle{Kind: bus.IdleBlock}},
		func(bufs [][]byte, sizes []int, _ []netip.AddrPort) { o.add(received(conn), bufs, sizes, len(sizes)) })
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Close stops the observer and closes its socket.
func (o *Observer) Close() {
	o.conn.Close()
	o.loop.Stop()
}
