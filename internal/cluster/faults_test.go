package cluster

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/netns"
)

// delivered sends one datagram to 127.0.0.1:port inside h and reports
// whether it arrived within 200 ms.
func delivered(t *testing.T, h *netns.Host, port uint16) bool {
	t.Helper()
	var got bool
	err := h.Do(func() error {
		dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)}
		rc, err := net.ListenUDP("udp4", dst)
		if err != nil {
			return err
		}
		defer rc.Close()
		sc, err := net.DialUDP("udp4", nil, dst)
		if err != nil {
			return err
		}
		defer sc.Close()
		if _, err := sc.Write([]byte("ping")); err != nil {
			return err
		}
		_ = rc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 16)
		n, _, err := rc.ReadFromUDP(buf)
		got = err == nil && string(buf[:n]) == "ping"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestFaultsDropInNamespace: a blackout and a unicast hold drop what they
// name inside the namespace, and their end restores delivery.
func TestFaultsDropInNamespace(t *testing.T) {
	netns.Require(t)
	netns.RequireTool(t, "nft")
	h := netns.New(t)
	const port = 7100
	if !delivered(t, h, port) {
		t.Fatal("no delivery before any fault")
	}
	if err := Blackout(h.Name, port); err != nil {
		t.Fatal(err)
	}
	if delivered(t, h, port) {
		t.Fatal("delivered through a blackout")
	}
	if !delivered(t, h, port+1) {
		t.Fatal("a blackout of one port dropped another")
	}
	if err := EndBlackout(h.Name); err != nil {
		t.Fatal(err)
	}
	if !delivered(t, h, port) {
		t.Fatal("no delivery after the blackout ended")
	}
	if err := HoldUnicast(h.Name, netip.MustParseAddr("127.0.0.1"), port); err != nil {
		t.Fatal(err)
	}
	if delivered(t, h, port) {
		t.Fatal("delivered through a hold")
	}
	if err := ReleaseUnicast(h.Name); err != nil {
		t.Fatal(err)
	}
	if !delivered(t, h, port) {
		t.Fatal("no delivery after the release")
	}
	if err := EndBlackout(h.Name); err == nil {
		t.Fatal("ending a blackout never started: no error")
	}
}
