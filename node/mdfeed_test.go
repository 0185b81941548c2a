package node

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

type mdClock struct{ ns int64 }

func (c *mdClock) NowNs() int64 { return c.ns }

// mdStandby is a standby node (never started: the test drives it) with a
// market-data group and a ring of ringSize, that has applied cmds.
func mdStandby(t *testing.T, ringSize, cmds int, mutate ...func(*nodeconfig.Config)) (*Node, *mdClock) {
	t.Helper()
	c := newCluster(t, 2)
	clk := &mdClock{ns: 1}
	cfg := c.config(2)
	cfg.MarketData = netip.AddrPortFrom(netip.MustParseAddr("239.77.200.1"), freePort(t))
	cfg.MDRingUpdates = ringSize
	cfg.Clock = clk
	for _, f := range mutate {
		f(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	mdConfigs[n] = cfg
	n.mu.Lock()
	defer n.mu.Unlock()
	for seq := 1; seq <= cmds; seq++ {
		// Alternate sides around one price: rests, then trades.
		side := engine.Side(1 + seq%2)
		cmd := engine.AppendRequest(nil, 7, uint64(seq), &engine.Request{Op: engine.OpNewOrder, Instrument: uint32(seq % 3), Side: side, Type: engine.Limit, Price: 100 + int64(seq%4), Qty: 5})
		n.applyEntry(uint64(seq), cmd, n.nowNs())
	}
	return n, clk
}

// mdConfigs remembers each mdStandby's configuration, to restart it.
var mdConfigs = map[*Node]nodeconfig.Config{}

// heartbeat makes the standby learn that the primary released up to mdSeq.
func heartbeat(t *testing.T, n *Node, mdSeq uint64) {
	t.Helper()
	b := (&wire.Heartbeat{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 1}, Released: 1, MDSeq: mdSeq, History: testHistory}).Append(nil)
	f, _, err := wire.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.md.OnHeartbeat(&f, n.nowNs())
	n.mdSendReplies()
	n.mu.Unlock()
}

// requester is a loopback socket that asks a node for market data.
type requester struct {
	t    *testing.T
	conn *bus.UDP
}

func newRequester(t *testing.T) *requester {
	u, err := bus.ListenUnicast(bus.UnicastConfig{Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return &requester{t: t, conn: u}
}

func (r *requester) ask(n *Node, req wire.MDRequest) {
	req.Origin = wire.Origin{Stream: 9, Node: 5}
	n.Deliver(req.Append(nil), r.conn.LocalAddr())
}

// frames reads what arrived within wait.
func (r *requester) frames(wait time.Duration) [][]byte {
	var out [][]byte
	bufs := [][]byte{make([]byte, 65536)}
	sizes, from := []int{0}, []netip.AddrPort{{}}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		k, err := r.conn.Receive(bufs, sizes, from, 20*time.Millisecond)
		if err != nil {
			r.t.Fatal(err)
		}
		if k == 1 {
			out = append(out, slices.Clone(bufs[0][:sizes[0]]))
		}
	}
	return out
}

// replayed returns the MD seqs of every update in MD_REPLAY frames, and
// the MD_STATUS answers.
func replayed(t *testing.T, frames [][]byte) (seqs []uint64, status []wire.MDStatus) {
	t.Helper()
	for _, b := range frames {
		f, _, err := wire.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case wire.TypeMDReplay:
			it := f.Messages()
			for {
				seq, msg, ok := it.Next()
				if !ok {
					break
				}
				o, err := engine.ParseOutput(msg)
				if err != nil || o.MDSeq != seq {
					t.Fatalf("update %d: %+v %v", seq, o, err)
				}
				seqs = append(seqs, seq)
			}
		case wire.TypeMDStatus:
			s, _ := wire.DecodeMDStatus(&f)
			status = append(status, s)
		}
	}
	return seqs, status
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestMDRingKeepsAStandbysUpdates: a standby keeps the market data of what
// it applies (the engine used to discard it there), contiguous, bounded.
func TestMDRingKeepsAStandbysUpdates(t *testing.T) {
	n, _ := mdStandby(t, 64, 100)
	md := n.eng().(*engine.Engine).MDSeq()
	st := n.Status().MD
	if md < 100 || st.RingLast != md || st.RingFirst != md-63 {
		t.Fatalf("engine md %d, ring %d..%d", md, st.RingFirst, st.RingLast)
	}
}

// TestMDReRequestServesOnlyReleased: a standby answers a range from its
// ring up to the MD seq the primary released, never above (gating), and
// says NotYet above it and TooOld below the ring.
func TestMDReRequestServesOnlyReleased(t *testing.T) {
	n, _ := mdStandby(t, 64, 100)
	last := n.eng().(*engine.Engine).MDSeq()
	r := newRequester(t)
	r.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: last - 20, Count: 10})
	if seqs, st := replayed(t, r.frames(100*time.Millisecond)); len(seqs) != 0 || len(st) != 1 || st[0].Code != wire.MDNotYet {
		t.Fatalf("before any heartbeat: served %v, status %+v", seqs, st)
	}
	heartbeat(t, n, last-5)
	r.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: last - 20, Count: 100})
	seqs, st := replayed(t, r.frames(100*time.Millisecond))
	if !slices.Equal(seqs, seqRange(last-20, last-5)) || len(st) != 0 {
		t.Fatalf("served %v, status %+v; want %d..%d", seqs, st, last-20, last-5)
	}
	r.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 10})
	if seqs, st := replayed(t, r.frames(100*time.Millisecond)); len(seqs) != 0 || len(st) != 1 || st[0].Code != wire.MDTooOld || st[0].Oldest != last-63 || st[0].Newest != last-5 {
		t.Fatalf("below the ring: served %v, status %+v", seqs, st)
	}
	s := n.Status().MD
	if s.Requests != 3 || s.Refused != 2 || s.Served != 16 {
		t.Fatalf("counters %+v", s)
	}
}

