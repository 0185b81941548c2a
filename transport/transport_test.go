package transport

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

var (
	listen = netip.MustParseAddrPort("127.0.0.1:7001")
	group  = netip.MustParseAddrPort("239.1.2.3:7000")
	from   = netip.MustParseAddrPort("127.0.0.1:9")
)

// fakeEndpoint records every send call, or fails it.
type fakeEndpoint struct {
	calls [][][]byte
	fail  bool
}

func (e *fakeEndpoint) Receive([][]byte, []int, []netip.AddrPort, time.Duration) (int, error) {
	return 0, nil
}

func (e *fakeEndpoint) Send(b [][]byte, _ netip.AddrPort) error {
	if e.fail {
		return errors.New("send failed")
	}
	var c [][]byte
	for _, f := range b {
		c = append(c, bytes.Clone(f))
	}
	e.calls = append(e.calls, c)
	return nil
}
func (e *fakeEndpoint) Close() error           { return nil }
func (e *fakeEndpoint) Counters() bus.Counters { return bus.Counters{} }

type fakeNetwork struct{ uc, mc, send *fakeEndpoint }

func (f fakeNetwork) Unicast(netip.AddrPort, bus.Filter) (Endpoint, error) { return f.uc, nil }
func (f fakeNetwork) MulticastReceiver(netip.AddrPort, string, bus.Filter) (Endpoint, error) {
	return f.mc, nil
}
func (f fakeNetwork) MulticastSender(netip.AddrPort, string, int) (Endpoint, error) {
	return f.send, nil
}

func open(t *testing.T, key *auth.MasterKey, node uint32) (*Transport, fakeNetwork) {
	t.Helper()
	nw := fakeNetwork{uc: &fakeEndpoint{}, mc: &fakeEndpoint{}, send: &fakeEndpoint{}}
	tr := New(Config{Network: nw, Listen: listen, Group: group, Stream: 9, Node: node, DatagramBytes: wire.DefaultDatagramLen, Key: key})
	if err := tr.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr, nw
}

func heartbeat(node uint32) []byte {
	hb := wire.Heartbeat{Origin: wire.Origin{Stream: 9, Node: node, Epoch: 1}, HighestSeq: 3}
	return hb.Append(nil)
}

// The multicast filter drops the node's own frames at the header, before
// the checksum, and passes everyone else's, commands (whose node field
// is the client's, whatever it is) and lease frames.
func TestMulticastFilterDropsOwnFrames(t *testing.T) {
	tr, _ := open(t, nil, 1)
	own := heartbeat(1)
	own[len(own)-1] ^= 0xff // a bad checksum: the filter must not need it
	b := wire.NewBatch(0)
	b.Reset(wire.TypeCommand, wire.Origin{Stream: 9, Node: 1}, 1)
	b.Add([]byte("order"))
	lease := (&wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 2}, Holder: 1}).Append(nil)
	for _, c := range []struct {
		name string
		pkt  []byte
		want bus.DropReason
	}{
		{"own frame", own, bus.DropOwnFrame},
		{"another node's frame", heartbeat(2), bus.Accept},
		{"a command", b.Bytes(), bus.Accept},
		{"a lease frame", lease, bus.Accept},
		{"garbage", []byte{1, 2, 3}, bus.DropBadHeader},
	} {
		if r := tr.multicastFilter(c.pkt, from); r != c.want {
			t.Errorf("%s: %v, want %v", c.name, r, c.want)
		}
		if c.want != bus.DropOwnFrame {
			if r := headerFilter(c.pkt, from); r != c.want {
				t.Errorf("header filter, %s: %v, want %v", c.name, r, c.want)
			}
		}
	}
}

func masterKey() *auth.MasterKey {
	var k auth.MasterKey
	for i := range k {
		k[i] = byte(i + 1)
	}
	return &k
}

func parse(t *testing.T, pkt []byte) wire.Frame {
	t.Helper()
	f, _, err := wire.Parse(pkt)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// With a key, what one transport sends the other verifies; a frame
// without a MAC, with a broken one, or sealed with another cluster's key
// is refused and counted by reason.
func TestVerifyCountsEachRefusal(t *testing.T) {
	key := masterKey()
	a, anw := open(t, key, 1)
	b, _ := open(t, key, 2)
	a.Send(heartbeat(1), from)
	sealed := anw.uc.calls[0][0]
	// b holds no key for epoch 1 yet: it derives it for a frame above
	// the highest epoch it accepted (0).
	if f := parse(t, sealed); !b.Verify(&f, 0, int64(time.Hour)) || !b.Fresh(&f) {
		t.Fatal("a sealed frame from a member of the cluster was refused")
	}
	if f := parse(t, heartbeat(1)); b.Verify(&f, 1, 0) {
		t.Fatal("a frame without a MAC passed")
	}
	broken := bytes.Clone(sealed)
	broken[len(broken)-1] ^= 1
	if f, _, err := wire.Parse(broken); err == nil && b.Verify(&f, 1, 0) {
		t.Fatal("a frame with a broken MAC passed")
	}
	other := masterKey()
	other[0] ^= 0xff
	c, cnw := open(t, other, 1)
	c.Send(heartbeat(1), from)
	if f := parse(t, cnw.uc.calls[0][0]); b.Verify(&f, 1, 0) {
		t.Fatal("a frame sealed with another key passed")
	}
	got := b.Counters()
	if got.DropNoMAC != 1 || got.DropBadMAC+got.DropUnknownKey < 2 {
		t.Fatalf("counters %+v: want one without a MAC and two refused", got)
	}
	// Without a key every frame passes and nothing is counted.
	plain, _ := open(t, nil, 3)
	if f := parse(t, heartbeat(1)); !plain.Verify(&f, 1, 0) || !plain.Fresh(&f) || plain.Counters() != (Counters{}) {
		t.Fatal("a transport without a key refused or counted a frame")
	}
}

// In a pass, unicast frames leave together when the pass ends, multicast
// ones in calls of at most FramesPerSend, and a failed call counts one
// SendErrors; outside a pass each frame leaves at once.
func TestPassBatchesSendsAndCountsFailures(t *testing.T) {
	tr, nw := open(t, nil, 1)
	tr.Begin()
	tr.Send(heartbeat(1), from)
	tr.Send(heartbeat(1), from)
	if len(nw.uc.calls) != 0 {
		t.Fatalf("%d unicast calls before the pass ended", len(nw.uc.calls))
	}
	tr.End()
	if len(nw.uc.calls) != 1 || len(nw.uc.calls[0]) != 2 {
		t.Fatalf("unicast calls %d, want one of 2 frames", len(nw.uc.calls))
	}
	tr.Begin()
	for range FramesPerSend + 1 {
		tr.Multicast(heartbeat(1))
	}
	tr.End()
	if len(nw.send.calls) != 2 || len(nw.send.calls[0]) != FramesPerSend || len(nw.send.calls[1]) != 1 {
		t.Fatalf("multicast calls %d, want 2: %d frames and 1", len(nw.send.calls), FramesPerSend)
	}
	tr.Send(heartbeat(1), from)
	if len(nw.uc.calls) != 2 {
		t.Fatal("a send outside a pass did not leave at once")
	}
	nw.uc.fail = true
	tr.Send(heartbeat(1), from)
	tr.Begin()
	tr.Send(heartbeat(1), from)
	tr.Send(heartbeat(1), from)
	tr.End()
	if got := tr.Counters().SendErrors; got != 2 {
		t.Fatalf("SendErrors %d, want 2 (one per failed call)", got)
	}
}
