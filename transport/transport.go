// Package transport is how a node talks: its four sockets (unicast,
// the replication group's receiver and sender, the market-data sender),
// the MAC on every frame, and the per-pass send queue. It knows frames
// only by their header; what they mean is the node's and the cores'.
//
// A Transport is owned by one goroutine at a time (the node's agent, or
// whoever holds the node's lock); only DrainSendOnly, Syscalls and
// Reports may run beside the owner, as they read sockets and atomics
// the owner does not write.
package transport

import (
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

// FramesPerSend bounds how many multicast frames wait in the pass's
// queue before they leave with one sendmmsg.
const FramesPerSend = bus.TxFramesPerSend

// Config is what a Transport needs: the node's addresses, identity,
// datagram size and key.
type Config struct {
	Network    Network        // opens the endpoints; nil: UDPNetwork{}
	Listen     netip.AddrPort // unicast: clients, acks, naks, snapshots
	Group      netip.AddrPort // the replication group
	MarketData netip.AddrPort // the market-data group; zero: none
	Interface  string         // the multicast interface
	TTL        int            // the multicast TTL
	Stream     uint16
	Node       uint32 // this node's id: its own frames on the group are dropped
	// DatagramBytes is the datagram size (checked by FitDatagram).
	DatagramBytes int
	// Key, when set, seals every frame sent and requires a good MAC on
	// every frame received.
	Key *auth.MasterKey
	Log *slog.Logger // nil: slog.Default()
}

// Counters are what the transport counted, for the node's status.
type Counters struct {
	// SendErrors: send calls that failed (a failed sendmmsg counts one).
	SendErrors uint64
	// Frames dropped by authentication, by reason.
	DropNoMAC, DropBadMAC, DropUnknownKey, DropReplay uint64
	// GroupMembershipErrors: leaving or rejoining the replication group
	// failed (SetGroupMember).
	GroupMembershipErrors uint64
	// ProbesSent, ProbeErrors, ProbesRefused: Probe's frames sent, failed
	// to send (or not sent: the network cannot probe), and refused.
	ProbesSent, ProbeErrors, ProbesRefused uint64
}

// Sockets are a transport's endpoints; MarketDataSend is nil when the
// node publishes no market data, and all are nil before Open.
type Sockets struct {
	Unicast, Multicast, MulticastSend, MarketDataSend Endpoint
}

// Transport is a node's sockets and send path.
type Transport struct {
	cfg  Config
	s    Sockets
	auth *auth.Frames // nil without Config.Key
	// scratch, reused
	sealBuf []byte
	sendBuf [1][]byte
	// txq batches the sends of one pass (Begin, End).
	txq bus.TxQueue
	// drainer empties the send-only sockets (DrainSendOnly).
	drainer *bus.Drainer
	// truncationsLogged: the first datagram too large for the receive
	// buffers was logged (NoteTruncations); the sockets count them all.
	truncationsLogged bool
	// prober: the probes' sockets, opened at the first Probe (nil: none
	// yet, or the network cannot probe: noProbe).
	prober  Prober
	noProbe bool
	c       Counters
}

// New returns a transport for cfg with its sockets not yet open (Open).
func New(cfg Config) *Transport {
	if cfg.Network == nil {
		cfg.Network = UDPNetwork{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	t := &Transport{cfg: cfg, drainer: bus.NewDrainer(bus.RecvBufferBytes(cfg.DatagramBytes))}
	if cfg.Key != nil {
		t.auth = auth.NewFrames(cfg.Key, cfg.Stream, cfg.Node)
		t.sealBuf = make([]byte, 0, wire.MaxFrameLen+wire.TagLen)
	}
	return t
}

// Open opens the sockets; on an error it closes what it opened.
func (t *Transport) Open() error {
	nw, c := t.cfg.Network, &t.cfg
	var err error
	if t.s.Unicast, err = nw.Unicast(c.Listen, headerFilter); err != nil {
		return fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	if t.s.Multicast, err = nw.MulticastReceiver(c.Group, c.Interface, t.multicastFilter); err != nil {
		t.Close()
		return fmt.Errorf("join %s on %q: %w", c.Group, c.Interface, err)
	}
	if t.s.MulticastSend, err = nw.MulticastSender(c.Group, c.Interface, c.TTL); err != nil {
		t.Close()
		return fmt.Errorf("multicast sender %s: %w", c.Group, err)
	}
	if c.MarketData.IsValid() {
		if t.s.MarketDataSend, err = nw.MulticastSender(c.MarketData, c.Interface, c.TTL); err != nil {
			t.Close()
			return fmt.Errorf("market-data sender %s: %w", c.MarketData, err)
		}
	}
	return nil
}

// Close closes the sockets that are open.
func (t *Transport) Close() {
	for _, c := range t.all() {
		if c != nil {
			c.Close()
		}
	}
	if t.prober != nil {
		t.prober.Close()
		t.prober = nil
	}
}

func (t *Transport) all() [4]Endpoint {
	return [...]Endpoint{t.s.Unicast, t.s.Multicast, t.s.MulticastSend, t.s.MarketDataSend}
}

// Sockets returns the endpoints.
func (t *Transport) Sockets() Sockets { return t.s }

// Receivers are the sockets an agent polls: unicast and the group.
func (t *Transport) Receivers() []bus.Receiver {
	var out []bus.Receiver
	for _, c := range []Endpoint{t.s.Unicast, t.s.Multicast} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// Counters returns what the transport counted.
func (t *Transport) Counters() Counters { return t.c }

// DatagramLen is the frame budget of one datagram (DatagramLen).
func (t *Transport) DatagramLen() int { return DatagramLen(t.cfg.DatagramBytes, t.cfg.Key != nil) }

// MarketData reports whether the node has a market-data sender.
func (t *Transport) MarketData() bool { return t.cfg.MarketData.IsValid() }

// headerFilter drops datagrams whose header does not parse, so the bus
// counts them by reason before any core sees them.
func headerFilter(pkt []byte, _ netip.AddrPort) bus.DropReason {
	if _, err := wire.ParseHeader(pkt); err != nil {
		return bus.DropBadHeader
	}
	return bus.Accept
}

// multicastFilter is headerFilter for the replication group, and it also
// drops this node's own frames (the kernel loops a sender's multicast back
// to every socket on the host) at the header, before any checksum or MAC
// work, counting them as bus.DropOwnFrame. A primary normally left the
// group (SetGroupMember); this catches what was queued before it left and
// what an endpoint that cannot leave delivers. COMMAND frames carry the
// client's node field and lease frames the witness's, so they pass.
func (t *Transport) multicastFilter(pkt []byte, _ netip.AddrPort) bus.DropReason {
	h, err := wire.ParseHeader(pkt)
	if err != nil {
		return bus.DropBadHeader
	}
	if h.Node == t.cfg.Node && h.Type != wire.TypeCommand && !wire.IsLease(h.Type) {
		return bus.DropOwnFrame
	}
	return bus.Accept
}

// SetGroupMember makes the multicast receiver leave the group (member
// false: this node leads, and nothing on the group is for it) or rejoin
// it (a standby follows the group). A failure is logged and counted; the
// multicast filter still drops the node's own frames, so leading on while
// joined costs wake-ups, never correctness.
func (t *Transport) SetGroupMember(member bool) {
	g, ok := t.s.Multicast.(groupMember)
	if !ok {
		return
	}
	var err error
	if member {
		err = g.RejoinGroup()
	} else {
		err = g.LeaveGroup()
	}
	if err != nil {
		t.c.GroupMembershipErrors++
		t.cfg.Log.Warn("multicast group membership", "member", member, "err", err)
	}
}

// NoteTruncations logs, once, that a receiving socket dropped a datagram
// longer than its buffers: a member or client sends larger datagrams than
// this node's DatagramBytes. Every one is counted in the sockets'
// ReceiveTruncations. Tick cadence: a few atomic loads a millisecond
// until the first one, nothing after.
func (t *Transport) NoteTruncations() {
	if t.truncationsLogged {
		return
	}
	var unicast, multicast uint64
	if t.s.Unicast != nil {
		unicast = t.s.Unicast.Counters().ReceiveTruncations
	}
	if t.s.Multicast != nil {
		multicast = t.s.Multicast.Counters().ReceiveTruncations
	}
	if unicast+multicast == 0 {
		return
	}
	t.truncationsLogged = true
	t.cfg.Log.Error("dropped a datagram larger than this node's datagram size: every member and client must use the same datagram size",
		"datagram_bytes", t.cfg.DatagramBytes, "unicast_truncations", unicast, "multicast_truncations", multicast)
}

// DrainSendOnly reads and discards whatever arrived on the send-only
// sockets: nobody should send to them, but anyone can, and the bus counts
// each datagram (DropSendOnly) as it drains it. One non-blocking read per
// socket per call when nothing arrived; it may run beside the owner, so
// it never delays a command.
func (t *Transport) DrainSendOnly() {
	for _, c := range []Endpoint{t.s.MulticastSend, t.s.MarketDataSend} {
		if c != nil {
			// Errors are counted by the bus (ReceiveErrors); ErrClosed
			// only happens while the node closes.
			_, _ = t.drainer.Drain(c)
		}
	}
}

// Reports says what the kernel granted each socket (buffers, busy-poll),
// for start-up warnings and `stat`.
func (t *Transport) Reports() []bus.Report {
	var out []bus.Report
	for _, c := range t.all() {
		if r, ok := c.(interface{ Report() bus.Report }); ok && c != nil {
			out = append(out, r.Report())
		}
	}
	return out
}

// Syscalls is the send and receive calls of every socket, read from
// their atomic counters (no lock, no allocation).
func (t *Transport) Syscalls() uint64 {
	var sum uint64
	for _, s := range t.all() {
		if s == nil {
			continue
		}
		c := s.Counters()
		for i := range c.SendBatches {
			sum += c.SendBatches[i] + c.ReceiveBatches[i]
		}
	}
	return sum
}
