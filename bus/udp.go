package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

// DefaultInterface is the multicast interface used when a config names none.
// Loopback keeps every datagram on the host unless the user asks otherwise.
const DefaultInterface = "lo"

// sendZeroProgressMax bounds how often Send retries a sendmmsg call that
// returned success with zero datagrams sent before giving up.
const sendZeroProgressMax = 3

// Tuning holds the socket options a user tunes by. Zero values leave the
// kernel defaults.
type Tuning struct {
	// RecvBufferBytes asks for SO_RCVBUF (SO_RCVBUFFORCE first, which works
	// as root above net.core.rmem_max). Report says what was granted.
	RecvBufferBytes int
	// SendBufferBytes asks for SO_SNDBUF (SO_SNDBUFFORCE first).
	SendBufferBytes int
	// BusyPollUs sets SO_BUSY_POLL: microseconds the kernel may busy-poll
	// the device queue on a blocking read. Needs a NAPI device (not lo) and,
	// above net.core.busy_read, CAP_NET_ADMIN. Refusals go to the Report.
	BusyPollUs int
	// PreferBusyPoll sets SO_PREFER_BUSY_POLL (Linux 5.11+).
	PreferBusyPoll bool
	// BusyPollBudget sets SO_BUSY_POLL_BUDGET, packets per busy-poll round.
	BusyPollBudget int
	// GRO turns UDP_GRO on (Linux 5.0 and later; ignored by a send-only
	// socket): a run of datagrams that arrives as one message (a sender's
	// UDP GSO run across loopback or a veth, a NIC's GRO for UDP) is read
	// into one buffer and handed out one datagram at a time, as plain
	// reads would: the stack is crossed once a run, not once a datagram.
	// It costs GROBufferBytes of memory a socket. Report.GRO says whether
	// the kernel took it. Off by default: on loopback here it saved no
	// CPU a command end to end (docs/tuning.md, "UDP_GRO").
	GRO bool
}

// Report says what the kernel granted for a socket.
type Report struct {
	Local                    netip.AddrPort
	Interface                string // multicast endpoints only
	TTL                      int    // multicast sender only
	Loopback                 bool   // multicast sender only
	RecvBufferBytesRequested int
	RecvBufferBytesGranted   int // as getsockopt reports it (Linux doubles the request)
	SendBufferBytesRequested int
	SendBufferBytesGranted   int
	BusyPollUs               int   // granted SO_BUSY_POLL, read back
	BusyPollErr              error // why SO_BUSY_POLL was refused, if asked
	PreferBusyPollErr        error
	BusyPollBudgetErr        error
	BindToDeviceErr          error // why SO_BINDTODEVICE was refused (multicast sender)
	// GRO: the socket reads coalesced runs (UDP_GRO; Tuning.GRO).
	// GROErr is why the kernel refused it, when it did.
	GRO    bool
	GROErr error
	// SendOnly: the socket only sends (a multicast sender). Its receive
	// buffer is the kernel's minimum whatever Tuning asked, so datagrams
	// injected into it cannot pin memory; a Drainer empties and counts them.
	SendOnly bool
}

// UnicastConfig configures a unicast endpoint (NAK, ACK, retransmit, lease).
type UnicastConfig struct {
	// Addr is the local address. The zero value binds 127.0.0.1 on an
	// ephemeral port, so an unconfigured endpoint cannot be reached from off
	// the host.
	Addr   netip.AddrPort
	Tuning Tuning
	Filter Filter
}

// MulticastSenderConfig configures a multicast sender.
type MulticastSenderConfig struct {
	Group netip.AddrPort // IPv4 multicast group and port; required
	// Interface pins outgoing multicast (IP_MULTICAST_IF) and, where the
	// kernel allows, the whole socket (SO_BINDTODEVICE). "" means lo. A name
	// that does not exist or is down is refused with ErrNoInterface.
	Interface string
	// TTL: 0 means the default, 0 on lo (never forwarded off the host) and
	// 1 elsewhere (one LAN segment, never routed). 1..255 set it.
	TTL int
	// DisableLoopback turns IP_MULTICAST_LOOP off, so receivers on the
	// sending host do not get a copy. It has no effect on lo, where the
	// datagram itself comes back through the loopback device.
	DisableLoopback bool
	// Source is the local address (and port) to send from. The zero value
	// uses the interface's first IPv4 address and an ephemeral port.
	Source netip.AddrPort
	Tuning Tuning
}

