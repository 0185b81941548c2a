package bus

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// MemQueueMax bounds each in-memory port's receive queue. A datagram that
// finds the queue full is dropped and counted in MemStats.Overflows and the
// port's ReceiveOverflows, as a full socket buffer would.
const MemQueueMax = 4096

// MemDatagramMax bounds the size of an in-memory datagram, as UDP does.
const MemDatagramMax = 65507

// Faults are the seeded router's misbehaviours. Probabilities are in parts
// per million, applied independently per datagram and destination.
type Faults struct {
	DropPpm      uint32
	DuplicatePpm uint32
	// ReorderPpm: the datagram is queued ahead of the last one still queued
	// for the same destination.
	ReorderPpm uint32
	// Each copy is delayed by a uniform time in [DelayMin, DelayMax].
	DelayMin, DelayMax time.Duration
}

// MemStats counts what the router did.
type MemStats struct {
	Sent, Delivered, Dropped, Duplicated, Reordered, Partitioned, Overflows, Unroutable uint64
}

// MemNetwork is an in-memory datagram network with a seeded router that can
// drop, duplicate, reorder, delay and partition, after quic-go's simnet.
// With one sending goroutine its decisions are a pure function of the seed
// and the sends; delays use the time package, so tests can make them
// deterministic with testing/synctest.
type MemNetwork struct {
	mu      sync.Mutex
	rng     *rand.Rand
	faults  Faults
	ports   map[netip.AddrPort]*MemConn
	groups  map[netip.AddrPort][]*MemConn // group:port → members
	blocked map[[2]netip.Addr]bool        // ordered pairs, both directions stored
	stats   MemStats
	nextEph uint16
	epoch   time.Time
}

// NewMemNetwork makes a network whose router draws from seed.
func NewMemNetwork(seed uint64, faults Faults) *MemNetwork {
	return &MemNetwork{
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		faults:  faults,
		ports:   make(map[netip.AddrPort]*MemConn),
		groups:  make(map[netip.AddrPort][]*MemConn),
		blocked: make(map[[2]netip.Addr]bool),
		nextEph: 49152,
		epoch:   time.Now(),
	}
}

// SetFaults replaces the router's faults for datagrams sent from now on.
func (n *MemNetwork) SetFaults(f Faults) {
	n.mu.Lock()
	n.faults = f
	n.mu.Unlock()
}

// Partition stops all traffic between hosts a and b, both ways.
func (n *MemNetwork) Partition(a, b netip.Addr) {
	n.mu.Lock()
	n.blocked[[2]netip.Addr{a, b}] = true
	n.blocked[[2]netip.Addr{b, a}] = true
	n.mu.Unlock()
}

// Heal undoes every Partition.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	clear(n.blocked)
	n.mu.Unlock()
}

