package node

import "github.com/seqbus/seqbus/wire"

// outFramesOpen bounds how many clients' OUTPUT frames one release keeps
// open at once. A release that interleaves more clients than this sends
// the frame opened first to make room: that client's later outputs of the
// release go into a new frame, after it, so its order still holds; only
// the datagram count grows (one more per client pushed out). Eight covers
// the usual pass (a few busy clients) with a linear scan of one cache line
// of keys; 8 batches of one datagram each are ~12 KiB per node.
const outFramesOpen = 8

// outFrames packs the client outputs one release hands out into OUTPUT
// frames per client (issue 18, item 7): outputs for clients A, B, A, B, …
// go into one frame for A and one for B, not one frame per run of a
// client, so a pass that releases the outputs of many interleaved
// commands sends about one datagram per client, not one per output.
//
// Ordering rules:
//   - A client's outputs are added to its one open frame in seq order and
//     its frames leave in the order they were filled: each client sees its
//     outputs in seq order, as before.
//   - Between different clients (different addresses) the datagrams leave
//     in the order their frames were opened, not in seq order. Nothing
//     orders datagrams to different addresses on the network anyway.
//
// The batches are made once (newOutFrames) and reused: a release
// allocates nothing. Each frame is sealed (MAC) and queued on the pass's
// send queue like any other unicast frame (Node.send), so a pass's
// outputs still leave with one sendmmsg.
type outFrames struct {
	open [outFramesOpen]outFrame
	n    int // open[:n] hold a frame being filled, opened first at 0
}

// outFrame is one client's frame being filled.
type outFrame struct {
	to uint64 // the client's session
	b  *wire.Batch
}

func newOutFrames(datagramLen int) outFrames {
	var f outFrames
	for i := range f.open {
		f.open[i].b = wire.NewBatch(datagramLen)
	}
	return f
}

// addOutput puts the output payload of the command at seq, for session
// to, into that client's open frame, opening one (and sending the frame
// opened first when all are taken) or sending a full one first.
func (n *Node) addOutput(seq, to uint64, payload []byte) {
	f := &n.out
	for i := range f.open[:f.n] {
		o := &f.open[i]
		if o.to != to {
			continue
		}
		if !o.b.Fits(len(payload)) {
			n.sendOutputFrame(o)
			o.b.Reset(wire.TypeOutput, n.origin(), seq)
		}
		o.b.Add(payload)
		return
	}
	if f.n == len(f.open) {
		// More clients than open frames: the frame opened first leaves
		// now, and its batch is reused for the new client, last in order.
		oldest := f.open[0]
		n.sendOutputFrame(&oldest)
		copy(f.open[:], f.open[1:])
		f.open[f.n-1] = oldest
		f.n--
	}
	o := &f.open[f.n]
	f.n++
	o.to = to
	o.b.Reset(wire.TypeOutput, n.origin(), seq)
	o.b.Add(payload)
}

// flushOutputFrames sends every open frame, in the order they were
// opened, and closes them.
func (n *Node) flushOutputFrames() {
	f := &n.out
	for i := range f.open[:f.n] {
		n.sendOutputFrame(&f.open[i])
	}
	f.n = 0
}

// sendOutputFrame sends one frame to its client's address (dropped when
// the session has none, as before) and empties it.
func (n *Node) sendOutputFrame(o *outFrame) {
	if o.b.Count() > 0 {
		if addr, ok := n.sessions[o.to]; ok {
			n.send(o.b.Bytes(), addr)
		}
	}
	o.b.Reset(wire.TypeOutput, n.origin(), 1)
}
