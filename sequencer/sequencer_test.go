package sequencer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/wire"
)

// recorder keeps copies of every frame a sequencer's outbox held, as the
// runtime would send them.
type recorder struct {
	multicast [][]byte
	unicast   [][]byte
	to        []uint32
}

// take moves s's outbox into r, in order, and clears it.
func (r *recorder) take(s *Sequencer) {
	for _, o := range s.Outbox() {
		if o.Group {
			r.multicast = append(r.multicast, bytes.Clone(o.Frame))
			continue
		}
		r.unicast = append(r.unicast, bytes.Clone(o.Frame))
		r.to = append(r.to, o.Node)
	}
	s.ClearOutbox()
}

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// messages returns seq -> payload for every DATA/RETRANSMIT frame in fs.
func messages(t tb, fs [][]byte) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	for _, b := range fs {
		f, _, err := wire.Parse(b)
		if err != nil {
			t.Fatalf("sent an invalid frame: %v", err)
		}
		it := f.Messages()
		for {
			seq, m, ok := it.Next()
			if !ok {
				break
			}
			out[seq] = bytes.Clone(m)
		}
	}
	return out
}

func types(t tb, fs [][]byte) []wire.Type {
	var out []wire.Type
	for _, b := range fs {
		f, _, err := wire.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f.Type)
	}
	return out
}

func cmd(seq uint64, n int) []byte {
	b := make([]byte, max(n, 8))
	binary.LittleEndian.PutUint64(b, seq)
	return b
}

// history is a journal stand-in: records first..last, payload = cmd(seq).
type history struct {
	first, last uint64
	size        int
	reads       int
}

func (h *history) ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error {
	h.reads++
	if from < h.first {
		return errors.New("compacted")
	}
	for s := from; s <= h.last; s++ {
		if !fn(1, s, cmd(s, h.size)) {
			return nil
		}
	}
	return nil
}

func TestSubmitAssignsSeqAndBatches(t *testing.T) {
	var out recorder
	s := New(Config{Stream: 1, Node: 9}, 3, 100, nil)
	for i := uint64(1); i <= 100; i++ {
		seq, err := s.Submit(cmd(100+i, 32), 0)
		if err != nil || seq != 100+i {
			t.Fatalf("submit %d: seq %d err %v", i, seq, err)
		}
	}
	s.Flush(0)
	out.take(s)
	// 42 messages of 32 bytes fit a 1472-byte frame: 42 + 42 + 16.
	if len(out.multicast) != 3 {
		t.Fatalf("%d frames, want 3", len(out.multicast))
	}
	got := messages(t, out.multicast)
	for seq := uint64(101); seq <= 200; seq++ {
		if !bytes.Equal(got[seq], cmd(seq, 32)) {
			t.Fatalf("seq %d missing or wrong", seq)
		}
	}
	for _, b := range out.multicast {
		f, _, _ := wire.Parse(b)
		if f.Epoch != 3 || f.Node != 9 || f.Stream != 1 || f.Type != wire.TypeData || len(b) > wire.DefaultDatagramLen {
			t.Fatalf("frame header %+v len %d", f.Header, len(b))
		}
	}
	if s.HighestSent() != 200 || s.LastAssigned() != 200 {
		t.Fatalf("sent %d assigned %d", s.HighestSent(), s.LastAssigned())
	}
	s.Flush(0)
	out.take(s)
	if len(out.multicast) != 3 {
		t.Fatal("an empty Flush sent a frame")
	}
}

