package client

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/wire"
)

// mdNode is a node's market-data side for the consumer's tests: the feed
// core (mdfeed) publishing on a multicast group on lo and answering
// MD_REQUESTs on a unicast socket, ignoring the first `ignore` of them.
type mdNode struct {
	t      *testing.T
	feed   *mdfeed.Feed[netip.AddrPort]
	mc, uc *bus.UDP
	group  netip.AddrPort
	ignore int
	asked  int
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func newMDNode(t *testing.T, ignore int) *mdNode {
	feed, err := mdfeed.New[netip.AddrPort](mdfeed.Config{RingUpdates: 4096})
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(20000 + rand.IntN(10000))
	group := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 79, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), port)
	mc, err := bus.NewMulticastSender(bus.MulticastSenderConfig{Group: group, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	uc, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		mc.Close()
		t.Fatal(err)
	}
	return &mdNode{t: t, feed: feed, mc: mc, uc: uc, group: group, ignore: ignore, stop: make(chan struct{})}
}

// publish adds updates 1..n (command seq = MD seq) and multicasts them,
// leaving out the frames whose first MD seq drop says.
func (s *mdNode) publish(n uint64, drop func(first uint64) bool) {
	for seq := uint64(1); seq <= n; seq++ {
		s.feed.Add(seq, mdPayload(seq))
	}
	b := wire.NewBatch(wire.DefaultDatagramLen)
	first := uint64(1)
	for k := s.feed.Publish(b, wire.Origin{Stream: 1}, n, ^uint64(0)); k > 0; k = s.feed.Publish(b, wire.Origin{Stream: 1}, n, ^uint64(0)) {
		if !drop(first) {
			if err := s.mc.Send([][]byte{b.Bytes()}, s.group); err != nil {
				s.t.Error(err)
			}
		}
		first += uint64(k)
	}
}

// serve answers requests until stop, on its own goroutine, which owns
// the feed from then on (start it after publish).
func (s *mdNode) serve() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		bufs, sizes, from := [][]byte{make([]byte, 2048)}, []int{0}, []netip.AddrPort{{}}
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			k, err := s.uc.Receive(bufs, sizes, from, 10*time.Millisecond)
			if err != nil || k == 0 {
				continue
			}
			f, _, err := wire.Parse(bufs[0][:sizes[0]])
			if err != nil || f.Type != wire.TypeMDRequest {
				continue
			}
			if s.asked++; s.asked <= s.ignore {
				continue // lost: the consumer's retry timer asks again
			}
			req, _ := wire.DecodeMDRequest(&f)
			s.feed.Request(from[0], req, time.Now().UnixNano(), nil)
			for frame, to, ok := s.feed.Next(wire.Origin{Stream: 1}); ok; frame, to, ok = s.feed.Next(wire.Origin{Stream: 1}) {
				_ = s.uc.Send([][]byte{frame}, to)
			}
		}
	}()
}

func (s *mdNode) close() {
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.mc.Close()
		s.uc.Close()
	})
}

// mdSeen collects the MD seqs a consumer delivered (OnMD).
type mdSeen struct {
	mu   sync.Mutex
	seen []uint64
}

func (m *mdSeen) add(o *engine.Output) {
	m.mu.Lock()
	m.seen = append(m.seen, o.MDSeq)
	m.mu.Unlock()
}

func (m *mdSeen) seqs() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen)
}

