//go:build linux

package bus

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// groPair opens a sender and a receiver on 127.0.0.1, the receiver with
// UDP_GRO when gro; it skips when the kernel refuses UDP_GRO (before
// Linux 5.0).
func groPair(t *testing.T, gro bool) (a, b *UDP) {
	t.Helper()
	a, err := ListenUnicast(UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = ListenUnicast(UnicastConfig{Tuning: Tuning{RecvBufferBytes: 4 << 20, GRO: gro}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if r := b.Report(); gro != r.GRO {
		if gro {
			t.Skipf("the kernel refused UDP_GRO: %v", r.GROErr)
		}
		t.Fatal("UDP_GRO on without Tuning.GRO")
	}
	return a, b
}

// run makes count datagrams of size bytes, each starting with its index.
func run(count, size, from int) [][]byte {
	out := make([][]byte, count)
	for i := range out {
		p := bytes.Repeat([]byte{byte(from + i)}, size)
		if size >= 2 {
			p[0], p[1] = byte((from+i)>>8), byte(from+i)
		}
		out[i] = p
	}
	return out
}

// receiveSome reads with a wait until something arrives, into b.
func receiveSome(t *testing.T, u *UDP, b *batch) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n, err := u.Receive(b.bufs, b.sizes, b.from, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return n
		}
	}
	t.Fatal("nothing arrived in 5 s")
	return 0
}

// TestReceiveCoalescedRun: a run of 40 datagrams sent as one segmented
// message arrives as one message at a receiver with UDP_GRO; Receive
// hands it out in order, five at a time into five buffers, and the calls
// after the first make no system call (no receive batch counted) while
// Buffered says more is held. Without UDP_GRO the same datagrams arrive
// one by one, and nothing counts as coalesced.
func TestReceiveCoalescedRun(t *testing.T) {
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			a, b := groPair(t, gro)
			msgs := run(40, 1000, 0)
			if err := a.Send(msgs, b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			if a.Counters().SegmentedSends == 0 {
				t.Skip("the kernel refused segmentation: no run to coalesce")
			}
			rb := newBatch(5, 1472)
			var got [][]byte
			calls := 0
			for len(got) < len(msgs) {
				before := b.Counters()
				n := receiveSome(t, b, rb)
				after := b.Counters()
				calls++
				for i := 0; i < n; i++ {
					got = append(got, append([]byte(nil), rb.bufs[i][:rb.sizes[i]]...))
					if rb.from[i] != a.LocalAddr() {
						t.Fatalf("datagram %d from %v, want %v", len(got)-1, rb.from[i], a.LocalAddr())
					}
				}
				batches := sum(after.ReceiveBatches[:]) - sum(before.ReceiveBatches[:])
				if gro && calls > 1 && batches != 0 {
					t.Fatalf("call %d handed out the rest of the run with %d system calls, want none", calls, batches)
				}
				if want := gro && len(got) < len(msgs); b.Buffered() != want {
					t.Fatalf("after %d datagrams Buffered() = %v, want %v", len(got), b.Buffered(), want)
				}
			}
			for i := range msgs {
				if !bytes.Equal(got[i], msgs[i]) {
					t.Fatalf("datagram %d differs: %x... want %x...", i, got[i][:4], msgs[i][:4])
				}
			}
			c := b.Counters()
			if c.DatagramsReceived != uint64(len(msgs)) || c.Delivered() != uint64(len(msgs)) {
				t.Fatalf("received %d, delivered %d, want %d", c.DatagramsReceived, c.Delivered(), len(msgs))
			}
			if coalesced := c.CoalescedReceives > 0; coalesced != gro {
				t.Fatalf("CoalescedReceives %d with gro=%v", c.CoalescedReceives, gro)
			}
			if gro && calls != 8 {
				t.Fatalf("%d calls for 40 datagrams five at a time", calls)
			}
		})
	}
}