func TestSubmitTooLarge(t *testing.T) {
	s := New(Config{}, 1, 0, nil)
	if _, err := s.Submit(make([]byte, s.MaxCommand()+1), 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
	if s.LastAssigned() != 0 {
		t.Fatal("a refused command was sequenced")
	}
	if seq, err := s.Submit(make([]byte, s.MaxCommand()), 0); err != nil || seq != 1 {
		t.Fatalf("max-size command: %d %v", seq, err)
	}
}

func TestHeartbeatWhenIdle(t *testing.T) {
	var out recorder
	s := New(Config{HeartbeatIntervalNs: 10}, 1, 0, nil)
	if !s.Tick(0) {
		t.Fatal("no heartbeat at start")
	}
	if s.Tick(5) {
		t.Fatal("heartbeat before the interval")
	}
	s.Submit(cmd(1, 8), 6)
	s.Flush(6)
	if s.Tick(15) {
		t.Fatal("heartbeat right after data")
	}
	if !s.Tick(16) {
		t.Fatal("no heartbeat after the interval")
	}
	out.take(s)
	f, _, err := wire.Parse(out.multicast[len(out.multicast)-1])
	if err != nil {
		t.Fatal(err)
	}
	hb, err := wire.DecodeHeartbeat(&f)
	if err != nil || hb.HighestSeq != 1 {
		t.Fatalf("heartbeat %+v %v", hb, err)
	}
}

func nak(ranges ...wire.Range) *wire.Nak {
	n := &wire.Nak{Origin: wire.Origin{Node: 5}}
	for _, r := range ranges {
		if !n.Add(r) {
			panic("bad range")
		}
	}
	return n
}

// fill submits n commands and flushes, as a runtime draining the outbox
// after each call (into out when it is not nil).
func fill(s *Sequencer, out *recorder, n uint64, size int) {
	if out == nil {
		out = &recorder{}
	}
	for i := uint64(0); i < n; i++ {
		s.Submit(cmd(s.LastAssigned()+1, size), 0)
		out.take(s)
	}
	s.Flush(0)
	out.take(s)
}

func TestNakServedFromRing(t *testing.T) {
	var out recorder
	s := New(Config{}, 1, 0, nil)
	fill(s, &out, 500, 32)
	s.OnNak(nak(wire.Range{From: 10, To: 12}, wire.Range{From: 300, To: 320}), 1)
	out.take(s)
	got := messages(t, out.unicast)
	for _, seq := range []uint64{10, 11, 12, 300, 310, 320} {
		if !bytes.Equal(got[seq], cmd(seq, 32)) {
			t.Fatalf("seq %d not resent", seq)
		}
	}
	for i, typ := range types(t, out.unicast) {
		if typ != wire.TypeRetransmit || out.to[i] != 5 {
			t.Fatalf("frame %d: %s to %d", i, typ, out.to[i])
		}
	}
	// Frames hold 42: 10..12 lies in 1..42 and 300..320 in 295..336.
	if len(out.unicast) != 2 {
		t.Fatalf("%d frames resent, want 2", len(out.unicast))
	}
}

func TestNakAboveHighestIgnored(t *testing.T) {
	var out recorder
	s := New(Config{}, 1, 0, nil)
	fill(s, &out, 10, 32)
	s.OnNak(nak(wire.Range{From: 11, To: 20}), 1)
	out.take(s)
	if len(out.unicast) != 0 || s.Stats().NaksAboveHighest != 1 {
		t.Fatalf("sent %d, stats %+v", len(out.unicast), s.Stats())
	}
	s.OnNak(nak(wire.Range{From: 9, To: 1000}), 1)
	out.take(s)
	if got := messages(t, out.unicast); len(got) != 10 {
		t.Fatalf("resent %d messages, want the frame holding 9..10", len(got))
	}
}

func TestNakFallsBackToJournalThenSnapshot(t *testing.T) {
	var out recorder
	h := &history{first: 50, last: 10_000, size: 32}
	s := New(Config{RingFrames: 4}, 2, 0, h)
	fill(s, &out, 1000, 32) // ring keeps the last 4 frames only
	if s.ringOldest() <= 100 {
		t.Fatalf("ring still holds %d", s.ringOldest())
	}
	s.OnNak(nak(wire.Range{From: 60, To: 100}), 1)
	out.take(s)
	wantResent(t, &out, 60, 100, "the journal")
	if s.Stats().JournalFallbacks != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
	// Below the journal's first record: NEED_SNAPSHOT.
	out = recorder{}
	s.SetSnapshotSeq(49)
	s.OnNak(nak(wire.Range{From: 10, To: 20}), 1)
	out.take(s)
	if len(out.unicast) != 1 {
		t.Fatalf("%d frames", len(out.unicast))
	}
	f, _, err := wire.Parse(out.unicast[0])
	if err != nil {
		t.Fatal(err)
	}
	ns, err := wire.DecodeNeedSnapshot(&f)
	if err != nil || ns.SnapshotSeq != 49 || ns.FirstAvailable != s.ringOldest() {
		t.Fatalf("need snapshot %+v %v", ns, err)
	}
	// Without a journal, anything older than the ring is gone.
	out = recorder{}
	s2 := New(Config{RingFrames: 2}, 2, 0, nil)
	fill(s2, &out, 500, 32)
	s2.OnNak(nak(wire.Range{From: 1, To: 1}), 1)
	out.take(s2)
	if types(t, out.unicast)[0] != wire.TypeNeedSnapshot {
		t.Fatal("no NEED_SNAPSHOT without a journal")
	}
}

func TestNakBoundedPerNakAndByBandwidth(t *testing.T) {
	var out recorder
	s := New(Config{MaxFramesPerNak: 3}, 1, 0, nil)
	fill(s, &out, 42*10, 32)
	s.OnNak(nak(wire.Range{From: 1, To: 420}), 0)
	out.take(s)
	if len(out.unicast) != 3 || s.Stats().NakFramesClamped != 1 {
		t.Fatalf("sent %d frames, stats %+v", len(out.unicast), s.Stats())
	}
	// Bandwidth: 1 frame of burst, refilled at 1472 bytes per µs.
	out = recorder{}
	s = New(Config{RetransmitBurstBytes: 1472, RetransmitBytesPerSec: 1472_000_000}, 1, 0, nil)
	fill(s, &out, 42*10, 32)
	s.OnNak(nak(wire.Range{From: 1, To: 420}), 0)
	out.take(s)
	if len(out.unicast) != 1 || s.Stats().NakBudgetExceeded != 1 {
		t.Fatalf("sent %d frames with one frame of tokens, stats %+v", len(out.unicast), s.Stats())
	}
	s.OnNak(nak(wire.Range{From: 1, To: 420}), 0)
	out.take(s)
	if len(out.unicast) != 1 {
		t.Fatal("sent without tokens")
	}
	s.OnNak(nak(wire.Range{From: 1, To: 420}), 1000) // 1 µs later: one frame's worth
	out.take(s)
	if len(out.unicast) != 2 {
		t.Fatalf("sent %d after a refill of one frame", len(out.unicast))
	}
}

func TestAnnounceAndHash(t *testing.T) {
	var out recorder
	s := New(Config{}, 5, 77, nil)
	s.AnnounceEpoch(4, 77, 0)
	s.SendHash(77, 0xabc, 0)
	out.take(s)
	f, _, err := wire.Parse(out.multicast[0])
	if err != nil {
		t.Fatal(err)
	}
	ne, _ := wire.DecodeNewEpoch(&f)
	if ne.Epoch != 5 || ne.PrevEpoch != 4 || ne.LastSeq != 77 {
		t.Fatalf("%+v", ne)
	}
	f, _, _ = wire.Parse(out.multicast[1])
	h, _ := wire.DecodeHash(&f)
	if h.Seq != 77 || h.Hash != 0xabc {
		t.Fatalf("%+v", h)
	}
	if seq, _ := s.Submit(cmd(78, 8), 0); seq != 78 {
		t.Fatalf("promoted sequencer continued at %d", seq)
	}
}

// TestPropertyNakRecoversEverything: for random command sizes, flush points
// and NAK ranges, with an unbounded budget, every NAKed seq that was sent
// comes back with its original payload, from the ring or the journal.
func TestPropertyNakRecoversEverything(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var out recorder
		ringFrames := rapid.IntRange(1, 16).Draw(t, "ring")
		n := rapid.Uint64Range(1, 600).Draw(t, "n")
		size := rapid.IntRange(8, 200).Draw(t, "size")
		h := &history{first: 1, last: n, size: size}
		s := New(Config{RingFrames: ringFrames, MaxFramesPerNak: 1 << 20, RetransmitBurstBytes: 1 << 40}, 1, 0, h)
		// The runtime drains after every call, or lets a few calls' frames
		// pile up: the outbox keeps them all, in order.
		for i := uint64(1); i <= n; i++ {
			s.Submit(cmd(i, size), 0)
			if rapid.IntRange(0, 9).Draw(t, "flush") == 0 {
				s.Flush(0)
			}
			if rapid.IntRange(0, 3).Draw(t, "drain") != 0 {
				out.take(s)
			}
		}
		s.Flush(0)
		out.take(s)
		sent := messages(t, out.multicast)
		if uint64(len(sent)) != n {
			t.Fatalf("multicast %d of %d", len(sent), n)
		}
		from := rapid.Uint64Range(1, n).Draw(t, "from")
		to := rapid.Uint64Range(from, n+50).Draw(t, "to")
		out.unicast = nil
		s.OnNak(nak(wire.Range{From: from, To: to}), 1)
		out.take(s)
		got := messages(t, out.unicast)
		for seq := from; seq <= min(to, n); seq++ {
			if !bytes.Equal(got[seq], cmd(seq, size)) {
				t.Fatalf("seq %d not recovered (ring oldest %d)", seq, s.ringOldest())
			}
		}
		for seq := range got {
			if seq > n {
				t.Fatalf("resent seq %d never assigned", seq)
			}
		}
	})
}

