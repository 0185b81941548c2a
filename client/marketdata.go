package client

import (
	"github.com/seqbus/seqbus/auth"
	"net/netip"
	"sync"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// MDTracker checks a market-data stream's sequence: the engine numbers
// every update (MDSeq, replicated state, so it continues across a
// failover). It counts gaps (updates never seen: lost on the wire, or
// never published because the primary that applied them lost its lease
// before releasing them) and duplicates or reuses (a seq seen twice). It is
// pure: feed it outputs in arrival order.
type MDTracker struct {
	next                         uint64 // next expected MDSeq; 0 before the first
	Updates, Gaps, Missing, Dups uint64
	// LastGapFrom/To is the most recent gap, inclusive.
	LastGapFrom, LastGapTo uint64
}

// Observe takes one market-data output.
func (t *MDTracker) Observe(seq uint64) {
	t.Updates++
	switch {
	case t.next == 0 || seq == t.next:
	case seq > t.next:
		t.Gaps++
		t.Missing += seq - t.next
		t.LastGapFrom, t.LastGapTo = t.next, seq-1
	default:
		t.Dups++
		return
	}
	t.next = seq + 1
}

// MarketData subscribes to a market-data multicast group and tracks its
// sequence.
type MarketData struct {
	conn *bus.UDP
	loop *bus.Loop

	mu      sync.Mutex
	tracker MDTracker
	onMD    func(o *engine.Output)
	mac     *auth.MAC
	// BadMAC counts updates dropped for a missing or bad MAC.
	badMAC uint64
	out    engine.Output // decoded update handed to onMD (see eachOutput)
}

// SubscribeMarketData joins group on iface ("" means lo). onMD, if set, is
// called for every update, under the subscriber's lock.
func SubscribeMarketData(group netip.AddrPort, iface string, onMD func(o *engine.Output)) (*MarketData, error) {
	return SubscribeMarketDataKey(group, iface, onMD, nil, 0)
}

// SubscribeMarketDataKey is SubscribeMarketData that, with key set, keeps
// only updates sealed with the stream's client key (0: stream 1).
func SubscribeMarketDataKey(group netip.AddrPort, iface string, onMD func(o *engine.Output), key *auth.MasterKey, stream uint16) (*MarketData, error) {
	c, err := bus.ListenMulticast(bus.MulticastReceiverConfig{Group: group, Interface: iface, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
	if err != nil {
		return nil, err
	}
	m := &MarketData{conn: c, onMD: onMD}
	if key != nil {
		m.mac = auth.NewMAC(auth.ClientKey(key, max(stream, 1)))
	}
	m.loop, err = bus.StartLoop(c, bus.LoopConfig{}, m.onBatch)
	if err != nil {
		c.Close()
		return nil, err
	}
	return m, nil
}

func (m *MarketData) onBatch(bufs [][]byte, sizes []int, _ []netip.AddrPort) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range sizes {
		f, _, err := wire.Parse(bufs[i][:sizes[i]])
		if err != nil || f.Type != wire.TypeOutput {
			continue
		}
		if !verifyClientFrame(m.mac, &f) {
			m.badMAC++
			continue
		}
		eachOutput(&f, &m.out, func(_ int, o *engine.Output, _ []byte) {
			if o.Kind != engine.KindMarketData {
				return
			}
			m.tracker.Observe(o.MDSeq)
			if m.onMD != nil {
				m.onMD(o)
			}
		})
	}
}

// Tracker returns a copy of the sequence tracker.
func (m *MarketData) Tracker() MDTracker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tracker
}

// Close leaves the group.
func (m *MarketData) Close() error {
	m.conn.Close()
	m.loop.Stop()
	return nil
}
