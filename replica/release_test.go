package replica

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// md stands for the market-data group in these tests' inputs and frames.
const md = ^uint64(0)

// relOut is one released output: its command's seq, its client (md: the
// market data) and its payload's size (at least 8: the seq goes first).
type relOut struct {
	seq, to uint64
	size    int
}

// gotFrame is one finished frame as the tests see it: where it goes and
// the seqs its payloads carry, in order.
type gotFrame struct {
	to   uint64
	seqs []uint64
}

func (g gotFrame) String() string { return fmt.Sprintf("%d:%v", g.to, g.seqs) }

var testOrigin = wire.Origin{Stream: 9, Node: 1, Epoch: 3}

// frameDatagram is a datagram size holding exactly per payloads of size
// bytes.
func frameDatagram(per, size int) int {
	return wire.HeaderLen + per*(wire.MessageOverhead+size)
}

// decodeFrame checks fr is a well-formed OUTPUT frame of the release's
// origin, not over dlen, whose header's seq is not after its first output,
// and returns what it carries.
func decodeFrame(t testing.TB, fr Frame, o wire.Origin, dlen int) gotFrame {
	t.Helper()
	if len(fr.Bytes) > dlen {
		t.Fatalf("frame of %d bytes over the datagram size %d", len(fr.Bytes), dlen)
	}
	f, n, err := wire.Parse(fr.Bytes)
	if err != nil || n != len(fr.Bytes) {
		t.Fatalf("frame does not parse whole: %v (%d of %d bytes)", err, n, len(fr.Bytes))
	}
	if f.Type != wire.TypeOutput || f.Stream != o.Stream || f.Node != o.Node || f.Epoch != o.Epoch {
		t.Fatalf("frame header %+v, want an OUTPUT frame of %+v", f.Header, o)
	}
	g := gotFrame{to: fr.Session}
	if fr.MarketData {
		g.to = md
	}
	for it := f.Messages(); ; {
		_, msg, ok := it.Next()
		if !ok {
			break
		}
		g.seqs = append(g.seqs, binary.LittleEndian.Uint64(msg))
	}
	if len(g.seqs) == 0 {
		t.Fatalf("an empty frame was handed out")
	}
	if f.Seq == 0 || f.Seq > g.seqs[0] {
		// The header carries the seq the frame was opened for: its
		// first output's, or an earlier one's that did not fit at all.
		t.Fatalf("frame first seq %d, its first output is %d", f.Seq, g.seqs[0])
	}
	return g
}

// release runs one release of outs through f, decoding every frame as it
// is handed out (its bytes are valid until the next call only).
func release(t testing.TB, f *ReleaseFramer, o wire.Origin, dlen int, outs []relOut) []gotFrame {
	t.Helper()
	var got []gotFrame
	buf := make([]byte, 0, 1<<16)
	f.Begin(o)
	for _, r := range outs {
		p := binary.LittleEndian.AppendUint64(buf[:0], r.seq)
		for len(p) < r.size {
			p = append(p, byte(r.seq))
		}
		var fr Frame
		var ok bool
		if r.to == md {
			ok = f.MarketData(r.seq, p, &fr)
		} else {
			ok = f.Output(r.seq, r.to, p, &fr)
		}
		if ok {
			got = append(got, decodeFrame(t, fr, o, dlen))
		}
	}
	for _, fr := range f.Flush() {
		got = append(got, decodeFrame(t, fr, o, dlen))
	}
	return got
}

