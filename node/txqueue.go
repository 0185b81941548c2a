package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/bus"
)

// Per-pass send batching (issue 18, item 7), carried out by bus.TxQueue.
// Inside a pass (the agent's doWork, or Deliver/Tick/SyncStep), the frames
// the node sends are queued: the unicast ones (outputs to clients, acks,
// NAKs, retransmits, lease requests) leave when the pass ends, so a pass
// that released the outputs of many commands sends them with one sendmmsg;
// the multicast ones (DATA, HEARTBEAT, HASH) leave when the primary has
// sequenced what the pass received (flushData), ahead of the pass's
// journal write and releases, which the standby's ack (and so every
// release) waits for, in calls of at most dataFramesPerSend. The order of
// every datagram is what it was without the queue (the simulator sees the
// same sequence); only the syscalls are fewer.

// dataFramesPerSend bounds how many multicast frames wait in the queue.
const dataFramesPerSend = bus.TxFramesPerSend

// beginPass starts queueing sends (n.mu held).
func (n *Node) beginPass() { n.txq.Begin() }

// endPass sends what the pass queued and stops queueing (n.mu held).
func (n *Node) endPass() { n.stats.SendErrors += uint64(n.txq.End()) }

// queueFrame queues one sealed frame from ep to addr during a pass. It
// reports whether it queued (false: the caller sends it now).
func (n *Node) queueFrame(ep Endpoint, frame []byte, to netip.AddrPort) bool {
	queued, failed := n.txq.Queue(ep, frame, to)
	n.stats.SendErrors += uint64(failed)
	return queued
}

// flushTx sends the queued frames now; a failed call counts one SendErrors.
func (n *Node) flushTx() { n.stats.SendErrors += uint64(n.txq.Flush()) }