// TestMDReRequestRateLimited: a requester gets mdfeed.Burst answers at once,
// then one per mdfeed.RefillNs; another requester is not affected.
func TestMDReRequestRateLimited(t *testing.T) {
	n, clk := mdStandby(t, 64, 20)
	heartbeat(t, n, 1)
	a, b := newRequester(t), newRequester(t)
	for range mdfeed.Burst + 10 {
		a.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 1})
	}
	seqs, st := replayed(t, a.frames(200*time.Millisecond))
	if len(seqs) != mdfeed.Burst || len(st) != 10 || st[0].Code != wire.MDRateLimited {
		t.Fatalf("served %d, refused %d (%+v)", len(seqs), len(st), st)
	}
	b.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 1})
	if seqs, _ := replayed(t, b.frames(100*time.Millisecond)); len(seqs) != 1 {
		t.Fatal("another requester was limited too")
	}
	clk.ns += 3 * mdfeed.RefillNs
	for range 5 {
		a.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 1})
	}
	if seqs, _ := replayed(t, a.frames(100*time.Millisecond)); len(seqs) != 3 {
		t.Fatalf("after 3 refill periods: %d served", len(seqs))
	}
	if s := n.Status().MD; s.RateLimited != 12 {
		t.Fatalf("rate limited %d", s.RateLimited)
	}
}

