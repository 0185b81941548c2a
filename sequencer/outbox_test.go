package sequencer

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// goldenDigest is the digest of every frame goldenScenario sends, with its
// destination and in order, as the sequencer produced them through its
// Output callback before the outbox replaced it (computed on that code):
// the outbox changed how frames leave the core, not one byte of them.
// Recomputed (2026-12-07) when HEARTBEAT and NEW_EPOCH grew the history
// id (8 zero bytes here: goldenSequencer leads no history id); nothing
// else in the scenario changed.
const (
	goldenFrames = 33
	goldenDigest = "e8e7ccf6183bc8672c8a0722da961d70aa082e9d4ddaf9395bb0758bc8c62df8"
)

// digest records (destination, frame) pairs the way the runtime would
// send them.
type digest struct {
	b []byte
	n int
}

func (d *digest) take(s *Sequencer) {
	for _, o := range s.Outbox() {
		var hdr [9]byte
		if o.Group {
			hdr[0] = 1
		}
		binary.LittleEndian.PutUint32(hdr[1:], o.Node)
		binary.LittleEndian.PutUint32(hdr[5:], uint32(len(o.Frame)))
		d.b = append(d.b, hdr[:]...)
		d.b = append(d.b, o.Frame...)
		d.n++
	}
	s.ClearOutbox()
}

func (d *digest) sum() string { return fmt.Sprintf("%x", sha256.Sum256(d.b)) }

// goldenScenario runs every call that produces frames: NEW_EPOCH, DATA
// sealed by Submit and by Flush, HASH, HEARTBEAT, RETRANSMIT from the ring
// and from the journal to two standbys, NEED_SNAPSHOT. after runs after
// each call.
func goldenScenario(s *Sequencer, after func()) {
	s.AnnounceEpoch(4, 0, 1)
	after()
	var now int64 = 10
	for i := uint64(1); i <= 400; i++ {
		s.Submit(cmd(i, 8+int(i%50)), now)
		after()
		if i%37 == 0 {
			s.SendHash(i, i*31, now)
			after()
		}
		if i%91 == 0 {
			s.Flush(now)
			after()
		}
		now += 1000
	}
	s.Flush(now)
	after()
	s.SetReleased(300, 12)
	s.Heartbeat(now)
	after()
	s.Tick(now + 1)
	after()
	s.Tick(now + 20_000_000)
	after()
	s.OnNak(nak(wire.Range{From: 390, To: 400}), now)
	after()
	n := nak(wire.Range{From: 30, To: 60}, wire.Range{From: 395, To: 420})
	n.Node = 9
	s.OnNak(n, now+1000)
	after()
	s.OnNak(nak(wire.Range{From: 1, To: 5}), now+2000)
	after()
}

func goldenSequencer() *Sequencer {
	h := &history{first: 20, last: 1 << 30, size: 24}
	return New(Config{Stream: 3, Node: 7, RingFrames: 4, MaxFramesPerNak: 10}, 5, 0, h)
}

// TestOutboxFramesIdentical: drained after every call, or once at the end
// (every frame piled up in the outbox), the frames, their destinations and
// their order are byte for byte what the Output callback received.
func TestOutboxFramesIdentical(t *testing.T) {
	var each digest
	s := goldenSequencer()
	goldenScenario(s, func() { each.take(s) })
	var once digest
	s = goldenSequencer()
	goldenScenario(s, func() {})
	once.take(s)
	for _, d := range []*digest{&each, &once} {
		if d.n != goldenFrames || d.sum() != goldenDigest {
			t.Fatalf("%d frames, digest %s; want %d, %s", d.n, d.sum(), goldenFrames, goldenDigest)
		}
	}
}