// TestOpenMarketDataRecoversOnItsAgent: the consumer's one agent thread
// reads the feed and the recovery socket: a lost frame is asked for, the
// first two requests go unanswered (its timers, run by the agent's
// deadline with the feed silent, ask again), and every update arrives
// once, in order. Close leaves no goroutine behind.
func TestOpenMarketDataRecoversOnItsAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := newMDNode(t, 2)
	defer s.close()
	var seen mdSeen
	md, err := OpenMarketData(MDOptions{Group: s.group, Iface: "lo", Recovery: []netip.AddrPort{s.uc.LocalAddr()}, RetryNs: int64(5 * time.Millisecond),
		OnMD: seen.add})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	frames := 0
	s.publish(n, func(first uint64) bool {
		frames++
		return frames == 2 // the second frame is lost
	})
	s.serve()
	for deadline := time.Now().Add(10 * time.Second); md.Next() != n+1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered up to %d of %d (%+v)", md.Next()-1, n, md.Tracker())
		}
	}
	md.Close()
	s.close()
	tr := md.Tracker()
	got := seen.seqs()
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i) + 1
	}
	if !slices.Equal(got, want) || tr.Gaps != 0 || tr.Filled == 0 || s.asked < 3 {
		t.Fatalf("%+v after %d requests; delivered %d updates, in order %v", tr, s.asked, len(got), slices.Equal(got, want))
	}
}

// TestOpenMarketDataReadsCoalescedFeed: with GRO, a burst of feed
// frames multicast as one segmented send is read whole on the
// consumer's agent and cut back into frames: every update arrives once,
// in order, with no gap and nothing to recover.
func TestOpenMarketDataReadsCoalescedFeed(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := newMDNode(t, 0)
	defer s.close()
	var seen mdSeen
	md, err := OpenMarketData(MDOptions{Group: s.group, Iface: "lo", OnMD: seen.add, GRO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	if r := md.conn.Report(); !r.GRO {
		t.Skipf("the kernel refused UDP_GRO: %v", r.GROErr)
	}
	const n = 3000
	for seq := uint64(1); seq <= n; seq++ {
		s.feed.Add(seq, mdPayload(seq))
	}
	var burst [][]byte
	for {
		b := wire.NewBatch(wire.DefaultDatagramLen)
		if s.feed.Publish(b, wire.Origin{Stream: 1}, n, ^uint64(0)) == 0 {
			break
		}
		burst = append(burst, b.Bytes())
	}
	if err := s.mc.Send(burst, s.group); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); md.Next() != n+1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered up to %d of %d (%+v)", md.Next()-1, n, md.Tracker())
		}
	}
	md.Close()
	got, tr := seen.seqs(), md.Tracker()
	for i, seq := range got {
		if seq != uint64(i)+1 {
			t.Fatalf("update %d has MD seq %d", i, seq)
		}
	}
	c := md.conn.Counters()
	if len(got) != n || tr.Gaps != 0 || c.CoalescedReceives == 0 {
		t.Fatalf("%d of %d updates, %+v; %d frames read in %d coalesced runs", len(got), n, tr, c.DatagramsReceived, c.CoalescedReceives)
	}
	t.Logf("%d frames, %d read in coalesced runs", c.DatagramsReceived, c.CoalescedReceives)
}

// TestSubscribeMarketDataCountsGaps: the plain subscription (no recovery)
// delivers what the feed carries, in order, and counts what a lost frame
// took away as a gap instead of waiting for it.
func TestSubscribeMarketDataCountsGaps(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := newMDNode(t, 0)
	defer s.close()
	var seen mdSeen
	md, err := SubscribeMarketData(s.group, "lo", seen.add)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	frames, lost := 0, uint64(0)
	s.publish(n, func(first uint64) bool {
		frames++
		if frames == 2 {
			lost = first
		}
		return frames == 2 // the second frame is lost
	})
	for deadline := time.Now().Add(10 * time.Second); md.Next() != n+1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("saw up to %d of %d (%+v)", md.Next()-1, n, md.Tracker())
		}
	}
	md.Close()
	tr, got := md.Tracker(), seen.seqs()
	if frames < 3 || lost == 0 || tr.Gaps == 0 || len(got) == 0 || len(got) >= n || !slices.IsSorted(got) || slices.Contains(got, lost) || got[len(got)-1] != n {
		t.Fatalf("%d frames, the one from %d lost: %+v, delivered %d updates %v", frames, lost, tr, len(got), got)
	}
}