// MulticastReceiverConfig configures a multicast receiver.
type MulticastReceiverConfig struct {
	Group     netip.AddrPort // IPv4 multicast group and port; required
	Interface string         // joins the group here; "" means lo
	Tuning    Tuning
	Filter    Filter

	// bindWildcard binds 0.0.0.0:port instead of group:port; tests use it to
	// show the wrong-group check that backs up the kernel's filter.
	bindWildcard bool
}

// UDP is a UDP socket with batched, allocation-free I/O on Linux.
type UDP struct {
	conn   *net.UDPConn
	raw    syscall.RawConn
	local  netip.AddrPort
	group  netip.AddrPort // valid on a multicast receiver: datagrams must be for it
	ifi    *net.Interface // a multicast receiver's interface (for LeaveGroup)
	is4    bool           // AF_INET socket
	filter Filter
	report Report

	counters counters

	// memberMu guards left: the receiver left its group (LeaveGroup) and
	// has not rejoined it.
	memberMu sync.Mutex
	left     bool

	recvMu      sync.Mutex
	deadlineSet bool // a read deadline is armed; guarded by recvMu
	// buffered: a coalesced run read with UDP_GRO still holds datagrams
	// Receive has not handed out. The kernel's queue (what epoll sees)
	// may be empty meanwhile, so a poller asks Buffered before it parks.
	buffered atomic.Bool

	sendMu sync.Mutex

	sys udpSys // platform part: preallocated batch arrays
}

var (
	_ Conn          = (*UDP)(nil)
	_ CounterReader = (*UDP)(nil)
)

// ListenUnicast opens a unicast endpoint.
func ListenUnicast(cfg UnicastConfig) (*UDP, error) {
	addr := cfg.Addr
	if !addr.IsValid() {
		addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0)
	}
	u, err := listen(addr, socketOptions{}, cfg.Tuning)
	if err != nil {
		return nil, err
	}
	u.filter = cfg.Filter
	return u, nil
}

// NewMulticastSender opens a socket that sends to cfg.Group through the
// named interface only.
func NewMulticastSender(cfg MulticastSenderConfig) (*UDP, error) {
	if err := checkGroup(cfg.Group); err != nil {
		return nil, err
	}
	if cfg.TTL < 0 || cfg.TTL > 255 {
		return nil, fmt.Errorf("%w: TTL %d not in 0..255", ErrConfig, cfg.TTL)
	}
	ifi, err := lookupInterface(cfg.Interface)
	if err != nil {
		return nil, err
	}
	ttl := cfg.TTL
	if ttl == 0 && ifi.Flags&net.FlagLoopback == 0 {
		ttl = 1
	}
	source := cfg.Source
	if !source.Addr().IsValid() {
		source = netip.AddrPortFrom(interfaceAddr4(ifi), source.Port())
	}
	if !source.Addr().Is4() {
		return nil, fmt.Errorf("%w: source %v is not IPv4", ErrConfig, source)
	}
	u, err := listen(source, socketOptions{bindDevice: ifi.Name, sendOnly: true}, cfg.Tuning)
	if err != nil {
		return nil, err
	}
	// Nothing is ever meant to arrive here, so whatever does is dropped and
	// counted by whoever drains the socket (a Drainer).
	u.filter = SendOnly
	p := ipv4.NewPacketConn(u.conn)
	if err := p.SetMulticastInterface(ifi); err != nil {
		u.Close()
		return nil, fmt.Errorf("bus: set multicast interface %s: %w", ifi.Name, err)
	}
	if err := p.SetMulticastTTL(ttl); err != nil {
		u.Close()
		return nil, fmt.Errorf("bus: set multicast TTL: %w", err)
	}
	if err := p.SetMulticastLoopback(!cfg.DisableLoopback); err != nil {
		u.Close()
		return nil, fmt.Errorf("bus: set multicast loopback: %w", err)
	}
	u.report.Interface = ifi.Name
	u.report.TTL = ttl
	u.report.Loopback = !cfg.DisableLoopback
	return u, nil
}

