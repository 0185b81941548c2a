package replica

import "github.com/seqbus/seqbus/wire"

// FramesOpen bounds how many clients' OUTPUT frames one release keeps
// open at once. A release that interleaves more clients than this
// finishes the frame opened first to make room: that client's later
// outputs of the release go into a new frame, after it, so its order
// still holds; only the datagram count grows (one more per client pushed
// out). Eight covers the usual pass (a few busy clients) with a linear
// scan of one cache line of keys; 10 batches of one datagram each (8
// open, market data, one spare) are ~15 KiB per node.
const FramesOpen = 8

// ReleaseFramer packs the outputs one release hands out into OUTPUT
// frames: one open frame per client (issue 18, item 7), so outputs for
// clients A, B, A, B, … go into one frame for A and one for B, not one
// frame per run of a client; and market data in frames of its own, so a
// client's outputs interleaved with market data still travel many to a
// datagram. It only frames: the runtime looks up the session's address,
// seals and sends each Frame it is handed, in the order it is handed.
//
// The usage contract, for one release:
//
//  1. Begin(origin) with the origin of this release's frames.
//  2. For each output the publisher releases, in seq order: Output(seq,
//     session, payload) for a client's, MarketData(seq, payload) for the
//     market data's. Each may finish one frame; when it says so, send it
//     before the next call.
//  3. Flush(): send the frames it returns, in order (every client's frame
//     still open, in the order the clients' first frames of the release
//     were opened, then the market data's).
//
// Labels: a frame carries the epoch of its origin and the seq of its
// first output, and what a frame holds is of seqs from there on, of that
// epoch's history. Outputs queued under a seq before the epoch began (a
// dedup answer gated at the seq applied at promotion, the outputs a new
// term keeps) are of an earlier epoch's records, so they never share a
// frame with outputs of this epoch's own seqs (SetEpochStart): a client
// or a verifier reading the label finds this epoch's outputs at this
// epoch's seqs.
//
// Ordering rules:
//   - A client's outputs go into its one open frame in seq order and its
//     frames are finished in the order they were filled: each client sees
//     its outputs in seq order.
//   - Between different clients (different addresses) the frames leave in
//     the order they were opened (a full frame's successor keeps its
//     place; a frame pushed out reopens last), not in seq order. Nothing orders
//     datagrams to different addresses on the network anyway.
//   - Market data frames are finished in seq order.
//
// A Frame's bytes are valid until the next call on the framer. The
// batches are made once (NewReleaseFramer) and reused: a release
// allocates nothing.
type ReleaseFramer struct {
	origin wire.Origin
	// epochFrom is the epoch's first seq (SetEpochStart): a frame
	// opened below it is finished before an output at or above it.
	epochFrom uint64
	mdFirst   uint64 // the seq the open market data frame is labelled with
	open      [FramesOpen]openFrame
	n         int // open[:n] hold a frame being filled, opened first at 0
	md        *wire.Batch
	mdOpen    bool        // md holds the market data frame being filled
	spare     *wire.Batch // the batch of the frame handed out last (or none)
	done      [FramesOpen + 1]Frame
}

// Frame is one finished OUTPUT frame and where it goes.
type Frame struct {
	// MarketData: to the market-data group; otherwise to the client of
	// Session.
	MarketData bool
	Session    uint64
	// Bytes is the whole frame (unsealed), at most the datagram size.
	Bytes []byte
}

// openFrame is one client's frame being filled.
type openFrame struct {
	to    uint64 // the client's session
	first uint64 // the seq the frame is labelled with
	b     *wire.Batch
}

// NewReleaseFramer returns a framer whose frames are at most datagramLen
// bytes (wire.NewBatch's rules).
func NewReleaseFramer(datagramLen int) *ReleaseFramer {
	f := &ReleaseFramer{md: wire.NewBatch(datagramLen), spare: wire.NewBatch(datagramLen)}
	for i := range f.open {
		f.open[i].b = wire.NewBatch(datagramLen)
	}
	return f
}

