package client

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/monotime"
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
	// With recovery (MDRecovery): Filled is how many delivered updates
	// came from a re-request; Resyncs how many times the consumer
	// resynchronized from a book snapshot, Resynced the updates those
	// snapshots covered; Conflicts the duplicates whose content differed
	// from the update delivered under the same MD seq (never expected).
	Filled, Resyncs, Resynced, Conflicts uint64
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

// Summary is the demo's market-data line: what was delivered, what the
// consumer's recovery filled, and republished, the updates the final
// primary published again at promotion (its status node.MD.Republished).
func (t MDTracker) Summary(republished uint64) string {
	s := fmt.Sprintf("market data: %d updates, gaps %d (%d updates never seen", t.Updates, t.Gaps, t.Missing)
	if t.Gaps > 0 {
		s += fmt.Sprintf("; last gap md seq %d..%d", t.LastGapFrom, t.LastGapTo)
	}
	return s + fmt.Sprintf("), exact duplicates dropped %d, reused seqs %d; filled by re-request %d, republished at promotion %d, resynced from books %d (%d updates)",
		t.Dups, t.Conflicts, t.Filled, republished, t.Resyncs, t.Resynced)
}

// MarketData subscribes to a market-data multicast group and tracks its
// sequence. It runs one agent thread (bus.AgentRunner) over the feed's
// socket and, with recovery, the unicast socket its requests go out and
// its answers come in on; the recovery timers run on that thread, checked
// every pass, so there is no ticker goroutine.
type MarketData struct {
	conn   *bus.UDP
	runner *bus.AgentRunner

	mu      sync.Mutex
	tracker MDTracker
	onMD    func(o *engine.Output)
	mac     *auth.MAC
	// BadMAC counts updates dropped for a missing or bad MAC.
	badMAC uint64
	out    engine.Output // decoded update handed to onMD (see eachOutput)

	// Recovery (OpenMarketData with Recovery nodes; nil otherwise).
	rec       *MDRecovery
	uc        *bus.UDP
	servers   []netip.AddrPort
	stream    uint16
	sealBuf   []byte
	sendBuf   [1][]byte
	frame     []byte
	levels    []wire.MDLevel
	nextTick  int64 // the agent's next run of the recovery timers (MDRecovery.DeadlineNs)
	closeOnce sync.Once
}

// MDOptions configures OpenMarketData.
type MDOptions struct {
	Group netip.AddrPort
	Iface string // "" means lo
	// OnMD, if set, gets every update, in MD seq order, once, under the
	// subscriber's lock.
	OnMD func(o *engine.Output)
	// OnSnapshot, if set, gets the books when the consumer resynchronized
	// from a snapshot (a gap older than every node's ring, or a late join
	// with FromStart); OnMD resumes after mdSeq.
	OnSnapshot func(mdSeq uint64, levels []wire.MDLevel)
	// Key and Stream: with Key, only updates sealed with the stream's
	// client key are kept, and requests are sealed with it (Stream 0: 1).
	Key    *auth.MasterKey
	Stream uint16
	// Recovery lists the nodes' unicast addresses to ask for what the
	// feed lost (any node serves; a timeout moves to the next). Empty:
	// no recovery, gaps are reported as they are seen.
	Recovery []netip.AddrPort
	// FromStart delivers from MD seq 1 even when subscribing late.
	FromStart bool
	// Recovery timers (MDRecoveryConfig); zero takes the defaults.
	RetryNs, ProbeNs, WaitNs int64
	MaxRetries               int
	// DatagramBytes is the nodes' datagram size (nodeconfig.Config.DatagramBytes;
	// 0: wire.DefaultDatagramLen): the receive buffers hold one, so no
	// update or recovery answer is truncated.
	DatagramBytes int
	// GRO turns UDP_GRO on for the feed's socket (bus.Tuning.GRO): a
	// burst of updates a NIC's GRO merged (or a sender segmented) is read
	// whole. Off by default.
	GRO bool
	// Idle is what the consumer's agent thread does between arrivals
	// (bus.Idle; the zero value parks at once, in epoll on both sockets,
	// woken by an arrival or the next recovery timer).
	Idle bus.Idle
}

// mdIdleDeadlineNs bounds a park of a consumer with no timer due (no
// recovery, or nothing to retry or probe): it only bounds how long a
// Close may wait, which Stop's wake makes immediate anyway.
const mdIdleDeadlineNs = int64(time.Second)