// drain sends nothing: it reads the outbox as the runtime would and
// clears it.
func drain(s *Sequencer) (n int) {
	for _, o := range s.Outbox() {
		n += len(o.Frame)
	}
	s.ClearOutbox()
	return n
}

func TestZeroAllocs(t *testing.T) {
	s := New(Config{}, 1, 0, nil)
	c := make([]byte, 32)
	if a := testing.AllocsPerRun(1000, func() {
		s.Submit(c, 0)
		drain(s)
	}); a != 0 {
		t.Errorf("Submit: %v allocs", a)
	}
	s.Flush(0)
	drain(s)
	n := nak(wire.Range{From: 1, To: 100})
	if a := testing.AllocsPerRun(100, func() { s.OnNak(n, 0); drain(s) }); a != 0 {
		t.Errorf("OnNak from ring: %v allocs", a)
	}
	if a := testing.AllocsPerRun(100, func() { s.Tick(1 << 40); drain(s) }); a != 0 {
		t.Errorf("Tick: %v allocs", a)
	}
}

func BenchmarkSubmit32(b *testing.B) {
	s := New(Config{}, 1, 0, nil)
	c := make([]byte, 32)
	b.ReportAllocs()
	for b.Loop() {
		s.Submit(c, 0)
		drain(s)
	}
}