// SetEpochStart says that this epoch's own seqs begin at first: no frame
// holds outputs from both sides of it. Zero (the default) splits nothing.
func (f *ReleaseFramer) SetEpochStart(first uint64) { f.epochFrom = first }

// crosses reports whether an output at seq may not join a frame labelled
// first: the frame began before the epoch and seq is of the epoch.
func (f *ReleaseFramer) crosses(first, seq uint64) bool {
	return first < f.epochFrom && seq >= f.epochFrom
}

// Begin starts a release whose frames carry origin o. What a previous
// release left open (a release that was not flushed) is dropped.
func (f *ReleaseFramer) Begin(o wire.Origin) {
	f.origin = o
	f.n = 0
	f.mdOpen = false
}

// Output puts the output payload of the command at seq, for session to,
// into that client's open frame, opening one (and finishing the frame
// opened first when all are taken) or finishing a full one first. It
// fills *fr with the finished frame, if any, and reports whether it did
// (in place, not returned: a Frame returned by value per output was a
// stack copy the primary paid on every output). A payload that does not
// fit even an empty frame is dropped (the engine's outputs are far
// smaller).
func (f *ReleaseFramer) Output(seq, to uint64, payload []byte, fr *Frame) bool {
	for i := range f.open[:f.n] {
		o := &f.open[i]
		if o.to != to {
			continue
		}
		if o.b.Fits(len(payload)) && !f.crosses(o.first, seq) {
			o.b.Add(payload)
			return false
		}
		ok := f.finish(o.to, false, &o.b, fr)
		o.first = seq
		o.b.Reset(wire.TypeOutput, f.origin, seq)
		o.b.Add(payload)
		return ok
	}
	ok := false
	if f.n == len(f.open) {
		// More clients than open frames: the frame opened first is
		// finished now, and its slot moves last for the new client.
		oldest := f.open[0]
		ok = f.finish(oldest.to, false, &oldest.b, fr)
		copy(f.open[:], f.open[1:])
		f.open[f.n-1] = oldest
		f.n--
	}
	o := &f.open[f.n]
	f.n++
	o.to, o.first = to, seq
	o.b.Reset(wire.TypeOutput, f.origin, seq)
	o.b.Add(payload)
	return ok
}

// MarketData puts the market data output payload of the command at seq
// into the market data frame, finishing it first when it is full. It
// fills *fr with the finished frame, if any, and reports whether it did.
func (f *ReleaseFramer) MarketData(seq uint64, payload []byte, fr *Frame) bool {
	if f.mdOpen && f.md.Count() > 0 && f.md.Fits(len(payload)) && !f.crosses(f.mdFirst, seq) {
		f.md.Add(payload)
		return false
	}
	ok := false
	if f.mdOpen {
		ok = f.finish(0, true, &f.md, fr)
	}
	f.mdOpen, f.mdFirst = true, seq
	f.md.Reset(wire.TypeOutput, f.origin, seq)
	f.md.Add(payload)
	return ok
}

// Flush finishes every open frame: the clients' in the order they were
// opened, then the market data's. The slice is the framer's, valid until
// the next call.
func (f *ReleaseFramer) Flush() []Frame {
	out := f.done[:0]
	for i := range f.open[:f.n] {
		if o := &f.open[i]; o.b.Count() > 0 {
			out = append(out, Frame{Session: o.to, Bytes: o.b.Bytes()})
		}
	}
	if f.mdOpen && f.md.Count() > 0 {
		out = append(out, Frame{MarketData: true, Bytes: f.md.Bytes()})
	}
	f.n, f.mdOpen = 0, false
	return out
}

// finish hands out the frame in *b (when it holds a message) and puts
// the spare batch in its place, so the handed-out bytes stay untouched
// until the next call.
func (f *ReleaseFramer) finish(to uint64, md bool, b **wire.Batch, fr *Frame) bool {
	if (*b).Count() == 0 {
		return false
	}
	fr.MarketData, fr.Session, fr.Bytes = md, to, (*b).Bytes()
	*b, f.spare = f.spare, *b
	return true
}
