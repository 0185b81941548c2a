package cluster

import (
	"math/rand/v2"
	"net"
	"net/netip"
)

// FreeLoopbackPort is a UDP port on 127.0.0.1 free a moment ago.
func FreeLoopbackPort() (uint16, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port), nil
}

// FreeLoopbackPorts is n of them.
func FreeLoopbackPorts(n int) ([]uint16, error) {
	ports := make([]uint16, n)
	for i := range ports {
		p, err := FreeLoopbackPort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
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