func BenchmarkNakFromRing(b *testing.B) {
	s := New(Config{RetransmitBurstBytes: 1 << 50, RetransmitBytesPerSec: 1 << 50}, 1, 0, nil)
	fill(s, nil, 42*64, 32)
	n := nak(wire.Range{From: 1, To: 42 * 8})
	b.ReportAllocs()
	for b.Loop() {
		s.OnNak(n, 0)
		drain(s)
	}
}

func ExampleSequencer() {
	var out recorder
	s := New(Config{Stream: 1, Node: 1}, 1, 0, nil)
	for _, c := range []string{"buy", "sell"} {
		seq, _ := s.Submit([]byte(c), 0)
		fmt.Println("seq", seq, c)
	}
	s.Flush(0)
	out.take(s)
	fmt.Println("frames", len(out.multicast))
	// Output:
	// seq 1 buy
	// seq 2 sell
	// frames 1
}

// epochHistory is a journal whose records 1..50 are epoch 1, 51..100 epoch 2.
type epochHistory struct{}

func (epochHistory) ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error {
	for s := from; s <= 100; s++ {
		e := uint64(1)
		if s > 50 {
			e = 2
		}
		if !fn(e, s, cmd(s, 8)) {
			return nil
		}
	}
	return nil
}

// TestJournalRetransmitKeepsRecordEpochs: records resent from the journal
// travel in frames stamped with the epoch they were sequenced under.
func TestJournalRetransmitKeepsRecordEpochs(t *testing.T) {
	var out recorder
	s := New(Config{RingFrames: 1, MaxFramesPerNak: 100}, 3, 100, epochHistory{})
	s.Submit(cmd(101, 8), 0)
	s.Flush(0)
	s.OnNak(nak(wire.Range{From: 40, To: 60}), 0)
	out.take(s)
	seen := map[uint64]uint64{}
	for _, b := range out.unicast {
		f, _, err := wire.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		it := f.Messages()
		for {
			seq, _, ok := it.Next()
			if !ok {
				break
			}
			seen[seq] = f.Epoch
		}
	}
	for seq := uint64(40); seq <= 60; seq++ {
		want := uint64(1)
		if seq > 50 {
			want = 2
		}
		if seen[seq] != want {
			t.Fatalf("seq %d resent under epoch %d, want %d", seq, seen[seq], want)
		}
	}
}