// mdMinTickNs: the recovery timers run at most this often while a
// deadline has passed (a guard: Tick moves every deadline it reaches).
const mdMinTickNs = int64(100 * time.Microsecond)

// OpenMarketData subscribes to the feed and, with opts.Recovery, fills
// its gaps by re-request and resynchronizes from book snapshots on its own
// (MDRecovery), so OnMD sees every MD seq once, in order.
func OpenMarketData(opts MDOptions) (*MarketData, error) {
	size, err := datagramBytes(opts.DatagramBytes)
	if err != nil {
		return nil, err
	}
	c, err := bus.ListenMulticast(bus.MulticastReceiverConfig{Group: opts.Group, Interface: opts.Iface, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20, GRO: opts.GRO}})
	if err != nil {
		return nil, err
	}
	m := &MarketData{conn: c, onMD: opts.OnMD, stream: max(opts.Stream, 1)}
	if opts.Key != nil {
		m.mac = auth.NewMAC(auth.ClientKey(opts.Key, m.stream))
	}
	if len(opts.Recovery) > 0 {
		// Recovery is ready before the feed's loop starts, so the first
		// update already goes through it.
		local := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
		if !opts.Recovery[0].Addr().IsLoopback() {
			local = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
		if m.uc, err = bus.ListenUnicast(bus.UnicastConfig{Addr: local, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}}); err != nil {
			c.Close()
			return nil, err
		}
		m.servers = append([]netip.AddrPort(nil), opts.Recovery...)
		m.sealBuf = make([]byte, 0, wire.MaxFrameLen+wire.TagLen)
		m.rec = NewMDRecovery(MDRecoveryConfig{
			Servers: len(opts.Recovery), FromStart: opts.FromStart,
			RetryNs: opts.RetryNs, ProbeNs: opts.ProbeNs, WaitNs: opts.WaitNs, MaxRetries: opts.MaxRetries,
			Send: m.sendRequest, Deliver: m.deliver, OnSnapshot: opts.OnSnapshot,
		})
	}
	if err := m.start(opts.Idle, bus.RecvBufferBytes(size)); err != nil {
		return nil, err
	}
	return m, nil
}

// start runs the consumer's agent over its sockets (the feed first, then
// the recovery socket, if any); on an error it closes them.
func (m *MarketData) start(idle bus.Idle, datagramBytes int) error {
	endpoints := []bus.Receiver{m.conn}
	if m.uc != nil {
		endpoints = append(endpoints, m.uc)
	}
	r, err := bus.NewAgentRunner(bus.AgentRunnerConfig{Idle: idle, DatagramBytes: datagramBytes, NowNs: monotime.Now}, (*mdAgent)(m), endpoints...)
	if err == nil {
		if err = r.Start(); err != nil {
			r.Close()
		}
	}
	if err != nil {
		m.closeSockets()
		return err
	}
	m.runner = r
	return nil
}

// mdAgent is MarketData's bus.Agent: one pass reads what the feed and
// the recovery socket delivered, then runs the recovery timers when due.
type mdAgent MarketData

func (a *mdAgent) DoWork(nowNs int64, rx *bus.Received) int {
	m := (*MarketData)(a)
	work := 0
	for b, ok := rx.Next(); ok; b, ok = rx.Next() {
		m.mu.Lock()
		for j := range b.Len() {
			pkt, _ := b.Datagram(j)
			if b.Endpoint == 0 {
				m.onFeed(pkt, nowNs)
			} else {
				m.onAnswer(pkt, nowNs)
			}
		}
		if m.rec != nil {
			m.rec.Tick(nowNs)
			m.nextTick = m.recoveryDeadline(nowNs)
		}
		m.mu.Unlock()
		work += b.Len()
	}
	if m.rec != nil && nowNs >= m.nextTick {
		m.mu.Lock()
		m.rec.Tick(nowNs)
		m.nextTick = m.recoveryDeadline(nowNs)
		m.mu.Unlock()
	}
	return work
}

// recoveryDeadline is when the agent next runs the recovery's timers (a
// retry or a probe: MDRecovery.DeadlineNs), bounded by mdIdleDeadlineNs
// when none is due (under m.mu; only the agent moves nextTick).
func (m *MarketData) recoveryDeadline(nowNs int64) int64 {
	d, ok := m.rec.DeadlineNs()
	if !ok {
		return nowNs + mdIdleDeadlineNs
	}
	return min(max(d, nowNs+mdMinTickNs), nowNs+mdIdleDeadlineNs)
}