// ListenMulticast opens a receiver joined to cfg.Group on the named
// interface. Several receivers may share a host (SO_REUSEADDR and
// SO_REUSEPORT); each gets every datagram.
func ListenMulticast(cfg MulticastReceiverConfig) (*UDP, error) {
	if err := checkGroup(cfg.Group); err != nil {
		return nil, err
	}
	ifi, err := lookupInterface(cfg.Interface)
	if err != nil {
		return nil, err
	}
	bind := cfg.Group
	if cfg.bindWildcard {
		bind = netip.AddrPortFrom(netip.IPv4Unspecified(), cfg.Group.Port())
	}
	u, err := listen(bind, socketOptions{reuse: true, multicastReceiver: true}, cfg.Tuning)
	if errors.Is(err, syscall.EADDRINUSE) {
		// Go binds a multicast group's socket to the wildcard address, so
		// any socket of this host on the port without SO_REUSEPORT (a
		// unicast listener, a witness) takes it.
		return nil, fmt.Errorf("%w (port %d is held by another socket on this host: the group's receiver binds 0.0.0.0:%d)", err, cfg.Group.Port(), cfg.Group.Port())
	}
	if err != nil {
		return nil, err
	}
	p := ipv4.NewPacketConn(u.conn)
	group := &net.UDPAddr{IP: cfg.Group.Addr().AsSlice()}
	if err := p.JoinGroup(ifi, group); err != nil {
		u.Close()
		return nil, fmt.Errorf("bus: join %v on %s: %w", cfg.Group.Addr(), ifi.Name, err)
	}
	u.group = cfg.Group
	u.ifi = ifi
	u.filter = cfg.Filter
	u.report.Interface = ifi.Name
	return u, nil
}

// LeaveGroup makes a multicast receiver leave its group
// (IP_DROP_MEMBERSHIP): the kernel stops queueing the group's datagrams
// on it, so a process that sends to the group and needs none of it (a
// primary) is not woken for its own copies, while other sockets on the
// host still get them (the sender's IP_MULTICAST_LOOP stays on).
// Datagrams queued before the call are still received. A second call is a
// no-op; RejoinGroup undoes it. Only on a multicast receiver.
func (u *UDP) LeaveGroup() error {
	return u.setMember(false)
}

// RejoinGroup joins the group LeaveGroup left (IP_ADD_MEMBERSHIP); a
// no-op while joined.
func (u *UDP) RejoinGroup() error {
	return u.setMember(true)
}

func (u *UDP) setMember(join bool) error {
	if u.ifi == nil {
		return fmt.Errorf("%w: not a multicast receiver", ErrConfig)
	}
	u.memberMu.Lock()
	defer u.memberMu.Unlock()
	if u.left != join {
		return nil // already where asked
	}
	p := ipv4.NewPacketConn(u.conn)
	group := &net.UDPAddr{IP: u.group.Addr().AsSlice()}
	var err error
	if join {
		err = p.JoinGroup(u.ifi, group)
	} else {
		err = p.LeaveGroup(u.ifi, group)
	}
	if err != nil {
		verb := "leave"
		if join {
			verb = "rejoin"
		}
		return fmt.Errorf("bus: %s %v on %s: %w", verb, u.group.Addr(), u.ifi.Name, err)
	}
	u.left = !join
	return nil
}

// Joined reports whether a multicast receiver is a member of its group
// (false after LeaveGroup, and on any other socket).
func (u *UDP) Joined() bool {
	u.memberMu.Lock()
	defer u.memberMu.Unlock()
	return u.ifi != nil && !u.left
}

func checkGroup(group netip.AddrPort) error {
	if !group.Addr().Is4() || !group.Addr().IsMulticast() {
		return fmt.Errorf("%w: group %v is not an IPv4 multicast address", ErrConfig, group.Addr())
	}
	if group.Port() == 0 {
		return fmt.Errorf("%w: group %v has no port", ErrConfig, group)
	}
	return nil
}

