//go:build linux

package bus

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/netns"
)

// requireNetns skips unless the test can build namespaces (root, Linux, ip
// and nft), and fails instead when CI=true.
func requireNetns(t *testing.T) {
	t.Helper()
	netns.Require(t)
	netns.RequireTool(t, "nft")
}

// Test frames: 4-byte magic, 8-byte sequence number, padding to 32 bytes.
const (
	testFrameBytes = 32
	testMagic      = 0x53425446 // "SBTF"
)

func putTestFrame(b []byte, seq uint64) {
	binary.BigEndian.PutUint32(b[0:4], testMagic)
	binary.BigEndian.PutUint64(b[4:12], seq)
}

// testFrameFilter stands in for the wire codec's header check.
func testFrameFilter(pkt []byte, _ netip.AddrPort) DropReason {
	if len(pkt) != testFrameBytes || binary.BigEndian.Uint32(pkt[0:4]) != testMagic {
		return DropBadHeader
	}
	return Accept
}

// seqTracker records which sequence numbers a receiver saw.
type seqTracker struct {
	mu      sync.Mutex
	seen    []bool
	repeats int
	highest atomic.Int64 // -1 before the first frame
}

func newSeqTracker(frames int) *seqTracker {
	s := &seqTracker{seen: make([]bool, frames)}
	s.highest.Store(-1)
	return s
}

func (s *seqTracker) handle(bufs [][]byte, sizes []int, _ []netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range sizes {
		seq := binary.BigEndian.Uint64(bufs[i][4:12])
		if seq >= uint64(len(s.seen)) {
			continue
		}
		if s.seen[seq] {
			s.repeats++
		}
		s.seen[seq] = true
		if int64(seq) > s.highest.Load() {
			s.highest.Store(int64(seq))
		}
	}
}

// countRange returns how many of [from, to) were seen.
func (s *seqTracker) countRange(from, to int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ok := range s.seen[from:to] {
		if ok {
			n++
		}
	}
	return n
}

