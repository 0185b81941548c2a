package transport

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

// Endpoint is one of a node's sockets: batched receive and send, and
// counters.
type Endpoint interface {
	bus.Conn
	bus.CounterReader
}

// groupMember is the optional ability of a multicast receiver to leave
// its group and rejoin it (bus.UDP has it). A primary leaves: it needs
// nothing that arrives on the group, and its own frames, looped back to
// every socket on the host, would wake it for nothing (issue 18, item 4).
// An endpoint without it (in-memory, simulated) stays joined and the
// multicast filter drops the node's own frames instead.
type groupMember interface {
	LeaveGroup() error
	RejoinGroup() error
}

// Prober asks whether a process still listens at a peer's address
// (bus.Prober over UDP): Probe sends a frame there, and Refused returns
// the peers whose host answered one with "port unreachable" since the
// last call (valid until the next).
type Prober interface {
	Probe(id uint32, to netip.AddrPort, frame []byte, nowNs int64) error
	Refused(nowNs int64) []uint32
	Close() error
}

// probing is the optional ability of a Network to probe a peer's port
// (UDPNetwork has it, and the simulator's network). Over a network
// without it nothing is probed: the in-sync timeout alone finds a dead
// standby.
type probing interface {
	Prober() Prober
}

// Network opens a node's endpoints. UDPNetwork (the default) opens real
// sockets; MemNetwork runs a node over bus.MemNetwork, so the same runtime
// is tested under seeded loss, duplication and reordering.
type Network interface {
	Unicast(local netip.AddrPort, filter bus.Filter) (Endpoint, error)
	MulticastReceiver(group netip.AddrPort, iface string, filter bus.Filter) (Endpoint, error)
	MulticastSender(group netip.AddrPort, iface string, ttl int) (Endpoint, error)
}

// UDPNetwork opens real UDP sockets with the given tuning.
type UDPNetwork struct {
	Tuning bus.Tuning
}

// Unicast implements Network.
func (u UDPNetwork) Unicast(local netip.AddrPort, filter bus.Filter) (Endpoint, error) {
	return endpoint(bus.ListenUnicast(bus.UnicastConfig{Addr: local, Tuning: u.Tuning, Filter: filter}))
}

// MulticastReceiver implements Network.
func (u UDPNetwork) MulticastReceiver(group netip.AddrPort, iface string, filter bus.Filter) (Endpoint, error) {
	return endpoint(bus.ListenMulticast(bus.MulticastReceiverConfig{Group: group, Interface: iface, Tuning: u.Tuning, Filter: filter}))
}

// MulticastSender implements Network.
func (u UDPNetwork) MulticastSender(group netip.AddrPort, iface string, ttl int) (Endpoint, error) {
	return endpoint(bus.NewMulticastSender(bus.MulticastSenderConfig{Group: group, Interface: iface, TTL: ttl, Tuning: u.Tuning}))
}

// Prober implements probing with bus.Prober.
func (u UDPNetwork) Prober() Prober { return bus.NewProber() }

// endpoint returns a failed open as a nil Endpoint: returning the nil
// *bus.UDP itself would make a non-nil interface holding a nil pointer,
// which the transport's cleanup would then Close.
func endpoint(u *bus.UDP, err error) (Endpoint, error) {
	if err != nil {
		return nil, err
	}
	return u, nil
}

// MemNetwork places a node on host Host of an in-memory network.
type MemNetwork struct {
	Net  *bus.MemNetwork
	Host netip.Addr
}

// Unicast implements Network.
func (m MemNetwork) Unicast(local netip.AddrPort, filter bus.Filter) (Endpoint, error) {
	return m.Net.Listen(local, filter)
}

// MulticastReceiver implements Network.
func (m MemNetwork) MulticastReceiver(group netip.AddrPort, _ string, filter bus.Filter) (Endpoint, error) {
	c, err := m.Net.Listen(netip.AddrPortFrom(m.Host, group.Port()), filter)
	if err != nil {
		return nil, err
	}
	if err := c.JoinGroup(group.Addr()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// MulticastSender implements Network.
func (m MemNetwork) MulticastSender(netip.AddrPort, string, int) (Endpoint, error) {
	return m.Net.Listen(netip.AddrPortFrom(m.Host, 0), bus.SendOnly)
}

// FitDatagram checks a datagram size of datagramBytes (0: the default)
// against network nw and returns the size to use. With real UDP sockets
// (nw nil or UDPNetwork) the multicast interface must exist, be up, and
// have an MTU that holds a datagram of that size with its IPv4 and UDP
// headers: the sockets would refuse a missing interface too, but only
// after the journal was opened, and an MTU too small would pass them and
// fragment every frame. A size the operator set is refused when the MTU
// cannot hold it; the default shrinks to the MTU instead (a 1400-byte
// tunnel or overlay gets 1372-byte datagrams, not a node that will not
// start): every receiver's buffers hold at least bus.DatagramBytesDefault
// (bus.RecvBufferBytes), so a default node on a smaller interface still
// reads its peers' and clients' default datagrams whole.
func FitDatagram(nw Network, iface string, datagramBytes int) (int, error) {
	explicit := datagramBytes != 0
	if !explicit {
		datagramBytes = wire.DefaultDatagramLen
	}
	if datagramBytes < wire.MinDatagramLen || datagramBytes > wire.MaxFrameLen {
		return 0, fmt.Errorf("datagram size %d bytes not in %d..%d", datagramBytes, wire.MinDatagramLen, wire.MaxFrameLen)
	}
	switch nw.(type) {
	case nil, UDPNetwork:
		err := bus.CheckInterfaceMTU(iface, datagramBytes)
		var me *bus.MTUError
		if fits := 0; !explicit && errors.As(err, &me) {
			if fits = me.MTU - bus.IPv4UDPHeaderBytes; fits >= wire.MinDatagramLen {
				datagramBytes, err = fits, nil
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return datagramBytes, nil
}

// DatagramLen is the frame budget of one datagram of datagramBytes: the
// MAC tag, when frames are sealed, must fit too.
func DatagramLen(datagramBytes int, sealed bool) int {
	if sealed {
		return datagramBytes - wire.TagLen
	}
	return datagramBytes
}