func (a *mdAgent) DeadlineNs() int64 {
	if a.rec == nil {
		return monotime.Now() + mdIdleDeadlineNs
	}
	return a.nextTick
}

func (a *mdAgent) Pending() bool { return false }

// sendRequest is MDRecovery's Send (under m.mu).
func (m *MarketData) sendRequest(server int, req wire.MDRequest) {
	req.Origin = wire.Origin{Stream: m.stream}
	m.frame = req.Append(m.frame[:0])
	b := m.frame
	if m.mac != nil {
		b = wire.Seal(m.sealBuf[:0], b)
		b = m.mac.Sign(b, b)
		m.sealBuf = b
	}
	m.sendBuf[0] = b
	_ = m.uc.Send(m.sendBuf[:], m.servers[server]) // a lost request is retried
	m.sendBuf[0] = nil
}

// deliver is MDRecovery's Deliver (under m.mu).
func (m *MarketData) deliver(_ uint64, payload []byte, _ bool) {
	if m.onMD == nil {
		return
	}
	if err := m.out.Parse(payload); err != nil {
		return
	}
	m.onMD(&m.out)
}

// onAnswer takes one answer to a recovery request (under m.mu).
func (m *MarketData) onAnswer(pkt []byte, now int64) {
	f, _, err := wire.Parse(pkt)
	if err != nil {
		return
	}
	if !verifyClientFrame(m.mac, &f) {
		m.badMAC++
		return
	}
	switch f.Type {
	case wire.TypeMDReplay:
		it := f.Messages()
		for {
			seq, msg, ok := it.Next()
			if !ok {
				break
			}
			m.rec.Update(seq, msg, true, now)
		}
	case wire.TypeMDStatus:
		st, _ := wire.DecodeMDStatus(&f)
		m.rec.Status(st, now)
	case wire.TypeMDSnapshot:
		s, _ := wire.DecodeMDSnapshot(&f, m.levels)
		m.levels = s.Levels[:0]
		m.rec.SnapshotChunk(&s, now)
	}
}

// SubscribeMarketData joins group on iface ("" means lo), without
// recovery: gaps are counted as they are seen (Tracker). onMD, if set, is
// called for every update, under the subscriber's lock. It is
// OpenMarketData with those options only.
func SubscribeMarketData(group netip.AddrPort, iface string, onMD func(o *engine.Output)) (*MarketData, error) {
	return OpenMarketData(MDOptions{Group: group, Iface: iface, OnMD: onMD})
}

// SubscribeMarketDataKey is SubscribeMarketData that, with key set, keeps
// only updates sealed with the stream's client key (0: stream 1).
func SubscribeMarketDataKey(group netip.AddrPort, iface string, onMD func(o *engine.Output), key *auth.MasterKey, stream uint16) (*MarketData, error) {
	return OpenMarketData(MDOptions{Group: group, Iface: iface, OnMD: onMD, Key: key, Stream: stream})
}

// onFeed takes one datagram of the feed (under m.mu).
func (m *MarketData) onFeed(pkt []byte, now int64) {
	f, _, err := wire.Parse(pkt)
	if err != nil || f.Type != wire.TypeOutput {
		return
	}
	if !verifyClientFrame(m.mac, &f) {
		m.badMAC++
		return
	}
	if m.rec != nil {
		eachOutput(&f, &m.out, func(_ int, o *engine.Output, payload []byte) {
			if o.Kind == engine.KindMarketData {
				m.rec.Update(o.MDSeq, payload, false, now)
			}
		})
		return
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

// Tracker returns a copy of the sequence tracker.
func (m *MarketData) Tracker() MDTracker {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec != nil {
		return m.rec.Tracker()
	}
	return m.tracker
}

// Next is the next MD seq the consumer will deliver (0 before the first;
// without recovery, one past the last seen).
func (m *MarketData) Next() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec != nil {
		return m.rec.Next()
	}
	return m.tracker.next
}

// Close leaves the group and stops the recovery. It is safe to call twice.
func (m *MarketData) Close() error {
	m.closeOnce.Do(m.close)
	return nil
}

func (m *MarketData) close() {
	if m.runner != nil {
		m.runner.Stop()
		m.runner.Close()
	}
	m.closeSockets()
}

func (m *MarketData) closeSockets() {
	m.conn.Close()
	if m.uc != nil {
		m.uc.Close()
	}
}