// mdListener joins n's market-data group on lo.
func mdListener(t *testing.T, n *Node) *requester {
	t.Helper()
	u, err := bus.ListenMulticast(bus.MulticastReceiverConfig{Group: n.cfg.MarketData, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return &requester{t: t, conn: u}
}

// published returns the MD seqs of the OUTPUT frames in frames.
func published(t *testing.T, frames [][]byte) []uint64 {
	t.Helper()
	var out []uint64
	for _, b := range frames {
		f, _, err := wire.Parse(b)
		if err != nil || f.Type != wire.TypeOutput {
			t.Fatalf("%s %v", f.Type, err)
		}
		it := f.Messages()
		for {
			_, msg, ok := it.Next()
			if !ok {
				break
			}
			o, err := engine.ParseOutput(msg)
			if err != nil || o.Kind != engine.KindMarketData {
				t.Fatalf("%+v %v", o, err)
			}
			out = append(out, o.MDSeq)
		}
	}
	return out
}

// TestMDRepublishAtPromotion: a standby that learned the old primary
// released up to MD seq k publishes, when it leads, every update above k
// in order, each once its command is released, and nothing at or below k.
func TestMDRepublishAtPromotion(t *testing.T) {
	n, _ := mdStandby(t, 1024, 100)
	last := n.eng().(*engine.Engine).MDSeq()
	k := last - 40
	heartbeat(t, n, k)
	l := mdListener(t, n)
	n.mu.Lock()
	if err := n.becomePrimary(2); err != nil {
		n.mu.Unlock()
		t.Fatal(err)
	}
	half := mdCmd(n, k+20) // released up to the command of update k+20
	n.mdPublish(half)
	n.mu.Unlock()
	got := published(t, l.frames(100*time.Millisecond))
	want := []uint64{}
	for s := k + 1; s <= last && mdCmd(n, s) <= half; s++ {
		want = append(want, s)
	}
	if len(want) < 20 || !slices.Equal(got, want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	n.mu.Lock()
	n.mdPublish(100)
	st := n.md.Stats()
	n.mu.Unlock()
	if got = published(t, l.frames(100*time.Millisecond)); !slices.Equal(got, seqRange(want[len(want)-1]+1, last)) {
		t.Fatalf("then published %v", got)
	}
	if st.Republished != 40 || st.RepublishMissed != 0 || st.Released != last {
		t.Fatalf("stats %+v", st)
	}
}

// TestMDRepublishCountsWhatTheRingLost: above the released MD seq but
// below the ring is a hole the node cannot fill: it is counted.
func TestMDRepublishCountsWhatTheRingLost(t *testing.T) {
	n, _ := mdStandby(t, 16, 100)
	last := n.eng().(*engine.Engine).MDSeq()
	heartbeat(t, n, last-30)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.becomePrimary(2); err != nil {
		t.Fatal(err)
	}
	if st := n.md.Stats(); st.Republished != 16 || st.RepublishMissed != 14 {
		t.Fatalf("stats %+v", st)
	}
}

// TestMDLeaseLostKeepsMarketData: a primary that drops its queued outputs
// (its lease lapsed) keeps its market data in the ring and publishes it,
// in order, once it releases again: no hole (the simulator found one
// when market data went through the gate's publisher).
func TestMDLeaseLostKeepsMarketData(t *testing.T) {
	n, _ := mdStandby(t, 1024, 50)
	l := mdListener(t, n)
	n.mu.Lock()
	if err := n.becomePrimary(2); err != nil {
		n.mu.Unlock()
		t.Fatal(err)
	}
	n.mdPublish(50)
	for seq := uint64(51); seq <= 80; seq++ {
		side := engine.Side(1 + seq%2)
		cmd := engine.AppendRequest(nil, 7, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: side, Type: engine.Limit, Price: 100 + int64(seq%3), Qty: 5})
		n.eng().Apply(seq, cmd, n.rep.Leader().Emitter(seq))
	}
	dropped := n.rep.Leader().DropQueued() // what leaseChanged does when the lease lapses
	n.mdPublish(80)
	last := n.eng().(*engine.Engine).MDSeq()
	n.mu.Unlock()
	got := published(t, l.frames(100*time.Millisecond))
	if dropped == 0 || !slices.Equal(got, seqRange(1, last)) {
		t.Fatalf("dropped %d outputs; published %d updates (%v...), want 1..%d", dropped, len(got), got[:min(5, len(got))], last)
	}
}

// TestMDSnapshotWaitsForRelease: the books are exported at the engine's MD
// seq but sent only once that MD seq is released, in chunks that rebuild
// the export.
func TestMDSnapshotWaitsForRelease(t *testing.T) {
	n, _ := mdStandby(t, 64, 300)
	eng := n.eng().(*engine.Engine)
	last := eng.MDSeq()
	want := eng.AppendBook(nil, engine.AllInstruments)
	if len(want) < 2 {
		t.Fatalf("book of %d levels: the test needs more", len(want))
	}
	heartbeat(t, n, last-1)
	r := newRequester(t)
	r.ask(n, wire.MDRequest{Kind: wire.MDRequestSnapshot, Instrument: wire.AllInstruments})
	if fs := r.frames(100 * time.Millisecond); len(fs) != 0 {
		t.Fatalf("%d frames before the snapshot's MD seq was released", len(fs))
	}
	heartbeat(t, n, last)
	var got []engine.BookLevel
	chunks := map[uint16]bool{}
	for _, b := range r.frames(100 * time.Millisecond) {
		f, _, err := wire.Parse(b)
		if err != nil || f.Type != wire.TypeMDSnapshot {
			t.Fatalf("%s %v", f.Type, err)
		}
		s, _ := wire.DecodeMDSnapshot(&f, nil)
		if s.MDSeq != last {
			t.Fatalf("snapshot at %d, want %d", s.MDSeq, last)
		}
		chunks[s.Chunk] = true
		for _, l := range s.Levels {
			got = append(got, engine.BookLevel{Instrument: l.Instrument, Side: engine.Side(l.Side), Price: l.Price, Qty: l.Qty})
		}
	}
	if !slices.Equal(got, want) || len(chunks) == 0 {
		t.Fatalf("snapshot %v, want %v", got, want)
	}
	if s := n.Status().MD; s.SnapshotsServed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// mdCluster runs a static primary (1) and a standby (2) publishing market
// data, with a ring of ring updates, and loads them with count orders.
func mdCluster(t *testing.T, ring, count int) (*cluster, netip.AddrPort) {
	t.Helper()
	c := newCluster(t, 2)
	group := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 78, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), freePort(t))
	for id := uint32(1); id <= 2; id++ {
		c.start(id, func(cfg *nodeconfig.Config) { cfg.MarketData = group; cfg.MDRingUpdates = ring })
	}
	t.Cleanup(c.closeAll)
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 4}, Primary: c.addrs[1], Idle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: uint64(count), Seed: 5, Drain: 20 * time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	return c, group
}

