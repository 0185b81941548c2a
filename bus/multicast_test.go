//go:build linux

package bus

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/seqbus/seqbus/internal/netns"
)

var testGroup = netip.MustParseAddrPort("239.7.7.7:40000")

func TestMulticastConfigRefused(t *testing.T) {
	cases := []struct {
		name string
		cfg  MulticastSenderConfig
		want error
	}{
		{"missing interface", MulticastSenderConfig{Group: testGroup, Interface: "sbnope0"}, ErrNoInterface},
		{"unicast group", MulticastSenderConfig{Group: netip.MustParseAddrPort("127.0.0.1:40000")}, ErrConfig},
		{"no port", MulticastSenderConfig{Group: netip.MustParseAddrPort("239.7.7.7:0")}, ErrConfig},
		{"ipv6 group", MulticastSenderConfig{Group: netip.MustParseAddrPort("[ff02::1]:40000")}, ErrConfig},
		{"ttl too big", MulticastSenderConfig{Group: testGroup, TTL: 256}, ErrConfig},
		{"ttl negative", MulticastSenderConfig{Group: testGroup, TTL: -1}, ErrConfig},
		{"ipv6 source", MulticastSenderConfig{Group: testGroup, Source: netip.MustParseAddrPort("[::1]:0")}, ErrConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := NewMulticastSender(tc.cfg)
			if err == nil {
				u.Close()
				t.Fatal("sender started")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("receiver missing interface", func(t *testing.T) {
		u, err := ListenMulticast(MulticastReceiverConfig{Group: testGroup, Interface: "sbnope0"})
		if err == nil {
			u.Close()
			t.Fatal("receiver started")
		}
		if !errors.Is(err, ErrNoInterface) {
			t.Fatalf("err = %v, want ErrNoInterface", err)
		}
	})
}

// TestMulticastReceiverSaysWhoHoldsItsPort: a unicast socket of this host
// on the group's port takes the receiver's wildcard bind; the error says so.
func TestMulticastReceiverSaysWhoHoldsItsPort(t *testing.T) {
	l, err := ListenUnicast(UnicastConfig{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	group := netip.AddrPortFrom(testGroup.Addr(), l.LocalAddr().Port())
	u, err := ListenMulticast(MulticastReceiverConfig{Group: group})
	if err == nil {
		u.Close()
		t.Fatal("receiver started on a port that is taken")
	}
	if !strings.Contains(err.Error(), "held by another socket on this host") {
		t.Fatalf("err = %v, want it to say the port is held", err)
	}
}

func TestMulticastSenderRefusesDownInterface(t *testing.T) {
	netns.Require(t)
	h := netns.New(t)
	h.Run(t, "ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	// v0 exists but is down.
	err := h.Do(func() error {
		u, err := NewMulticastSender(MulticastSenderConfig{Group: testGroup, Interface: "v0"})
		if err == nil {
			u.Close()
		}
		return err
	})
	if !errors.Is(err, ErrNoInterface) {
		t.Fatalf("err = %v, want ErrNoInterface", err)
	}
}

// multicastHost opens a sender and receivers in a private namespace.
func multicastHost(t *testing.T, receivers int, filter Filter) (*UDP, []*UDP) {
	t.Helper()
	netns.Require(t)
	h := netns.New(t)
	var s *UDP
	rs := make([]*UDP, receivers)
	inHost(t, h, func() error {
		var err error
		if s, err = NewMulticastSender(MulticastSenderConfig{Group: testGroup}); err != nil {
			return err
		}
		for i := range rs {
			if rs[i], err = ListenMulticast(MulticastReceiverConfig{Group: testGroup, Filter: filter}); err != nil {
				return err
			}
		}
		return nil
	})
	t.Cleanup(func() {
		s.Close()
		for _, r := range rs {
			r.Close()
		}
	})
	return s, rs
}

func TestMulticastReceiversShareHost(t *testing.T) {
	s, rs := multicastHost(t, 2, nil)
	r := s.Report()
	if r.Interface != "lo" || r.TTL != 0 || !r.Loopback {
		t.Errorf("sender report %+v, want lo, TTL 0, loopback on", r)
	}
	p := ipv4.NewPacketConn(s.conn)
	if ttl, err := p.MulticastTTL(); err != nil || ttl != 0 {
		t.Errorf("kernel multicast TTL = %d, %v; want 0", ttl, err)
	}
	msgs := payloads(200)
	if err := s.Send(msgs, testGroup); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		got := receiveN(t, r, len(msgs), 128)
		if len(got) != len(msgs) {
			t.Fatalf("receiver %d got %d of %d", i, len(got), len(msgs))
		}
		// Nothing more: TTL 0 on lo yields exactly one loopback copy.
		bt := newBatch(4, 128)
		if n, _ := r.Receive(bt.bufs, bt.sizes, bt.from, 20*time.Millisecond); n != 0 {
			t.Errorf("receiver %d got %d extra datagrams", i, n)
		}
		if c := r.Counters(); c.Delivered() != 200 || c.Dropped() != 0 || c.ReceiveOverflows != 0 {
			t.Errorf("receiver %d counters %+v", i, c)
		}
	}
}

func TestMulticastWrongGroupDropped(t *testing.T) {
	netns.Require(t)
	h := netns.New(t)
	var s, r, plain *UDP
	inHost(t, h, func() error {
		var err error
		if s, err = NewMulticastSender(MulticastSenderConfig{Group: testGroup}); err != nil {
			return err
		}
		// Bound to the wildcard, only the IP_PKTINFO check stands between
		// the receiver and unicast sent to its port.
		if r, err = ListenMulticast(MulticastReceiverConfig{Group: testGroup, bindWildcard: true}); err != nil {
			return err
		}
		plain, err = ListenUnicast(UnicastConfig{})
		return err
	})
	defer s.Close()
	defer r.Close()
	defer plain.Close()
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), testGroup.Port())
	if err := plain.Send([][]byte{[]byte("unicast")}, to); err != nil {
		t.Fatal(err)
	}
	if err := s.Send([][]byte{[]byte("group")}, testGroup); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, r, 1, 64)
	if len(got) != 1 || string(got[0]) != "group" {
		t.Fatalf("got %q, want only the group datagram", got)
	}
	if c := r.Counters(); c.Drops[DropWrongGroup] != 1 || c.DatagramsReceived != 2 {
		t.Errorf("counters %+v, want one wrong-group drop", c)
	}
}

func TestMulticastOtherGroupNotReceived(t *testing.T) {
	// IP_MULTICAST_ALL is off and the socket is bound to its group, so a
	// group joined by another socket on the same port does not leak in.
	netns.Require(t)
	h := netns.New(t)
	other := netip.MustParseAddrPort("239.7.7.8:40000")
	var s, mine, theirs *UDP
	inHost(t, h, func() error {
		var err error
		if s, err = NewMulticastSender(MulticastSenderConfig{Group: other}); err != nil {
			return err
		}
		if mine, err = ListenMulticast(MulticastReceiverConfig{Group: testGroup}); err != nil {
			return err
		}
		theirs, err = ListenMulticast(MulticastReceiverConfig{Group: other})
		return err
	})
	defer s.Close()
	defer mine.Close()
	defer theirs.Close()
	if err := s.Send([][]byte{[]byte("other")}, other); err != nil {
		t.Fatal(err)
	}
	if got := receiveN(t, theirs, 1, 64); len(got) != 1 {
		t.Fatalf("the other group's receiver got %d", len(got))
	}
	bt := newBatch(4, 64)
	if n, _ := mine.Receive(bt.bufs, bt.sizes, bt.from, 20*time.Millisecond); n != 0 || mine.Counters().DatagramsReceived != 0 {
		t.Errorf("receiver of %v saw %d datagrams for %v", testGroup, mine.Counters().DatagramsReceived, other)
	}
}

func TestMulticastLoopbackOnLAN(t *testing.T) {
	// Off lo, IP_MULTICAST_LOOP decides whether receivers on the sending
	// host get a copy; a receiver on another host always does (TTL 1).
	netns.Require(t)
	lan := netns.NewLAN(t, 2)
	for _, loop := range []bool{true, false} {
		var s, local, remote *UDP
		inHost(t, lan.Hosts[0], func() error {
			var err error
			s, err = NewMulticastSender(MulticastSenderConfig{Group: testGroup, Interface: "eth0", DisableLoopback: !loop})
			if err != nil {
				return err
			}
			local, err = ListenMulticast(MulticastReceiverConfig{Group: testGroup, Interface: "eth0"})
			return err
		})
		inHost(t, lan.Hosts[1], func() error {
			var err error
			remote, err = ListenMulticast(MulticastReceiverConfig{Group: testGroup, Interface: "eth0"})
			return err
		})
		if r := s.Report(); r.TTL != 1 || r.Loopback != loop || r.Local.Addr() != lan.Hosts[0].Addr {
			t.Errorf("loop %v: report %+v, want TTL 1 from %v", loop, r, lan.Hosts[0].Addr)
		}
		if err := s.Send([][]byte{[]byte("x")}, testGroup); err != nil {
			t.Fatal(err)
		}
		if got := receiveN(t, remote, 1, 64); len(got) != 1 {
			t.Errorf("loop %v: remote receiver got %d", loop, len(got))
		}
		bt := newBatch(4, 64)
		want := 0
		if loop {
			want = 1
		}
		if n, _ := local.Receive(bt.bufs, bt.sizes, bt.from, 50*time.Millisecond); n != want {
			t.Errorf("loop %v: local receiver got %d, want %d", loop, n, want)
		}
		s.Close()
		local.Close()
		remote.Close()
	}
}

func TestSocketReport(t *testing.T) {
	h := privateHost(t)
	var u *UDP
	inHost(t, h, func() error {
		var err error
		u, err = ListenUnicast(UnicastConfig{Tuning: Tuning{
			RecvBufferBytes: 1 << 20, SendBufferBytes: 1 << 20,
			BusyPollUs: 50, PreferBusyPoll: true, BusyPollBudget: 8,
		}})
		return err
	})
	defer u.Close()
	r := u.Report()
	if r.RecvBufferBytesRequested != 1<<20 || r.RecvBufferBytesGranted < 1<<20 {
		t.Errorf("receive buffer asked %d granted %d", r.RecvBufferBytesRequested, r.RecvBufferBytesGranted)
	}
	if r.SendBufferBytesGranted < 1<<20 {
		t.Errorf("send buffer granted %d", r.SendBufferBytesGranted)
	}
	// Granted or refused, never silently neither.
	if (r.BusyPollErr == nil) != (r.BusyPollUs == 50) {
		t.Errorf("busy poll: granted %d µs, error %v", r.BusyPollUs, r.BusyPollErr)
	}
	t.Logf("report: %+v", r)
}

// TestCheckInterfaceNamesWhatExists: a missing interface is refused
// before anything opens, with one line naming it and the host's
// interfaces (lo at least).
func TestCheckInterfaceNamesWhatExists(t *testing.T) {
	if err := CheckInterface("lo"); err != nil {
		t.Fatalf("lo: %v", err)
	}
	err := CheckInterface("sbnope0")
	var ie *InterfaceError
	if !errors.As(err, &ie) || !errors.Is(err, ErrNoInterface) || ie.Name != "sbnope0" {
		t.Fatalf("err = %v, want an InterfaceError for sbnope0 matching ErrNoInterface", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `"sbnope0" does not exist`) || !strings.Contains(msg, "lo") || strings.Contains(msg, "\n") {
		t.Fatalf("message %q: want one line naming sbnope0 and listing lo", msg)
	}
	if _, err := NewMulticastSender(MulticastSenderConfig{Group: testGroup, Interface: "sbnope0"}); !errors.As(err, &ie) {
		t.Fatalf("sender on a missing interface: err = %v, want an InterfaceError", err)
	}
}

// A receiver that left its group gets none of the group's datagrams while
// another receiver on the host (a same-host standby) still gets every one;
// rejoined, it gets them again. A primary leaves its group this way.
func TestMulticastLeaveAndRejoinGroup(t *testing.T) {
	s, rs := multicastHost(t, 2, nil)
	left, stays := rs[0], rs[1]
	if !left.Joined() {
		t.Fatal("a new receiver is not joined")
	}
	for range 2 { // a second leave is a no-op, not an error
		if err := left.LeaveGroup(); err != nil {
			t.Fatal(err)
		}
	}
	if left.Joined() {
		t.Fatal("Joined after LeaveGroup")
	}
	msgs := payloads(20)
	if err := s.Send(msgs, testGroup); err != nil {
		t.Fatal(err)
	}
	if got := receiveN(t, stays, len(msgs), 128); len(got) != len(msgs) {
		t.Fatalf("the receiver that stayed got %d of %d", len(got), len(msgs))
	}
	bt := newBatch(4, 128)
	if n, _ := left.Receive(bt.bufs, bt.sizes, bt.from, 20*time.Millisecond); n != 0 {
		t.Fatalf("the receiver that left got %d datagrams", n)
	}
	if c := left.Counters(); c.DatagramsReceived != 0 {
		t.Fatalf("the receiver that left counted %d datagrams", c.DatagramsReceived)
	}
	for range 2 {
		if err := left.RejoinGroup(); err != nil {
			t.Fatal(err)
		}
	}
	if !left.Joined() {
		t.Fatal("not Joined after RejoinGroup")
	}
	if err := s.Send(msgs, testGroup); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if got := receiveN(t, r, len(msgs), 128); len(got) != len(msgs) {
			t.Fatalf("receiver %d got %d of %d after the rejoin", i, len(got), len(msgs))
		}
	}
	// A socket that is not a multicast receiver has no group to leave.
	if err := s.LeaveGroup(); !errors.Is(err, ErrConfig) {
		t.Fatalf("LeaveGroup on a sender: %v, want ErrConfig", err)
	}
}
