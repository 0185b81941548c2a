package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/bus"
)

// Per-pass send batching (issue 18, item 7). Inside a pass (the agent's
// doWork, or Deliver/Tick/SyncStep), the frames the node sends are copied
// into a queue: the unicast ones (outputs to clients, acks, NAKs,
// retransmits, lease requests) leave when the pass ends, so a pass that
// released the outputs of many commands sends them with one sendmmsg
// (SendEach, each datagram to its own address), not one sendto each; the
// multicast ones (DATA, HEARTBEAT, HASH) leave when the primary has
// sequenced what the pass received (flushData), ahead of the pass's
// journal write and releases, which the standby's ack (and so every
// release) waits for: every DATA frame the pass filled goes out with one
// sendmmsg. Nothing waits for more work than the pass holds. The order of
// every datagram is kept exactly: a frame for another socket flushes the
// queue first, so what leaves the node, and in which order, is what it
// was without the queue (the simulator sees the same sequence); only the
// syscalls are fewer.

// dataFramesPerSend bounds how many multicast frames wait in the queue: a
// pass that fills more (hundreds of commands) sends them in calls of this
// many as they fill, so the first frame's wait for the rest of the pass
// stays short (~8 frames of commands sequenced) while the syscalls stay
// one per 8 frames.
const dataFramesPerSend = 8

// Bounds of one queue: a full queue is flushed and refilled.
const (
	txFramesMax  = bus.BatchSizeMax
	txArenaBytes = 64 << 10
)

type txQueue struct {
	on    bool
	ep    Endpoint // the socket the queued frames leave by
	n     int
	arena []byte // the frames' bytes, copied: callers reuse their buffers
	bufs  [txFramesMax][]byte
	to    [txFramesMax]netip.AddrPort
}

// beginPass starts queueing sends (n.mu held).
func (n *Node) beginPass() {
	if n.txq.arena == nil {
		n.txq.arena = make([]byte, 0, txArenaBytes)
	}
	n.txq.on = true
}

// endPass sends what the pass queued and stops queueing (n.mu held).
func (n *Node) endPass() {
	n.flushTx()
	n.txq.on = false
}

// sendFrame sends one sealed frame from ep to addr, or queues it during a
// pass. It reports whether it queued (false: the caller sends it now).
func (n *Node) queueFrame(ep Endpoint, frame []byte, to netip.AddrPort) bool {
	q := &n.txq
	if !q.on {
		return false
	}
	if q.n > 0 && (q.ep != ep || q.n == txFramesMax || len(q.arena)+len(frame) > cap(q.arena)) {
		n.flushTx()
	}
	if len(frame) > cap(q.arena) {
		return false // larger than the whole arena: sent on its own, in order (the queue is empty)
	}
	start := len(q.arena)
	q.arena = append(q.arena, frame...)
	q.bufs[q.n] = q.arena[start:len(q.arena):len(q.arena)]
	q.to[q.n] = to
	q.ep = ep
	q.n++
	return true
}

// flushTx sends the queued frames: one Send when they share an address
// (DATA to the group, a client's outputs), one SendEach when the socket
// can (bus.UDP), else one Send per run of the same address. A failed call
// counts one SendErrors.
func (n *Node) flushTx() {
	q := &n.txq
	if q.n == 0 {
		return
	}
	bufs, to := q.bufs[:q.n], q.to[:q.n]
	same := true
	for i := 1; i < len(to); i++ {
		if to[i] != to[0] {
			same = false
			break
		}
	}
	ms, multi := q.ep.(bus.MultiSender)
	switch {
	case same:
		if err := q.ep.Send(bufs, to[0]); err != nil {
			n.stats.SendErrors++
		}
	case multi:
		if err := ms.SendEach(bufs, to); err != nil {
			n.stats.SendErrors++
		}
	default:
		for start := 0; start < len(bufs); {
			end := start + 1
			for end < len(bufs) && to[end] == to[start] {
				end++
			}
			if err := q.ep.Send(bufs[start:end], to[start]); err != nil {
				n.stats.SendErrors++
			}
			start = end
		}
	}
	clear(q.bufs[:q.n])
	q.n, q.ep, q.arena = 0, nil, q.arena[:0]
}