// TestOutboxOrderAndDestinations: one call's frames come out in the order
// produced, each with its destination, and ClearOutbox empties the outbox.
func TestOutboxOrderAndDestinations(t *testing.T) {
	s := New(Config{Stream: 1, Node: 1, MaxFramesPerNak: 100}, 2, 0, nil)
	s.AnnounceEpoch(1, 0, 0)
	for i := uint64(1); i <= 100; i++ {
		s.Submit(cmd(i, 32), 0) // 42 to a frame: two sealed by Submit
	}
	s.SendHash(100, 7, 0)
	s.Flush(0) // the third DATA frame, after the HASH
	s.Heartbeat(0)
	s.OnNak(nak(wire.Range{From: 1, To: 100}), 0) // node 5: three RETRANSMIT
	var got []string
	for _, o := range s.Outbox() {
		f, _, err := wire.Parse(o.Frame)
		if err != nil {
			t.Fatal(err)
		}
		dest := "group"
		if !o.Group {
			dest = fmt.Sprint("node ", o.Node)
		}
		got = append(got, fmt.Sprintf("%s %d %s", f.Type, f.Seq, dest))
	}
	want := []string{
		wire.TypeNewEpoch.String() + " 0 group",
		wire.TypeData.String() + " 1 group",
		wire.TypeData.String() + " 43 group",
		wire.TypeHash.String() + " 100 group",
		wire.TypeData.String() + " 85 group",
		wire.TypeHeartbeat.String() + " 100 group",
		wire.TypeRetransmit.String() + " 1 node 5",
		wire.TypeRetransmit.String() + " 43 node 5",
		wire.TypeRetransmit.String() + " 85 node 5",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outbox\n%v\nwant\n%v", got, want)
	}
	s.ClearOutbox()
	if len(s.Outbox()) != 0 {
		t.Fatalf("%d frames after ClearOutbox", len(s.Outbox()))
	}
	if s.Tick(1); len(s.Outbox()) != 0 {
		t.Fatal("a Tick within the interval left a frame")
	}
}

// TestOutboxFramesStableUntilClear: frames of earlier calls are not
// overwritten by later calls before ClearOutbox, even past the
// preallocated size (the outbox grows once, then reuses).
func TestOutboxFramesStableUntilClear(t *testing.T) {
	s := New(Config{MaxFramesPerNak: 1}, 1, 0, nil) // 2 buffers preallocated
	for i := range 5 {
		s.SendHash(uint64(i+1), uint64(i), 0)
	}
	out := s.Outbox()
	if len(out) != 5 {
		t.Fatalf("%d frames, want 5", len(out))
	}
	for i, o := range out {
		f, _, err := wire.Parse(o.Frame)
		if err != nil {
			t.Fatal(err)
		}
		h, err := wire.DecodeHash(&f)
		if err != nil || h.Seq != uint64(i+1) || h.Hash != uint64(i) {
			t.Fatalf("frame %d: %+v %v", i, h, err)
		}
	}
	s.ClearOutbox()
	if a := testing.AllocsPerRun(100, func() {
		for i := range 5 {
			s.SendHash(uint64(i+1), uint64(i), 0)
		}
		s.ClearOutbox()
	}); a != 0 {
		t.Fatalf("%v allocs per round once grown, want 0", a)
	}
}

// TestOutboxReuseAllocs: a runtime's steady state (submit, seal, flush,
// heartbeat, hash, a NAK served from the ring, drained after each call)
// allocates nothing. (A NAK served from the journal allocates its read
// callbacks, as it did before the outbox: off the hot path.)
func TestOutboxReuseAllocs(t *testing.T) {
	s := New(Config{}, 1, 0, nil)
	c := make([]byte, 32)
	ringNak := nak(wire.Range{From: 1, To: 200})
	var seq uint64
	var nowNs int64
	run := func() {
		for range 100 {
			seq, _ = s.Submit(c, 0)
			drain(s)
		}
		s.Flush(0)
		drain(s)
		s.SendHash(seq, 1, 0)
		s.Heartbeat(0)
		drain(s)
		nowNs += 1_000_000_000 // a full bucket of retransmit tokens
		before := s.Stats().RetransmitFrames
		s.OnNak(ringNak, nowNs)
		if drain(s) == 0 || s.Stats().RetransmitFrames == before {
			t.Fatal("the NAK was not served from the ring")
		}
	}
	run()
	if a := testing.AllocsPerRun(50, run); a != 0 {
		t.Fatalf("%v allocs per round, want 0", a)
	}
	if s.Stats().RetransmitFrames == 0 {
		t.Fatalf("the round did not retransmit: %+v", s.Stats())
	}
}
