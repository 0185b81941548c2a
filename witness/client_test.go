package witness

import (
	"errors"
	"math"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

func TestDurationConversions(t *testing.T) {
	toWire := []struct {
		in   int64
		want uint64
		err  bool
	}{
		{0, 0, false}, {1, 1, false}, {math.MaxInt64, math.MaxInt64, false},
		{-1, 0, true}, {math.MinInt64, 0, true},
	}
	for _, tc := range toWire {
		got, err := DurationToWire(tc.in)
		if (err != nil) != tc.err || got != tc.want || (err != nil && !errors.Is(err, ErrDuration)) {
			t.Errorf("DurationToWire(%d) = %d, %v", tc.in, got, err)
		}
	}
	fromWire := []struct {
		in   uint64
		want int64
		err  bool
		sat  int64
	}{
		{0, 0, false, 0}, {1, 1, false, 1},
		{math.MaxInt64, math.MaxInt64, false, math.MaxInt64},
		{math.MaxInt64 + 1, 0, true, math.MaxInt64},
		{math.MaxUint64, 0, true, math.MaxInt64},
	}
	for _, tc := range fromWire {
		got, err := DurationFromWire(tc.in)
		if (err != nil) != tc.err || got != tc.want || (err != nil && !errors.Is(err, ErrDuration)) {
			t.Errorf("DurationFromWire(%d) = %d, %v", tc.in, got, err)
		}
		if s := SaturateFromWire(tc.in); s != tc.sat {
			t.Errorf("SaturateFromWire(%d) = %d, want %d", tc.in, s, tc.sat)
		}
	}
	for _, tc := range []struct{ in, want int64 }{{-5, 0}, {0, 0}, {7, 7}} {
		if got := durationToWireClamped(tc.in); got != uint64(tc.want) {
			t.Errorf("durationToWireClamped(%d) = %d", tc.in, got)
		}
	}
}

func TestAppendRequest(t *testing.T) {
	tests := []struct {
		req      arbiter.Request
		wantType wire.Type
		err      bool
	}{
		{arbiter.Request{ID: 3, Kind: arbiter.RequestAcquire, Node: 2}, wire.TypeLeaseAcquire, false},
		{arbiter.Request{ID: 4, Kind: arbiter.RequestRenew, Node: 2, Epoch: 9}, wire.TypeLeaseRenew, false},
		{arbiter.Request{ID: 5, Kind: arbiter.RequestAcquire, Node: arbiter.NodeNone}, 0, true},
		{arbiter.Request{ID: 6, Kind: 0, Node: 2}, 0, true},
		{arbiter.Request{ID: 7, Kind: 9, Node: 2}, 0, true},
	}
	for _, tc := range tests {
		b, err := AppendRequest([]byte{0xAA}, tc.req, 3)
		if tc.err {
			if !errors.Is(err, ErrRequest) || len(b) != 1 {
				t.Errorf("%+v: err %v, %d bytes", tc.req, err, len(b))
			}
			continue
		}
		f, n, err := wire.Parse(b[1:])
		if err != nil || n != len(b)-1 {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		l, _ := wire.DecodeLease(&f)
		if f.Type != tc.wantType || f.Node != uint32(tc.req.Node) || f.Epoch != tc.req.Epoch ||
			f.Stream != 3 || l.RequestID != tc.req.ID {
			t.Errorf("%+v encoded as %+v %+v", tc.req, f.Header, l)
		}
	}
}

func TestDecodeReply(t *testing.T) {
	enc := func(l wire.Lease) []byte { return l.Append(nil) }
	tests := []struct {
		name string
		pkt  []byte
		want arbiter.Reply
		err  error
	}{
		{"grant", enc(wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Node: 9, Epoch: 4}, RequestID: 2, Holder: 1, DurationNs: 100}),
			arbiter.Reply{Kind: arbiter.ReplyGrant, Witness: 9, RequestID: 2, Epoch: 4, Holder: 1, DurationNs: 100}, nil},
		{"deny saturates", enc(wire.Lease{Type: wire.TypeLeaseDeny, Origin: wire.Origin{Epoch: 4}, RequestID: 2, Holder: 3, RemainingNs: math.MaxUint64}),
			arbiter.Reply{Kind: arbiter.ReplyDeny, RequestID: 2, Epoch: 4, Holder: 3, RemainingNs: math.MaxInt64}, nil},
		{"info", enc(wire.Lease{Type: wire.TypeLeaseInfo, Origin: wire.Origin{Epoch: 4}, RequestID: 8, Holder: 3, RemainingNs: 50}),
			arbiter.Reply{Kind: arbiter.ReplyInfo, RequestID: 8, Epoch: 4, Holder: 3, RemainingNs: 50}, nil},
		{"grant of epoch 0", enc(wire.Lease{Type: wire.TypeLeaseGrant, RequestID: 2, DurationNs: 100}), arbiter.Reply{}, ErrReply},
		{"grant of 0 ns", enc(wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Epoch: 1}, RequestID: 2}), arbiter.Reply{}, ErrReply},
		{"grant overflowing int64", enc(wire.Lease{Type: wire.TypeLeaseGrant, Origin: wire.Origin{Epoch: 1}, DurationNs: math.MaxInt64 + 1}), arbiter.Reply{}, ErrDuration},
		{"a request is not a reply", enc(wire.Lease{Type: wire.TypeLeaseAcquire, Origin: wire.Origin{Node: 1}}), arbiter.Reply{}, ErrReply},
		{"trailing bytes", append(enc(wire.Lease{Type: wire.TypeLeaseInfo}), 1), arbiter.Reply{}, wire.ErrLength},
		{"garbage", []byte("not a frame"), arbiter.Reply{}, wire.ErrShort},
	}
	for _, tc := range tests {
		got, err := ParseReply(tc.pkt)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestClientWithServer runs a keeper through the Client against the
// server's frame handler, one clock for both: the keeper acquires,
// renews, and a second keeper is denied and learns holder and epoch.
func TestClientWithServer(t *testing.T) {
	cfg := testConfig()
	s := newTestServer(t, &memStore{})
	newClient := func(node arbiter.NodeID) *Client {
		k, err := arbiter.NewKeeper(node, cfg.Arbiter)
		if err != nil {
			t.Fatal(err)
		}
		k.SetWantLead(true)
		return NewClient(k, 1)
	}
	a, b := newClient(1), newClient(2)
	exchange := func(c *Client, nowNs int64) (arbiter.Reply, bool) {
		pkt, ok := c.Tick(nowNs)
		if !ok {
			return arbiter.Reply{}, false
		}
		reply := s.handle(pkt, nodeAddr, nowNs)
		r, used, err := c.OnDatagram(reply)
		if err != nil || !used {
			t.Fatalf("at %d: reply %+v used %v err %v", nowNs, r, used, err)
		}
		return r, true
	}
	if r, _ := exchange(a, 0); !r.Granted() || !a.Keeper().MayLead(0) || a.Keeper().Epoch() != 1 {
		t.Fatalf("acquire: %+v", r)
	}
	if r, _ := exchange(b, 1); r.Granted() || b.Keeper().MayLead(1) {
		t.Fatalf("second node: %+v", r)
	}
	if h, e, left := b.Keeper().LastDeny(); h != 1 || e != 1 || left <= 0 {
		t.Fatalf("LastDeny %d %d %d", h, e, left)
	}
	renewAt := cfg.Arbiter.RenewIntervalNs
	if r, ok := exchange(a, renewAt); !ok || !r.Granted() || r.Epoch != 1 {
		t.Fatalf("renew: %+v %v", r, ok)
	}
	// The keeper leads past the first lease's view thanks to the renewal.
	if !a.Keeper().MayLead(testLeaseNs - cfg.Arbiter.MarginNs) {
		t.Fatal("renewed keeper may not lead")
	}
	// A late duplicate of the grant is not used twice.
	dup := s.handle(renewFrame(t, 1, 2, 1), nodeAddr, renewAt+1)
	if _, used, err := a.OnDatagram(dup); used || err != nil {
		t.Fatalf("duplicate grant used %v err %v", used, err)
	}
	// An info is decoded but not for a keeper.
	if r, used, err := a.OnDatagram(s.handle(queryFrame(5), nodeAddr, renewAt+2)); used || err != nil || r.Holder != 1 {
		t.Fatalf("info %+v used %v err %v", r, used, err)
	}
	if _, _, err := a.OnDatagram([]byte{1, 2, 3}); !errors.Is(err, wire.ErrShort) {
		t.Fatalf("garbage: %v", err)
	}
}

// TestHotPathsDoNotAllocate: answering a renewal, a resend and a query,
// and the client's encode and decode, allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	s := newTestServer(t, &memStore{})
	mustReply(t, s.handle(acquireFrame(t, 1, 1), nodeAddr, 0))
	renew := renewFrame(t, 1, 2, 1)
	query := queryFrame(3)
	mustReply(t, s.handle(renewInSyncFrame(t, 1, 100, 1, 1, 2, 3), nodeAddr, 0))
	// A stale proposal every time (base 1, the set is at version 2): the
	// proposal path without a write per call.
	proposal := renewInSyncFrame(t, 1, 101, 1, 1, 3, 2)
	now := int64(1)
	cases := map[string]func(){
		"renew":  func() { now++; renew[wire.HeaderLen]++; s.handle(reseal(renew), nodeAddr, now) },
		"resend": func() { s.handle(renew, nodeAddr, now) },
		"query":  func() { s.handle(query, nodeAddr, now) },
		"proposal": func() {
			now++
			proposal[wire.HeaderLen]++
			s.handle(reseal(proposal), nodeAddr, now)
		},
	}
	k, _ := arbiter.NewKeeper(2, testConfig().Arbiter)
	k.SetWantLead(true)
	c := NewClient(k, 0)
	grant := s.handle(renew, nodeAddr, now)
	grant = append([]byte(nil), grant...)
	clientNow := int64(0)
	cases["client tick"] = func() { clientNow += testLeaseNs; c.Tick(clientNow) }
	cases["client reply"] = func() { c.OnDatagram(grant) }
	if r := mustReply(t, grant); r.Members.N != 2 {
		t.Fatalf("grant for the decode case carries no set: %+v", r)
	}
	members := []arbiter.NodeID{3, 4}
	cases["client propose"] = func() { _ = c.ProposeInSync(2, members) }
	for name, fn := range cases {
		if allocs := testing.AllocsPerRun(100, fn); allocs != 0 {
			t.Errorf("%s: %v allocs", name, allocs)
		}
	}
}