func TestHeartbeatCarriesReleased(t *testing.T) {
	out := &recorder{}
	s := New(Config{Stream: 1, Node: 1}, 3, 0, nil)
	s.SetReleased(41, 977)
	s.Heartbeat(1)
	out.take(s)
	f, _, err := wire.Parse(out.multicast[len(out.multicast)-1])
	if err != nil {
		t.Fatal(err)
	}
	hb, err := wire.DecodeHeartbeat(&f)
	if err != nil || hb.Released != 41 || hb.MDSeq != 977 {
		t.Fatalf("heartbeat %+v, %v", hb, err)
	}
}

// The default retransmit burst follows DatagramLen: one NAK of jumbo
// frames is answered in full at once, as one NAK of 1472-byte frames is
// with the default length (a fixed 64 × 1472-byte bucket would send ten).
func TestRetransmitBurstFollowsDatagramLen(t *testing.T) {
	for _, dlen := range []int{wire.DefaultDatagramLen, 8972} {
		var out recorder
		s := New(Config{DatagramLen: dlen}, 1, 0, nil)
		perFrame := (dlen - wire.HeaderLen) / (wire.MessageOverhead + 100)
		fill(s, &out, uint64(perFrame*(DefaultMaxFramesPerNak+10)), 100)
		if got := len(out.multicast); got < DefaultMaxFramesPerNak+10 {
			t.Fatalf("datagram %d: %d frames multicast, want at least %d", dlen, got, DefaultMaxFramesPerNak+10)
		}
		for _, f := range out.multicast[:DefaultMaxFramesPerNak] {
			if len(f) < dlen-wire.MessageOverhead-100 || len(f) > dlen {
				t.Fatalf("datagram %d: a full frame of %d bytes", dlen, len(f))
			}
		}
		s.OnNak(nak(wire.Range{From: 1, To: s.LastAssigned()}), 0)
		out.take(s)
		if len(out.unicast) != DefaultMaxFramesPerNak || s.Stats().NakBudgetExceeded != 0 {
			t.Fatalf("datagram %d: resent %d frames of %d, stats %+v", dlen, len(out.unicast), DefaultMaxFramesPerNak, s.Stats())
		}
	}
}

// TestDefaultRingKeepsItsBytes: the default ring is the same memory at
// any datagram size (fewer, fuller frames), never fewer than 64 frames.
func TestDefaultRingKeepsItsBytes(t *testing.T) {
	for _, tc := range []struct{ dlen, frames int }{
		{0, DefaultRingFrames},
		{wire.DefaultDatagramLen, DefaultRingFrames},
		{1200, DefaultRingFrames},
		{8972, DefaultRingBytes / 8972},
		{wire.MaxFrameLen, DefaultRingBytes / wire.MaxFrameLen},
	} {
		c := Config{DatagramLen: tc.dlen}
		c.withDefaults()
		if c.RingFrames != tc.frames {
			t.Errorf("DatagramLen %d: %d ring frames, want %d", tc.dlen, c.RingFrames, tc.frames)
		}
		if got := c.RingFrames * c.DatagramLen; got > DefaultRingBytes && c.RingFrames > minDefaultRingFrames {
			t.Errorf("DatagramLen %d: ring of %d bytes over %d", tc.dlen, got, DefaultRingBytes)
		}
	}
	c := Config{DatagramLen: 8972, RingFrames: 10}
	c.withDefaults()
	if c.RingFrames != 10 {
		t.Errorf("a configured ring changed: %d frames", c.RingFrames)
	}
}