// waitMD waits until the standby learned the primary's released MD seq
// and md has delivered it.
func waitMD(t *testing.T, c *cluster, md *client.MarketData) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		last := c.nodes[1].Status().MD.Released
		if last > 0 && c.nodes[2].Status().MD.Released == last && md.Next() == last+1 {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("consumer at %d (%+v), primary md %+v, standby md %+v", md.Next(), md.Tracker(), c.nodes[1].Status().MD, c.nodes[2].Status().MD)
	return 0
}

// TestMarketDataLateJoinerFillsFromTheRing: a consumer that subscribes
// after the feed ran, FromStart, gets every MD seq from 1 once, in order,
// from the standby's ring (asked first), then the live feed.
func TestMarketDataLateJoinerFillsFromTheRing(t *testing.T) {
	c, group := mdCluster(t, 1<<16, 2000)
	var got []uint64
	md, err := client.OpenMarketData(client.MDOptions{Group: group, OnMD: func(o *engine.Output) { got = append(got, o.MDSeq) },
		Stream: 9, Recovery: []netip.AddrPort{c.addrs[2], c.addrs[1]}, FromStart: true, ProbeNs: int64(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	last := waitMD(t, c, md)
	md.Close()
	if !slices.Equal(got, seqRange(1, last)) {
		t.Fatalf("delivered %d updates (first %v), want 1..%d", len(got), got[:min(len(got), 5)], last)
	}
	tr := md.Tracker()
	if tr.Filled != last || tr.Gaps != 0 {
		t.Fatalf("%+v", tr)
	}
	if s := c.nodes[2].Status().MD; s.Served == 0 {
		t.Fatalf("the standby served nothing: %+v", s)
	}
}

// TestMarketDataPastTheRingResyncsFromBooks: with a ring of 1024 updates, a
// late joiner is told TooOld, takes the books at an MD seq, and delivers
// the stream after it; its books then equal the engine's.
func TestMarketDataPastTheRingResyncsFromBooks(t *testing.T) {
	c, group := mdCluster(t, 1024, 2000)
	type key struct {
		inst  uint32
		side  uint8
		price int64
	}
	book := map[key]uint64{}
	var snapAt uint64
	var got []uint64
	md, err := client.OpenMarketData(client.MDOptions{Group: group,
		OnMD: func(o *engine.Output) {
			got = append(got, o.MDSeq)
			if o.MDKind == engine.MDLevel {
				k := key{o.Instrument, uint8(o.Side), o.Price}
				if o.Qty == 0 {
					delete(book, k)
				} else {
					book[k] = o.Qty
				}
			}
		},
		OnSnapshot: func(mdSeq uint64, levels []wire.MDLevel) {
			snapAt = mdSeq
			clear(book)
			for _, l := range levels {
				book[key{l.Instrument, l.Side, l.Price}] = l.Qty
			}
		},
		Stream: 9, Recovery: []netip.AddrPort{c.addrs[1]}, FromStart: true, ProbeNs: int64(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	last := waitMD(t, c, md)
	md.Close()
	if snapAt == 0 || !slices.Equal(got, seqRange(snapAt+1, last)) {
		t.Fatalf("snapshot at %d, then %d updates, want %d..%d", snapAt, len(got), snapAt+1, last)
	}
	if tr := md.Tracker(); tr.Resyncs != 1 || tr.Gaps != 0 {
		t.Fatalf("%+v", md.Tracker())
	}
	c.nodes[1].mu.Lock()
	want := c.nodes[1].eng().(*engine.Engine).AppendBook(nil, engine.AllInstruments)
	c.nodes[1].mu.Unlock()
	if len(want) != len(book) {
		t.Fatalf("consumer book %d levels, engine %d", len(book), len(want))
	}
	for _, l := range want {
		if book[key{l.Instrument, uint8(l.Side), l.Price}] != l.Qty {
			t.Fatalf("level %+v: consumer has %d", l, book[key{l.Instrument, uint8(l.Side), l.Price}])
		}
	}
}

// TestMDNeverServesAboveTheStatesMDSeq: updates in the ring above the
// state machine's MD seq (a discarded suffix's, after a rebuild to the
// fork point) are neither served nor republished, even once the primary
// says it released that far.
func TestMDNeverServesAboveTheStatesMDSeq(t *testing.T) {
	discarded := func(n *Node) uint64 { // the state's MD seq
		engMD := n.eng().(*engine.Engine).MDSeq()
		n.mu.Lock()
		defer n.mu.Unlock()
		for s := engMD + 1; s <= engMD+5; s++ {
			n.md.Add(50, engine.AppendOutput(nil, &engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDLevel, MDSeq: s, Instrument: 1, Side: engine.Buy, Price: 1, Qty: 1}))
		}
		return engMD
	}
	n, _ := mdStandby(t, 1024, 50)
	engMD := discarded(n)
	heartbeat(t, n, engMD+5)
	r := newRequester(t)
	r.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: engMD - 2, Count: 100})
	if seqs, _ := replayed(t, r.frames(100*time.Millisecond)); !slices.Equal(seqs, seqRange(engMD-2, engMD)) {
		t.Fatalf("served %v, the state is at md %d", seqs, engMD)
	}
	// Another node that learned the release only up to engMD-3.
	n, _ = mdStandby(t, 1024, 50)
	engMD = discarded(n)
	heartbeat(t, n, engMD-3)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.becomePrimary(2); err != nil {
		t.Fatal(err)
	}
	n.mdPublish(^uint64(0))
	if st := n.md.Stats(); st.Republished != 3 || st.Released != engMD {
		t.Fatalf("republished %d, want the 3 updates up to the state's md seq", st.Republished)
	}
}

// TestMDRingRefilledAtRestart: a node rebuilt from its journal at start-up
// has the market data of the journal's tail in its ring (before, it
// started empty and a restarted node promoted later republished nothing).
func TestMDRingRefilledAtRestart(t *testing.T) {
	n, _ := mdStandby(t, 64, 100)
	cfg := mdConfigs[n]
	before := n.Status().MD
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	after := m.Status().MD
	if after.RingFirst != before.RingFirst || after.RingLast != before.RingLast || after.RingLast == 0 {
		t.Fatalf("ring %d..%d before the restart, %d..%d after", before.RingFirst, before.RingLast, after.RingFirst, after.RingLast)
	}
}

// TestMDReleasedSurvivesARestart: a node restarted on its directory and
// promoted before it hears a heartbeat publishes again only the market
// data above what its last run knew released (its status file), not its
// whole ring; with no status file it still publishes the whole ring.
func TestMDReleasedSurvivesARestart(t *testing.T) {
	for _, withStatus := range []bool{true, false} {
		statusFile := filepath.Join(t.TempDir(), "status.json")
		n, _ := mdStandby(t, 1024, 100, func(cfg *nodeconfig.Config) {
			if withStatus {
				cfg.StatusFile = statusFile
			}
		})
		cfg := mdConfigs[n]
		last := n.eng().(*engine.Engine).MDSeq()
		heartbeat(t, n, last-40)
		n.publishStatus()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		err = m.becomePrimary(2)
		st := m.md.Stats()
		m.mu.Unlock()
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(40)
		if !withStatus {
			want = st.RingLast - st.RingFirst + 1
		}
		if st.Republished != want || want < 40 {
			t.Fatalf("status file %v: republished %d at promotion after a restart, want %d (ring %d..%d)", withStatus, st.Republished, want, st.RingFirst, st.RingLast)
		}
	}
}

// TestMDHotPathAllocatesNothing: keeping the market data of an applied
// command in the ring (what every apply does, primary or standby) and
// publishing the released updates from it (what every release does)
// allocate nothing.
func TestMDHotPathAllocatesNothing(t *testing.T) {
	n, _ := mdStandby(t, 1024, 10)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.becomePrimary(2); err != nil {
		t.Fatal(err)
	}
	n.mdPublish(10)
	cmds := make([][]byte, 1200)
	for i := range cmds {
		seq := uint64(11 + i)
		cmds[i] = engine.AppendRequest(nil, 7, seq, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Side(1 + seq%2), Type: engine.Limit, Price: 100, Qty: 5})
	}
	seq := uint64(10)
	a := testing.AllocsPerRun(1000, func() {
		seq++
		n.eng().Apply(seq, cmds[seq-11], n.rep.Leader().Emitter(seq))
		n.mdPublish(seq)
	})
	if a != 0 {
		t.Fatalf("%v allocs per command", a)
	}
	if md := n.eng().(*engine.Engine).MDSeq(); n.md.Released() != md || md < 1000 {
		t.Fatalf("published to %d of %d", n.md.Released(), md)
	}
}

// TestMDReRequestAuthenticated: with a key, a request without the client
// key's MAC is dropped and counted; a sealed one is answered, sealed.
func TestMDReRequestAuthenticated(t *testing.T) {
	key, err := auth.Keygen(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := mdStandby(t, 64, 20, func(c *nodeconfig.Config) { c.Key = &key })
	heartbeat(t, n, 3)
	r := newRequester(t)
	r.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 3})
	if fs := r.frames(100 * time.Millisecond); len(fs) != 0 || n.Status().Node.DropNoMAC != 1 {
		t.Fatalf("unsealed: %d answers, DropNoMAC %d", len(fs), n.Status().Node.DropNoMAC)
	}
	mac := auth.NewMAC(auth.ClientKey(&key, 9))
	req := wire.MDRequest{Origin: wire.Origin{Stream: 9, Node: 5}, Kind: wire.MDRequestRange, First: 1, Count: 3}
	b := wire.Seal(nil, req.Append(nil))
	n.Deliver(mac.Sign(b, b), r.conn.LocalAddr())
	fs := r.frames(100 * time.Millisecond)
	if len(fs) != 1 {
		t.Fatalf("sealed: %d answers", len(fs))
	}
	f, _, err := wire.Parse(fs[0])
	if err != nil || f.Tag == nil || mac.Verify(f.Signed, f.Tag) != nil {
		t.Fatalf("answer not sealed with the client key: %v", err)
	}
	if seqs, _ := replayed(t, fs); !slices.Equal(seqs, []uint64{1, 2, 3}) {
		t.Fatalf("served %v", seqs)
	}
}

// TestMDReRequestChargesWhatItServes: a requester's bucket pays for the
// updates served, so large answers are refused sooner than small ones,
// and book snapshots are spaced node-wide.
func TestMDReRequestChargesWhatItServes(t *testing.T) {
	n, clk := mdStandby(t, 4096, 2000)
	heartbeat(t, n, 3000)
	r := newRequester(t)
	for range 10 {
		r.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 1024})
	}
	seqs, st := replayed(t, r.frames(300*time.Millisecond))
	// 1024 updates cost 1 + 16 tokens: four requests find tokens
	// (64, 47, 30, 13), the fifth does not (-4).
	if len(seqs) != 4*1024 || len(st) != 6 || st[0].Code != wire.MDRateLimited {
		t.Fatalf("served %d updates, refused %d", len(seqs), len(st))
	}
	clk.ns += 100 * mdfeed.RefillNs
	b := newRequester(t)
	b.ask(n, wire.MDRequest{Kind: wire.MDRequestSnapshot, Instrument: wire.AllInstruments})
	b.ask(n, wire.MDRequest{Kind: wire.MDRequestRange, First: 1, Count: 1}) // joins nothing: a range
	c := newRequester(t)
	c.ask(n, wire.MDRequest{Kind: wire.MDRequestSnapshot, Instrument: wire.AllInstruments})
	_, cst := replayed(t, c.frames(100*time.Millisecond))
	if len(cst) != 1 || cst[0].Code != wire.MDUnavailable {
		t.Fatalf("a second snapshot within %v: %+v", time.Duration(mdfeed.SnapshotEveryNs), cst)
	}
	clk.ns += mdfeed.SnapshotEveryNs
	c.ask(n, wire.MDRequest{Kind: wire.MDRequestSnapshot, Instrument: wire.AllInstruments})
	if fs := c.frames(100 * time.Millisecond); len(fs) == 0 {
		t.Fatal("no snapshot after the spacing")
	}
}

