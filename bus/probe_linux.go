package bus

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// probeOpen opens a non-blocking UDP socket connected to to.
func probeOpen(to netip.AddrPort) (int, error) {
	if !to.IsValid() || to.Port() == 0 {
		return -1, fmt.Errorf("bus: probe %s: not a peer address", to)
	}
	fam, ip := unix.AF_INET6, to.Addr().Unmap()
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(to.Port()), Addr: ip.As16(), ZoneId: zoneIndex(ip.Zone())}
	if ip.Is4() {
		fam = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(to.Port()), Addr: ip.As4()}
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("bus: probe socket: %w", err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bus: probe connect %s: %w", to, err)
	}
	return fd, nil
}

// probeSend sends frame; refused reports that the send returned the
// refusal of an earlier probe instead (the socket's pending error).
func probeSend(fd int, frame []byte) (refused bool, err error) {
	_, err = unix.Write(fd, frame)
	if errors.Is(err, unix.ECONNREFUSED) {
		return true, nil
	}
	return false, err
}

// probeCheck takes the socket's pending error: refused for ECONNREFUSED,
// other for any other.
func probeCheck(fd int) (refused, other bool) {
	e, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return false, true
	}
	return e == int(unix.ECONNREFUSED), e != 0 && e != int(unix.ECONNREFUSED)
}

func probeClose(fd int) { unix.Close(fd) }

// zoneIndex is an IPv6 zone's interface index (a link-local peer's
// fe80::1%eth0); 0 for none or an unknown one (connect then fails, and
// the probe counts as an error).
func zoneIndex(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	return 0
}