func sum(xs []uint64) (s uint64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// TestReceiveCoalescedTooLong: a coalesced datagram longer than the
// caller's buffer is dropped and counted as a truncation, as a plain read
// drops it; the shorter run after it is delivered whole.
func TestReceiveCoalescedTooLong(t *testing.T) {
	a, b := groPair(t, true)
	long, short := run(10, 1000, 0), run(10, 400, 10)
	for _, msgs := range [][][]byte{long, short} {
		if err := a.Send(msgs, b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	got := receiveN(t, b, len(short), 500)
	if len(got) != len(short) {
		t.Fatalf("delivered %d, want the %d short ones", len(got), len(short))
	}
	for i := range short {
		if !bytes.Equal(got[i], short[i]) {
			t.Fatalf("datagram %d differs", i)
		}
	}
	if c := b.Counters(); c.ReceiveTruncations != uint64(len(long)) || c.DatagramsReceived != uint64(len(long)+len(short)) {
		t.Fatalf("truncations %d of %d received; want %d of %d", c.ReceiveTruncations, c.DatagramsReceived, len(long), len(long)+len(short))
	}
}

// TestRunnerReadsBufferedRun: an agent runner whose endpoint holds the
// rest of a coalesced run (a run longer than a pass's buffers, the last
// thing the kernel had queued) reads it on the next pass instead of
// parking on an fd that polls empty. The agent's deadline is an hour
// away: a park would hold the rest for that long.
func TestRunnerReadsBufferedRun(t *testing.T) {
	a, b := groPair(t, true)
	ag := &countAgent{deadlineNs: testNowNs() + int64(time.Hour)}
	r, err := NewAgentRunner(AgentRunnerConfig{NowNs: testNowNs, Idle: Idle{Kind: IdleBlock}}, ag, b)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// One run of a pass's buffers and 8 more, queued whole before the
	// runner starts (loopback delivers inside the send).
	msgs := run(BatchSizeDefault+8, 1000, 1)
	if err := a.Send(msgs, b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if a.Counters().SegmentedSends != 1 {
		t.Skipf("not sent as one run: %+v", a.Counters())
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Counters().Delivered() < uint64(len(msgs)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	r.Stop() // the agent's count is the runner thread's until it stops
	if c := b.Counters(); ag.datagrams != len(msgs) || c.CoalescedReceives != 1 {
		t.Fatalf("the agent got %d of %d datagrams (%d coalesced runs read); the rest stayed held", ag.datagrams, len(msgs), c.CoalescedReceives)
	}
}

// TestParkerSeesBuffered: a Parker over a socket that holds the rest of
// a run reports it readable at once, though its fd polls empty.
func TestParkerSeesBuffered(t *testing.T) {
	a, b := groPair(t, true)
	p, err := NewParker(b)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := a.Send(run(20, 1000, 0), b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	rb := newBatch(4, 1472)
	if n := receiveSome(t, b, rb); n != 4 || !b.Buffered() {
		t.Skipf("the run did not arrive coalesced (%d datagrams read, buffered %v)", n, b.Buffered())
	}
	if ready, err := p.ParkNs(int64(10 * time.Second)); !ready || err != nil {
		t.Fatalf("ParkNs = %v, %v with 16 datagrams held", ready, err)
	}
	if ready, err := p.Park(10_000); !ready || err != nil {
		t.Fatalf("Park = %v, %v with 16 datagrams held", ready, err)
	}
}

// TestHandOutProperty: whatever runs were read (lengths, segment sizes,
// truncated messages, drops) and however many buffers of whatever size
// each call brings, handOut delivers the runs' datagrams exactly once, in
// order, each whole or counted as a truncation when it does not fit.
func TestHandOutProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := groRuns{buf: make([]byte, GROBufferBytes)}
		g.count = rapid.IntRange(1, groSlots).Draw(t, "messages")
		type want struct {
			payload   []byte
			truncated bool
		}
		var all []want
		bufSize := rapid.IntRange(1, 2000).Draw(t, "bufSize")
		for m := 0; m < g.count; m++ {
			seg := rapid.IntRange(1, 1500).Draw(t, "seg")
			size := rapid.IntRange(0, min(groSlotBytes, 64*seg)).Draw(t, "size")
			msg := &g.msgs[m]
			*msg = groMessage{size: size, seg: seg, truncated: rapid.IntRange(0, 9).Draw(t, "trunc") == 0,
				addr: netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", 1000+m))}
			slot := g.buf[m*groSlotBytes : m*groSlotBytes+size]
			for i := range slot {
				slot[i] = byte(rand.Uint32())
			}
			if msg.truncated {
				all = append(all, want{truncated: true})
				continue
			}
			if size == 0 {
				all = append(all, want{payload: []byte{}}) // an empty datagram
			}
			for off := 0; off < size; off += seg {
				p := slot[off:min(off+seg, size)]
				all = append(all, want{payload: p, truncated: len(p) > bufSize})
			}
		}
		var t2 rxTally
		var got [][]byte
		for calls := 0; g.next < g.count; calls++ {
			if calls > len(all)+1 {
				t.Fatalf("handOut made no progress: next %d of %d", g.next, g.count)
			}
			b := newBatch(rapid.IntRange(1, 64).Draw(t, "bufs"), bufSize)
			n := g.handOut(&t2, nil, b.bufs, b.sizes, b.from)
			for i := 0; i < n; i++ {
				got = append(got, append([]byte{}, b.bufs[i][:b.sizes[i]]...))
			}
		}
		var delivered [][]byte
		truncations := 0
		for _, w := range all {
			if w.truncated {
				truncations++
			} else {
				delivered = append(delivered, w.payload)
			}
		}
		if len(got) != len(delivered) || int(t2.truncations) != truncations || int(t2.datagrams) != len(all) {
			t.Fatalf("delivered %d, truncated %d, counted %d; want %d, %d, %d", len(got), t2.truncations, t2.datagrams, len(delivered), truncations, len(all))
		}
		for i := range got {
			if !bytes.Equal(got[i], delivered[i]) {
				t.Fatalf("datagram %d differs", i)
			}
		}
	})
}