// TestMDHeartbeatWhileReleasesMove: a primary whose releases moved sends a
// HEARTBEAT carrying released and the MD seq published, at most every
// the feed's HeartbeatEveryNs (the sequencer alone sends them only when idle, so a
// standby under load would learn nothing).
func TestMDHeartbeatWhileReleasesMove(t *testing.T) {
	n, clk := mdStandby(t, 1024, 30)
	u, err := bus.ListenMulticast(bus.MulticastReceiverConfig{Group: n.cfg.Group, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	l := &requester{t: t, conn: u}
	n.mu.Lock()
	if err := n.becomePrimary(2); err != nil {
		n.mu.Unlock()
		t.Fatal(err)
	}
	n.mdPublish(30)
	clk.ns += n.cfg.FeedConfig().HeartbeatEveryNs
	if !n.md.HeartbeatDue(7, clk.ns) { // as if one went out when 7 was released
		t.Fatal("no heartbeat due")
	}
	clk.ns += n.cfg.FeedConfig().HeartbeatEveryNs // releases moved since (to the gate's)
	n.mdAfterRelease(clk.ns)
	n.mdAfterRelease(clk.ns + 1) // not again so soon
	md := n.md.Released()
	n.mu.Unlock()
	var hbs []wire.Heartbeat
	for _, b := range l.frames(100 * time.Millisecond) {
		if f, _, err := wire.Parse(b); err == nil && f.Type == wire.TypeHeartbeat {
			hb, _ := wire.DecodeHeartbeat(&f)
			hbs = append(hbs, hb)
		}
	}
	if len(hbs) != 1 || hbs[0].MDSeq != md || md == 0 {
		t.Fatalf("heartbeats %+v, md published %d", hbs, md)
	}
}

// TestMDRingRefilledBelowTheSnapshot: a node restarted with two snapshots
// refills its ring from the older one on, not only from the newest (the
// journal is kept back to the older, journal.Compact): the updates a
// crashed primary applied below its newest snapshot but never released
// are in its ring to publish again when it is promoted (sim seed 1281,
// which lost 51 of them).
func TestMDRingRefilledBelowTheSnapshot(t *testing.T) {
	n, _ := mdStandby(t, 4096, 100, func(c *nodeconfig.Config) { c.SnapshotEvery = 40 })
	cfg := mdConfigs[n]
	fs := cfg.FS
	if fs == nil {
		fs = journal.OSFS{}
	}
	n.mu.Lock()
	n.writePendingSnapshot()
	n.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		seqs, err := journal.SnapshotSeqs(fs, cfg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(seqs) == 2 && seqs[0] == 80 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots %v, want 80 and 40", seqs)
		}
		n.mu.Lock()
		n.writePendingSnapshot()
		n.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	before := n.Status().MD
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	after := m.Status().MD
	m.mu.Lock()
	firstCmd := mdCmd(m, after.RingFirst)
	m.mu.Unlock()
	if after.RingLast != before.RingLast || firstCmd > 41 {
		t.Fatalf("ring %d..%d before the restart, %d..%d after, starting at command %d (want at most 41: from snapshot 40 on)",
			before.RingFirst, before.RingLast, after.RingFirst, after.RingLast, firstCmd)
	}
}

// mdCmd is the seq of the command that emitted the ring's update md.
func mdCmd(n *Node, md uint64) uint64 {
	cmd, _, _ := n.md.Entry(md)
	return cmd
}
