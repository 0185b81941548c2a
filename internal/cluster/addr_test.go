package cluster

import (
	"net"
	"testing"
)

// TestFreeLoopbackPortsBelowEphemeral: the ports are distinct, bindable
// on 127.0.0.1, and drawn below the kernel's ephemeral range, where no
// other process's port-0 bind can take them between the pick and the bind.
func TestFreeLoopbackPortsBelowEphemeral(t *testing.T) {
	lo := ephemeralLow()
	if lo <= minPickPort+1000 {
		t.Skipf("ephemeral range starts at %d: no room below it, the kernel picks", lo)
	}
	ports, err := FreeLoopbackPorts(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint16]bool{}
	for _, p := range ports {
		if int(p) < minPickPort || int(p) >= lo {
			t.Fatalf("port %d outside %d..%d", p, minPickPort, lo-1)
		}
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(p)})
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		c.Close()
	}
}