// TestMultiHostMulticast: three hosts on a bridge, one sender, two
// receivers; 20k frames clean, then 100k more with nftables dropping one in
// 20 at receiver B. The loss must show in B's counters and nowhere else.
func TestMultiHostMulticast(t *testing.T) {
	requireNetns(t)
	const (
		cleanFrames    = 20_000
		framesPerPhase = 100_000 // with loss
		totalFrames    = cleanFrames + framesPerPhase
		window         = 2048 // frames in flight before the sender waits
	)
	group := netip.MustParseAddrPort("239.77.0.1:41000")
	lan := netns.NewLAN(t, 3)
	var sender *UDP
	receivers := make([]*UDP, 2)
	inHost(t, lan.Hosts[0], func() error {
		var err error
		sender, err = NewMulticastSender(MulticastSenderConfig{Group: group, Interface: "eth0",
			Tuning: Tuning{SendBufferBytes: 4 << 20}})
		return err
	})
	defer sender.Close()
	for i := range receivers {
		inHost(t, lan.Hosts[i+1], func() error {
			var err error
			receivers[i], err = ListenMulticast(MulticastReceiverConfig{Group: group, Interface: "eth0",
				Filter: testFrameFilter, Tuning: Tuning{RecvBufferBytes: 8 << 20}})
			return err
		})
		defer receivers[i].Close()
	}
	trackers := []*seqTracker{newSeqTracker(totalFrames), newSeqTracker(totalFrames)}
	for i, r := range receivers {
		l, err := StartLoop(r, LoopConfig{BatchSize: BatchSizeMax, DatagramBytes: 64}, trackers[i].handle)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := l.Stop(); err != nil {
				t.Errorf("receiver %d loop: %v", i, err)
			}
		}()
	}

	deadline := time.Now().Add(40 * time.Second)
	frames := make([][]byte, BatchSizeMax)
	for i := range frames {
		frames[i] = make([]byte, testFrameBytes)
	}
	sendPhase := func(first, count int) {
		for seq := first; seq < first+count; {
			// Pace on the slower receiver's highest sequence, so neither
			// socket buffer overflows and all loss is the injected loss.
			for seq-window > int(min(trackers[0].highest.Load(), trackers[1].highest.Load())) {
				if time.Now().After(deadline) {
					t.Fatalf("receivers stalled at %d and %d of %d", trackers[0].highest.Load(), trackers[1].highest.Load(), seq)
				}
				// Not Sleep: with a 4 ms tick each sleep would cost 4 ms.
				runtime.Gosched()
			}
			n := min(BatchSizeMax, first+count-seq)
			for i := 0; i < n; i++ {
				putTestFrame(frames[i], uint64(seq+i))
			}
			if err := sender.Send(frames[:n], group); err != nil {
				t.Fatal(err)
			}
			seq += n
		}
	}
	// waitFor polls cond until it holds or the deadline passes.
	waitFor := func(what string, cond func() bool) {
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Phase 1: no loss anywhere.
	start := time.Now()
	sendPhase(0, cleanFrames)
	t.Logf("phase 1 sent in %v", time.Since(start))
	for i, tr := range trackers {
		waitFor("phase 1 at every receiver", func() bool { return tr.countRange(0, cleanFrames) == cleanFrames })
		if c := receivers[i].Counters(); c.Delivered() != cleanFrames {
			t.Errorf("phase 1: receiver %d delivered %d", i, c.Delivered())
		}
	}

	// Phase 2: drop one in 20 at receiver B (hosts[2]) only.
	b := lan.Hosts[2]
	b.DropRandom(t, group.Port(), 20)
	t.Logf("phase 1 received in %v", time.Since(start))
	sendPhase(cleanFrames, framesPerPhase)
	t.Logf("phase 2 sent in %v", time.Since(start))
	waitFor("phase 2 at receiver A", func() bool {
		return trackers[0].countRange(cleanFrames, totalFrames) == framesPerPhase
	})
	var dropped uint64
	waitFor("receiver B to account for every frame", func() bool {
		dropped = b.Dropped(t)
		return receivers[1].Counters().DatagramsReceived+dropped == totalFrames
	})

	sc := sender.Counters()
	if sc.DatagramsSent != totalFrames || sc.SendErrors != 0 || sc.BytesSent != totalFrames*testFrameBytes {
		t.Errorf("sender counters %+v", sc)
	}
	ca, cb := receivers[0].Counters(), receivers[1].Counters()
	// Receiver A: everything, exactly once.
	if ca.DatagramsReceived != totalFrames || ca.Delivered() != totalFrames ||
		ca.Dropped() != 0 || ca.ReceiveOverflows != 0 || ca.ReceiveTruncations != 0 || trackers[0].repeats != 0 {
		t.Errorf("receiver A saw loss or damage: %+v, repeats %d", ca, trackers[0].repeats)
	}
	// Receiver B: exactly the nftables drops are missing, all in phase 2.
	seenB := trackers[1].countRange(cleanFrames, totalFrames)
	if uint64(framesPerPhase-seenB) != dropped || cb.Delivered() != totalFrames-dropped ||
		cb.Dropped() != 0 || cb.ReceiveOverflows != 0 || trackers[1].repeats != 0 {
		t.Errorf("receiver B: %d of phase 2 seen, nft dropped %d, counters %+v", seenB, dropped, cb)
	}
	// One in 20 of 100k is 5000 ± 69 (one sd); allow ±20 sd.
	if dropped < 3600 || dropped > 6400 {
		t.Errorf("nftables dropped %d, want about 5000", dropped)
	}
	t.Logf("phase 2: receiver B lost %d of %d (%.2f%%); receiver A lost 0; sender %d datagrams, histogram %v",
		dropped, framesPerPhase, 100*float64(dropped)/framesPerPhase, sc.DatagramsSent, sc.SendBatches)
}