// Stats returns the router's counts.
func (n *MemNetwork) Stats() MemStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Listen opens a port. A zero port picks a free one; a zero address means
// 127.0.0.1.
func (n *MemNetwork) Listen(addr netip.AddrPort, filter Filter) (*MemConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ip := addr.Addr()
	if !ip.IsValid() {
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	port := addr.Port()
	if port == 0 {
		for tries := 0; ; tries++ {
			if tries > 16384 {
				return nil, fmt.Errorf("%w: no free in-memory port on %v", ErrConfig, ip)
			}
			n.nextEph++
			if n.nextEph < 49152 {
				n.nextEph = 49152
			}
			if _, used := n.ports[netip.AddrPortFrom(ip, n.nextEph)]; !used {
				port = n.nextEph
				break
			}
		}
	}
	local := netip.AddrPortFrom(ip, port)
	if _, used := n.ports[local]; used {
		return nil, fmt.Errorf("%w: in-memory address %v in use", ErrConfig, local)
	}
	c := &MemConn{
		network: n,
		local:   local,
		filter:  filter,
		notify:  make(chan struct{}, 1),
		closed:  make(chan struct{}),
	}
	n.ports[local] = c
	return c, nil
}

// MemConn is one port on a MemNetwork. It implements Conn.
type MemConn struct {
	network *MemNetwork
	local   netip.AddrPort
	filter  Filter

	mu     sync.Mutex
	queue  []memDatagram // ordered by due time; len ≤ MemQueueMax
	joined []netip.AddrPort
	notify chan struct{} // capacity 1: "the queue changed"
	closed chan struct{}
	isDone bool

	recvMu   sync.Mutex
	counters counters
}

var (
	_ Conn          = (*MemConn)(nil)
	_ CounterReader = (*MemConn)(nil)
)

type memDatagram struct {
	data  []byte
	from  netip.AddrPort
	dueNs int64
}

// LocalAddr is the port's address.
func (c *MemConn) LocalAddr() netip.AddrPort { return c.local }

// Counters returns a snapshot of the port's counters.
func (c *MemConn) Counters() Counters { return c.counters.snapshot() }

// JoinGroup subscribes the port to datagrams sent to group on its own port.
func (c *MemConn) JoinGroup(group netip.Addr) error {
	if !group.IsMulticast() {
		return fmt.Errorf("%w: %v is not multicast", ErrConfig, group)
	}
	n := c.network
	key := netip.AddrPortFrom(group, c.local.Port())
	n.mu.Lock()
	defer n.mu.Unlock()
	n.groups[key] = append(n.groups[key], c)
	c.joined = append(c.joined, key)
	return nil
}

// Close removes the port; a parked Receive returns ErrClosed.
func (c *MemConn) Close() error {
	n := c.network
	n.mu.Lock()
	defer n.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isDone {
		return ErrClosed
	}
	c.isDone = true
	close(c.closed)
	delete(n.ports, c.local)
	for _, key := range c.joined {
		members := n.groups[key]
		for i, m := range members {
			if m == c {
				n.groups[key] = append(members[:i:i], members[i+1:]...)
				break
			}
		}
	}
	return nil
}

// Send implements Sender: every datagram passes through the router.
func (c *MemConn) Send(bufs [][]byte, to netip.AddrPort) error {
	select {
	case <-c.closed:
		c.counters.sendErrors.Add(1)
		return ErrClosed
	default:
	}
	for _, b := range bufs {
		if len(b) > MemDatagramMax {
			c.counters.sendErrors.Add(1)
			return fmt.Errorf("%w: datagram of %d bytes over %d", ErrConfig, len(b), MemDatagramMax)
		}
	}
	n := c.network
	n.mu.Lock()
	nowNs := n.nowNs()
	var bytes uint64
	for _, b := range bufs {
		bytes += uint64(len(b))
		n.stats.Sent++
		if to.Addr().IsMulticast() {
			for _, dst := range n.groups[to] {
				n.route(c.local, dst, b, nowNs)
			}
			continue
		}
		dst, ok := n.ports[to]
		if !ok {
			n.stats.Unroutable++
			continue
		}
		n.route(c.local, dst, b, nowNs)
	}
	n.mu.Unlock()
	c.counters.addSendChunks(len(bufs), bytes)
	return nil
}

// nowNs is the network's monotonic clock.
func (n *MemNetwork) nowNs() int64 { return int64(time.Since(n.epoch)) }

// route applies the faults to one datagram for one destination; n.mu held.
func (n *MemNetwork) route(from netip.AddrPort, dst *MemConn, b []byte, nowNs int64) {
	if n.blocked[[2]netip.Addr{from.Addr(), dst.local.Addr()}] {
		n.stats.Partitioned++
		return
	}
	f := n.faults
	if n.chance(f.DropPpm) {
		n.stats.Dropped++
		return
	}
	copies := 1
	if n.chance(f.DuplicatePpm) {
		copies = 2
		n.stats.Duplicated++
	}
	for k := 0; k < copies; k++ {
		delay := int64(f.DelayMin)
		if f.DelayMax > f.DelayMin {
			delay += n.rng.Int64N(int64(f.DelayMax-f.DelayMin) + 1)
		}
		reorder := n.chance(f.ReorderPpm)
		ok, reordered := dst.enqueue(memDatagram{data: append([]byte(nil), b...), from: from, dueNs: nowNs + delay}, reorder)
		if ok {
			n.stats.Delivered++
			if reordered {
				n.stats.Reordered++
			}
		} else {
			n.stats.Overflows++
		}
	}
}

func (n *MemNetwork) chance(ppm uint32) bool {
	return ppm > 0 && n.rng.Uint32N(1_000_000) < ppm
}

// enqueue inserts d in due order (ahead of the last datagram when reorder
// is set and there is one to overtake). ok is false when the queue is full
// or the port closed.
func (c *MemConn) enqueue(d memDatagram, reorder bool) (ok, reordered bool) {
	c.mu.Lock()
	if c.isDone || len(c.queue) >= MemQueueMax {
		c.mu.Unlock()
		if !c.isDone {
			c.counters.receiveOverflows.Add(1)
		}
		return false, false
	}
	i := len(c.queue)
	for i > 0 && c.queue[i-1].dueNs > d.dueNs {
		i-- // stable: equal due times keep send order
	}
	if reorder && i == len(c.queue) && i > 0 {
		// Overtake the last queued datagram; taking its due time keeps the
		// queue sorted.
		i--
		d.dueNs = c.queue[i].dueNs
		reordered = true
	}
	c.queue = append(c.queue, memDatagram{})
	copy(c.queue[i+1:], c.queue[i:])
	c.queue[i] = d
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	return true, reordered
}

// Receive implements Receiver.
func (c *MemConn) Receive(bufs [][]byte, sizes []int, from []netip.AddrPort, wait time.Duration) (int, error) {
	count := min(len(bufs), len(sizes), len(from), BatchSizeMax)
	if count == 0 {
		return 0, nil
	}
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	var deadline <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		deadline = timer.C
	}
	var due *time.Timer
	defer func() {
		if due != nil {
			due.Stop()
		}
	}()
	for {
		read, n, nextDueNs, err := c.take(bufs[:count], sizes, from)
		if err != nil || read > 0 || wait == 0 {
			return n, err
		}
		var dueC <-chan time.Time
		if nextDueNs > 0 {
			untilDue := time.Duration(nextDueNs - c.network.nowNs())
			if due == nil {
				due = time.NewTimer(untilDue)
			} else {
				due.Reset(untilDue)
			}
			dueC = due.C
		}
		select {
		case <-c.notify:
		case <-dueC:
		case <-deadline:
			return 0, nil
		case <-c.closed:
			return 0, ErrClosed
		}
	}
}

// take moves due datagrams into bufs. nextDueNs is the due time of the
// first datagram not yet due (0 if none).
func (c *MemConn) take(bufs [][]byte, sizes []int, from []netip.AddrPort) (read, n int, nextDueNs int64, err error) {
	nowNs := c.network.nowNs()
	c.mu.Lock()
	if c.isDone {
		c.mu.Unlock()
		return 0, 0, 0, ErrClosed
	}
	var t rxTally
	w := 0
	for read < len(bufs) && read < len(c.queue) && c.queue[read].dueNs <= nowNs {
		d := c.queue[read]
		size := len(d.data)
		truncated := size > len(bufs[w])
		if !truncated {
			copy(bufs[w], d.data)
		}
		// deliver compacts in place; reading straight into slot w keeps r == w.
		w = deliver(&t, c.filter, bufs, sizes, from, w, w, size, truncated, d.from, Accept)
		read++
	}
	if read > 0 {
		clear(c.queue[:read])
		c.queue = append(c.queue[:0], c.queue[read:]...)
	}
	if len(c.queue) > 0 {
		nextDueNs = max(c.queue[0].dueNs, 1)
	}
	c.mu.Unlock()
	c.counters.addReceive(&t, read)
	return read, w, nextDueNs, nil
}