func TestReleaseFramer(t *testing.T) {
	const size = 16
	two := frameDatagram(2, size) // two outputs to a frame
	many := frameDatagram(100, size)
	fr := func(to uint64, seqs ...uint64) gotFrame { return gotFrame{to, seqs} }
	outs := func(pairs ...uint64) []relOut { // seq, to, seq, to, …
		var r []relOut
		for i := 0; i < len(pairs); i += 2 {
			r = append(r, relOut{pairs[i], pairs[i+1], size})
		}
		return r
	}
	nine := outs(1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 1)
	for _, tc := range []struct {
		name string
		dlen int
		outs []relOut
		want []gotFrame
	}{
		{"empty release", many, nil, nil},
		{"one client", many, outs(1, 7, 2, 7, 3, 7), []gotFrame{fr(7, 1, 2, 3)}},
		{"interleaved clients: one frame each, in the order opened", many,
			outs(1, 7, 2, 5, 3, 7, 4, 5, 5, 7),
			[]gotFrame{fr(7, 1, 3, 5), fr(5, 2, 4)}},
		{"more clients than open frames: the oldest leaves first", many, nine,
			// Client 9 pushes client 1's frame out; client 1's next
			// output opens a new frame, pushing client 2's out.
			[]gotFrame{fr(1, 1), fr(2, 2), fr(3, 3), fr(4, 4), fr(5, 5), fr(6, 6), fr(7, 7), fr(8, 8), fr(9, 9), fr(1, 10)}},
		{"a frame overflowing a datagram leaves at once", two,
			outs(1, 7, 2, 5, 3, 7, 4, 7, 5, 5, 6, 7),
			// Client 7's frame [1 3] is full at 4; its next one, [4 6],
			// keeps its place, before client 5's [2 5], at the flush.
			[]gotFrame{fr(7, 1, 3), fr(7, 4, 6), fr(5, 2, 5)}},
		{"market data interleaved with client outputs: frames of its own, last", many,
			outs(1, 7, 2, md, 3, 7, 4, md, 5, 5, 6, md),
			[]gotFrame{fr(7, 1, 3), fr(5, 5), fr(md, 2, 4, 6)}},
		{"market data overflowing a datagram leaves at once", two,
			outs(1, md, 2, 7, 3, md, 4, md, 5, md, 6, md),
			[]gotFrame{fr(md, 1, 3), fr(md, 4, 5), fr(7, 2), fr(md, 6)}},
		{"only market data", many, outs(1, md, 2, md), []gotFrame{fr(md, 1, 2)}},
		{"a payload too large for any frame is dropped", two,
			[]relOut{{1, 7, size}, {2, 7, 1 << 10}, {3, md, 1 << 10}, {4, 7, size}, {5, md, size}},
			// The frame of 7 leaves when 2 does not fit; 2 is dropped.
			[]gotFrame{fr(7, 1), fr(7, 4), fr(md, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewReleaseFramer(tc.dlen)
			if got := release(t, f, testOrigin, tc.dlen, tc.outs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("frames %v, want %v", got, tc.want)
			}
			// The framer is reused: the same release again gives the
			// same frames, whatever the last one left.
			if got := release(t, f, testOrigin, tc.dlen, tc.outs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("reused: frames %v, want %v", got, tc.want)
			}
		})
	}
}

// Outputs queued before the epoch began never share a frame with the
// epoch's own: a promotion whose node applied up to 2 as a standby (dedup
// answers gated there, a new term's kept outputs) leads from 3. Each
// side's frames are labelled with a seq of its own epoch's history, so a
// label (epoch, seq) always names a record of that epoch.
func TestReleaseFramerSplitsAtTheEpochStart(t *testing.T) {
	const size = 16
	dlen := frameDatagram(100, size)
	f := NewReleaseFramer(dlen)
	f.SetEpochStart(3)
	var outs []relOut
	for _, p := range [][2]uint64{{1, 7}, {2, 5}, {2, md}, {3, 7}, {4, 5}, {4, md}, {5, 7}} {
		outs = append(outs, relOut{p[0], p[1], size})
	}
	got := release(t, f, testOrigin, dlen, outs)
	want := []gotFrame{{7, []uint64{1}}, {5, []uint64{2}}, {md, []uint64{2}}, {7, []uint64{3, 5}}, {5, []uint64{4}}, {md, []uint64{4}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
}

// A release begun over one that was never flushed starts afresh: nothing
// of the old one leaks into its frames.
func TestReleaseFramerBeginDropsUnflushed(t *testing.T) {
	dlen := frameDatagram(100, 16)
	f := NewReleaseFramer(dlen)
	f.Begin(testOrigin)
	f.Output(1, 7, make([]byte, 16), new(Frame))
	f.MarketData(2, make([]byte, 16), new(Frame))
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 4}
	got := release(t, f, o, dlen, []relOut{{3, 7, 16}, {4, md, 16}})
	if want := []gotFrame{{7, []uint64{3}}, {md, []uint64{4}}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
}

// The framer against a simple model, over random releases: every output
// appears exactly once, each destination's outputs in seq order, and no
// frame is over the datagram size (decodeFrame).
func TestReleaseFramerModel(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		maxSize := 8 + rng.IntN(120)
		dlen := wire.HeaderLen + wire.MessageOverhead + maxSize + rng.IntN(1400)
		f := NewReleaseFramer(dlen)
		clients := 1 + rng.IntN(2*FramesOpen)
		var seq uint64
		epochFrom := uint64(rng.IntN(600))
		f.SetEpochStart(epochFrom)
		for rel := 0; rel < 5; rel++ {
			o := wire.Origin{Stream: 9, Node: 1, Epoch: uint64(rel + 1)}
			outs := make([]relOut, rng.IntN(300))
			want := map[uint64][]uint64{}
			for i := range outs {
				seq++
				to := uint64(1 + rng.IntN(clients))
				if rng.IntN(4) == 0 {
					to = md
				}
				outs[i] = relOut{seq, to, 8 + rng.IntN(maxSize-7)}
				want[to] = append(want[to], seq)
			}
			frames := release(t, f, o, dlen, outs)
			got := map[uint64][]uint64{}
			for _, g := range frames {
				got[g.to] = append(got[g.to], g.seqs...)
				if first, last := g.seqs[0], g.seqs[len(g.seqs)-1]; first < epochFrom && last >= epochFrom {
					t.Fatalf("seed %d release %d: frame %v crosses the epoch's start %d", seed, rel, g.seqs, epochFrom)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d release %d: per destination %v, want %v", seed, rel, got, want)
			}
		}
	}
}

// A release allocates nothing: interleaved clients, more of them than
// open frames, frames filling up, market data between.
func TestReleaseFramerDoesNotAllocate(t *testing.T) {
	dlen := frameDatagram(4, 32)
	f := NewReleaseFramer(dlen)
	payload := make([]byte, 32)
	var sink int
	allocs := testing.AllocsPerRun(200, func() {
		f.Begin(testOrigin)
		for seq := uint64(1); seq <= 200; seq++ {
			var fr Frame
			var ok bool
			if seq%5 == 0 {
				ok = f.MarketData(seq, payload, &fr)
			} else {
				ok = f.Output(seq, seq%(FramesOpen+3), payload, &fr)
			}
			if ok {
				sink += len(fr.Bytes)
			}
		}
		for _, fr := range f.Flush() {
			sink += len(fr.Bytes)
		}
	})
	if allocs != 0 {
		t.Fatalf("a release allocates %.1f times", allocs)
	}
	if sink == 0 {
		t.Fatal("no frame was handed out")
	}
}
