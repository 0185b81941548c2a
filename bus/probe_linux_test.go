package bus

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// waitRefused polls p.Refused until it reports something or 2 s pass
// (the ICMP answer on loopback comes back within the send; the bound
// only keeps a broken kernel from hanging the test).
func waitRefused(t *testing.T, p *Prober, nowNs int64) []uint32 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if got := p.Refused(nowNs); len(got) > 0 || time.Now().After(deadline) {
			return slices.Clone(got)
		}
		time.Sleep(time.Millisecond)
	}
}

// A probe to a live port arrives and is not refused; once the port is
// closed, the next probe's refusal is reported once; a refusal is looked
// for only ProbeWaitNs after a probe.
func TestProberHearsPortUnreachable(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "udp6" {
				addr = "[::1]:0"
			}
			ln, err := net.ListenPacket(network, addr)
			if err != nil {
				t.Skipf("no %s loopback here: %v", network, err)
			}
			to := ln.LocalAddr().(*net.UDPAddr).AddrPort()
			p := NewProber()
			defer p.Close()

			if err := p.Probe(7, to, []byte("probe"), 1); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			ln.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, _, err := ln.ReadFrom(buf); err != nil || string(buf[:n]) != "probe" {
				t.Fatalf("the live peer got %q, %v", buf[:n], err)
			}
			if got := p.Refused(2); len(got) != 0 {
				t.Fatalf("refused %v while the peer listens", got)
			}

			ln.Close()
			if err := p.Probe(7, to, []byte("probe"), 10); err != nil {
				t.Fatal(err)
			}
			if got := waitRefused(t, p, 11); !slices.Equal(got, []uint32{7}) {
				t.Fatalf("refused %v, want [7] once the port is closed", got)
			}
			if got := p.Refused(12); len(got) != 0 {
				t.Fatalf("refused %v again without a new probe", got)
			}
			// A second refusal, looked for too late: not reported.
			p.Probe(7, to, []byte("probe"), 20)
			time.Sleep(20 * time.Millisecond)
			if got := p.Refused(20 + ProbeWaitNs + 1); len(got) != 0 {
				t.Fatalf("refused %v for a probe older than ProbeWaitNs", got)
			}
			st := p.Stats()
			if st.Sent < 2 || st.Refused != 1 || st.SendErrors != 0 {
				t.Fatalf("stats %+v, want >= 2 sent, 1 refused, no send errors", st)
			}
		})
	}
}

// A peer whose address changed gets a socket connected to the new one.
func TestProberFollowsANewAddress(t *testing.T) {
	a, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p := NewProber()
	defer p.Close()
	for _, ln := range []net.PacketConn{a, b} {
		if err := p.Probe(3, ln.LocalAddr().(*net.UDPAddr).AddrPort(), []byte("x"), 1); err != nil {
			t.Fatal(err)
		}
		ln.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := ln.ReadFrom(make([]byte, 8)); err != nil {
			t.Fatalf("%s got nothing: %v", ln.LocalAddr(), err)
		}
	}
	if len(p.peers) != 1 {
		t.Fatalf("%d sockets for one peer", len(p.peers))
	}
	if err := p.Probe(3, netip.AddrPort{}, []byte("x"), 2); err == nil {
		t.Fatal("a probe to no address was sent")
	}
}

// A link-local peer's zone names the interface the probe leaves by.
func TestProberZone(t *testing.T) {
	if got := zoneIndex("lo"); got == 0 {
		t.Fatal("zone lo: no index")
	}
	if got := zoneIndex("1"); got != 1 {
		t.Fatalf("zone 1: index %d", got)
	}
	if got := zoneIndex("no-such-interface"); got != 0 {
		t.Fatalf("unknown zone: index %d", got)
	}
}

// A probe whose send meets the refusal of an earlier one (the socket's
// pending error, not yet taken by Refused) still leaves; the peer is
// reported refused once for both.
func TestProberSendsPastAPendingRefusal(t *testing.T) {
	ln, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := ln.LocalAddr().(*net.UDPAddr).AddrPort()
	ln.Close()
	p := NewProber()
	defer p.Close()
	if err := p.Probe(4, to, []byte("a"), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the refusal comes back, untaken
	if err := p.Probe(4, to, []byte("b"), 2); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Sent != 2 || st.SendErrors != 0 {
		t.Fatalf("stats %+v: want both probes sent", st)
	}
	if got := waitRefused(t, p, 3); !slices.Equal(got, []uint32{4}) {
		t.Fatalf("refused %v, want [4]", got)
	}
	time.Sleep(20 * time.Millisecond)
	if got := p.Refused(4); len(got) != 0 {
		t.Fatalf("refused %v again without a new probe", got)
	}
}