// TestMaxCommandBytesCapsJumboFrames: a cap set apart from the datagram
// size bounds a command while the frames still batch up to DatagramLen.
func TestMaxCommandBytesCapsJumboFrames(t *testing.T) {
	s := New(Config{DatagramLen: 8972, MaxCommandBytes: 1430}, 1, 0, nil)
	if got := s.MaxCommand(); got != 1430 {
		t.Fatalf("MaxCommand %d, want 1430", got)
	}
	if _, err := s.Submit(make([]byte, 1431), 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1431 bytes: err %v, want ErrTooLarge", err)
	}
	for i := 0; i < 6; i++ {
		if _, err := s.Submit(make([]byte, 1430), 0); err != nil {
			t.Fatalf("1430 bytes: %v", err)
		}
	}
	s.Flush(0)
	out := s.Outbox()
	if len(out) != 1 || len(out[0].Frame) <= wire.DefaultDatagramLen {
		t.Fatalf("6 × 1430 bytes left in %d frame(s), first %d bytes: want one jumbo frame", len(out), len(out[0].Frame))
	}
	if s := New(Config{DatagramLen: 1472, MaxCommandBytes: 5000}, 1, 0, nil); s.MaxCommand() != wire.DefaultDatagramLen-wire.HeaderLen-wire.MessageOverhead {
		t.Fatalf("a cap over the frame: MaxCommand %d", s.MaxCommand())
	}
}

// A sequencer started in an earlier one's memory (NewWith, Buffers) is a
// new one: it continues after its lastSeq, and its ring holds none of
// the earlier term's frames (a NAK for them is answered from the
// journal, here gone: NEED_SNAPSHOT); a frame it sends and then resends
// is its own.
func TestNewWithReusesNothingButMemory(t *testing.T) {
	var out recorder
	s := New(Config{}, 1, 0, nil)
	fill(s, &out, 500, 32)
	b := s.Buffers()
	s2 := NewWith(Config{}, 2, 1000, nil, b)
	if &s2.ring[0] != &b.ring[0] {
		t.Fatal("NewWith allocated a new ring")
	}
	out = recorder{}
	s2.OnNak(nak(wire.Range{From: 10, To: 12}), 1)
	out.take(s2)
	if len(out.unicast) != 1 || types(t, out.unicast)[0] != wire.TypeNeedSnapshot {
		t.Fatalf("NAK for the earlier term's seqs: %d frames %v, want one NEED_SNAPSHOT", len(out.unicast), types(t, out.unicast))
	}
	out = recorder{}
	fill(s2, &out, 10, 32)
	if s2.LastAssigned() != 1010 {
		t.Fatalf("last assigned %d, want 1010", s2.LastAssigned())
	}
	out = recorder{}
	s2.OnNak(nak(wire.Range{From: 1001, To: 1010}), 2)
	out.take(s2)
	wantResent(t, &out, 1001, 1010, "the reused ring")
	// Memory made for another datagram size is not taken.
	if s3 := NewWith(Config{DatagramLen: 9000}, 3, 0, nil, s2.Buffers()); &s3.ring[0] == &b.ring[0] {
		t.Fatal("a ring of 1472-byte frames reused for 9000-byte ones")
	}
}

// wantResent fails unless out's unicast frames carry every 32-byte
// command from..to, resent from where.
func wantResent(t *testing.T, out *recorder, from, to uint64, where string) {
	t.Helper()
	got := messages(t, out.unicast)
	for seq := from; seq <= to; seq++ {
		if !bytes.Equal(got[seq], cmd(seq, 32)) {
			t.Fatalf("seq %d not resent from %s", seq, where)
		}
	}
}