// InterfaceError says which multicast interface is missing or down, and
// which interfaces the host has, so an operator sees the typo at once. It
// matches ErrNoInterface.
type InterfaceError struct {
	Name string   // the interface asked for
	Down bool     // it exists but is down
	Have []string // the host's interfaces, "(down)" after those that are
}

func (e *InterfaceError) Error() string {
	what := "does not exist"
	if e.Down {
		what = "is down"
	}
	return fmt.Sprintf("bus: multicast interface %q %s (this host has: %s)", e.Name, what, strings.Join(e.Have, ", "))
}

// Unwrap makes an InterfaceError match ErrNoInterface.
func (e *InterfaceError) Unwrap() error { return ErrNoInterface }

// CheckInterface returns an *InterfaceError unless the multicast interface
// name ("" is DefaultInterface) exists and is up. It opens nothing: a
// configuration is checked with it before any socket or file is created.
func CheckInterface(name string) error {
	_, err := lookupInterface(name)
	return err
}

// IPv4UDPHeaderBytes is what a datagram's payload carries on the wire
// besides itself: the IPv4 header (20 bytes, no options) and UDP's (8).
const IPv4UDPHeaderBytes = 28

// MTUError says that datagrams of DatagramBytes do not fit the multicast
// interface's MTU: the kernel would fragment every one (and a network that
// drops fragments would lose them all).
type MTUError struct {
	Name          string // the interface
	DatagramBytes int    // the datagram size asked for
	MTU           int    // the interface's MTU
}

func (e *MTUError) Error() string {
	return fmt.Sprintf("bus: datagrams of %d bytes need an MTU of %d on interface %q, which has %d: lower the datagram size to at most %d or raise the interface's MTU",
		e.DatagramBytes, e.DatagramBytes+IPv4UDPHeaderBytes, e.Name, e.MTU, e.MTU-IPv4UDPHeaderBytes)
}

// CheckInterfaceMTU is CheckInterface, and then an *MTUError when a
// datagram of datagramBytes with its IPv4 and UDP headers is larger than
// the interface's MTU. An interface that reports no MTU passes. It opens
// nothing, like CheckInterface.
func CheckInterfaceMTU(name string, datagramBytes int) error {
	ifi, err := lookupInterface(name)
	if err != nil {
		return err
	}
	if ifi.MTU > 0 && datagramBytes+IPv4UDPHeaderBytes > ifi.MTU {
		return &MTUError{Name: ifi.Name, DatagramBytes: datagramBytes, MTU: ifi.MTU}
	}
	return nil
}

func lookupInterface(name string) (*net.Interface, error) {
	if name == "" {
		name = DefaultInterface
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil || ifi.Flags&net.FlagUp == 0 {
		return nil, &InterfaceError{Name: name, Down: err == nil, Have: interfaceNames()}
	}
	return ifi, nil
}

// interfaceNames lists the host's interfaces for an InterfaceError.
func interfaceNames() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return []string{"unknown: " + err.Error()}
	}
	names := make([]string, 0, len(ifs))
	for _, ifi := range ifs {
		n := ifi.Name
		if ifi.Flags&net.FlagUp == 0 {
			n += " (down)"
		}
		names = append(names, n)
	}
	return names
}

// interfaceAddr4 returns the interface's first IPv4 address, or 0.0.0.0
// (the interface is still pinned by IP_MULTICAST_IF).
func interfaceAddr4(ifi *net.Interface) netip.Addr {
	addrs, err := ifi.Addrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
					return ip.Unmap()
				}
			}
		}
	}
	return netip.IPv4Unspecified()
}

// socketOptions are the options that must be set before bind.
type socketOptions struct {
	reuse             bool   // SO_REUSEADDR + SO_REUSEPORT
	bindDevice        string // SO_BINDTODEVICE, best effort, reported
	multicastReceiver bool   // IP_MULTICAST_ALL off, IP_PKTINFO on
	// sendOnly: the smallest receive buffer whatever Tuning asks, and
	// SO_RXQ_OVFL on (Linux) so a drain also sees what the kernel dropped.
	sendOnly bool
}

