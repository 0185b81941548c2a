package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
)

// FreeLoopbackPort is a UDP port free a moment ago, drawn below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): a port the
// kernel handed out for 127.0.0.1:0 goes back to that range when closed,
// and any process's next ephemeral bind (a client socket of a test running
// beside this one) may take it before the process it was picked for binds
// it: "address already in use". Below the range only explicit binds land.
// It binds the wildcard address to check (nothing is sent), so no socket
// on any address holds the port. Falls back to a kernel-picked port when
// the range leaves no room below it.
func FreeLoopbackPort() (uint16, error) {
	lo := ephemeralLow()
	if lo > minPickPort+1000 {
		for range 200 {
			p := uint16(minPickPort + rand.IntN(lo-minPickPort))
			if c, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(p)}); err == nil {
				c.Close()
				return p, nil
			}
		}
	}
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port), nil
}

// minPickPort is the lowest port FreeLoopbackPort draws: above the
// registered services most hosts run.
const minPickPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (32768,
// Linux's default, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if n, _ := fmt.Sscan(string(b), &lo, &hi); n != 2 || lo <= 0 || lo > 65535 {
		return 32768
	}
	return lo
}

// FreeLoopbackPorts is n distinct ones.
func FreeLoopbackPorts(n int) ([]uint16, error) {
	ports := make([]uint16, 0, n)
	for len(ports) < n {
		p, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// Loopback is 127.0.0.1:port.
func Loopback(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

// RandomGroup is a multicast group 239.net.x.y:port with x and y random,
// so runs in parallel rarely share a group.
func RandomGroup(net byte, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, net, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), port)
}