func listen(addr netip.AddrPort, opts socketOptions, tuning Tuning) (*UDP, error) {
	network := "udp6"
	if addr.Addr().Unmap().Is4() {
		addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
		network = "udp4"
	}
	u := &UDP{is4: network == "udp4"}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return controlBeforeBind(c, opts, &u.report)
	}}
	pc, err := lc.ListenPacket(context.Background(), network, addr.String())
	if err != nil {
		return nil, fmt.Errorf("bus: listen %v: %w", addr, err)
	}
	u.conn = pc.(*net.UDPConn)
	u.raw, err = u.conn.SyscallConn()
	if err != nil {
		u.conn.Close()
		return nil, fmt.Errorf("bus: raw conn: %w", err)
	}
	u.local = u.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	u.report.Local = u.local
	if err := u.tune(tuning, opts); err != nil {
		u.conn.Close()
		return nil, err
	}
	u.sys.init(opts.multicastReceiver || opts.sendOnly || u.report.GRO)
	u.report.SendOnly = opts.sendOnly
	return u, nil
}

// LocalAddr is the bound address.
func (u *UDP) LocalAddr() netip.AddrPort { return u.local }

// Group is the joined group of a multicast receiver (zero otherwise).
func (u *UDP) Group() netip.AddrPort { return u.group }

// Report says what the kernel granted when the socket was opened.
func (u *UDP) Report() Report { return u.report }

// Buffered reports whether a Receive would hand out datagrams already
// read from the kernel (the rest of a coalesced run, UDP_GRO) without a
// system call: the socket's fd may then poll empty. Every park on the fd
// (Poller, Parker) checks it first.
func (u *UDP) Buffered() bool { return u.buffered.Load() }

// Counters returns a snapshot of the counters.
func (u *UDP) Counters() Counters { return u.counters.snapshot() }

// Close closes the socket; a Receive parked on it returns ErrClosed.
func (u *UDP) Close() error {
	if err := u.conn.Close(); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return ErrClosed
		}
		return err
	}
	return nil
}

// Receive implements Receiver.
func (u *UDP) Receive(bufs [][]byte, sizes []int, from []netip.AddrPort, wait time.Duration) (int, error) {
	count := min(len(bufs), len(sizes), len(from), BatchSizeMax)
	if count == 0 {
		return 0, nil
	}
	u.recvMu.Lock()
	defer u.recvMu.Unlock()
	if u.deadlineSet {
		// An expired deadline would fail even a non-blocking poll.
		if err := u.conn.SetReadDeadline(time.Time{}); err != nil {
			return 0, u.receiveError(err)
		}
		u.deadlineSet = false
	}
	// Poll first: when data is waiting this avoids arming a deadline.
	read, n, err := u.sys.receive(u, bufs[:count], sizes, from, false)
	if err != nil || read > 0 || wait == 0 {
		return n, u.receiveError(err)
	}
	if wait > 0 {
		if err := u.conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
			return 0, u.receiveError(err)
		}
		u.deadlineSet = true
	}
	_, n, err = u.sys.receive(u, bufs[:count], sizes, from, true)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	return n, u.receiveError(err)
}

func (u *UDP) receiveError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	u.counters.receiveErrors.Add(1)
	return err
}

// Send implements Sender.
func (u *UDP) Send(bufs [][]byte, to netip.AddrPort) error {
	if len(bufs) == 0 {
		return nil
	}
	if u.is4 {
		if !to.Addr().Unmap().Is4() {
			u.counters.sendErrors.Add(1)
			return fmt.Errorf("%w: IPv4 socket cannot send to %v", ErrConfig, to)
		}
		to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	}
	u.sendMu.Lock()
	defer u.sendMu.Unlock()
	err := u.sys.send(u, bufs, to)
	if err != nil {
		u.counters.sendErrors.Add(1)
		if errors.Is(err, net.ErrClosed) {
			return ErrClosed
		}
	}
	return err
}
