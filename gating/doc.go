// Package gating holds every output of the primary until the command that
// caused it is safe: applied here, acknowledged by the required standbys,
// durable in the journal, and released only while this node holds the
// leadership lease.
//
// The package has two pure cores and no I/O:
//
//   - Gate tracks the applied and durable watermarks, whether the lease is
//     held, the in-sync set of standbys and the acknowledgement of each
//     standby, and computes
//
//     released = min(applied, required standby ack, durable)
//
//     The required ack is the ack of every in-sync standby (the default) or
//     the k-th highest ack (k of n), computed on a fixed-size stack array the
//     way etcd raft's quorum.MajorityConfig.CommittedIndex does, so it never
//     allocates. The released watermark only moves forward, and it does not
//     move at all while the lease is not held.
//
//   - Publisher[T] is a bounded FIFO of outputs, each tagged with the seq that
//     caused it, that hands outputs out strictly in seq order, exactly once,
//     once their seq is at or below a released watermark. It calls nothing
//     back: the runtime pulls each released output with Next, after the
//     call, as etcd/raft's user pulls a Ready.
//
// Why a watermark that never goes backwards: once every required standby had
// seq s (and the disk had it), that stays true even when the in-sync set later
// changes, so an output released at s stays releasable. Kafka's high
// watermark behaves the same way.
//
// # Usage contract
//
//  1. Build one Gate (NewGate) and one Publisher (NewPublisher) per
//     leadership term. Both start with nothing released; the Gate starts
//     without the lease.
//  2. Call Gate.SetInSync with a strictly increasing version whenever the
//     in-sync set changes, passing the monotonic time so that a standby that
//     never acknowledges is reported by Lagging one timeout after it joined.
//  3. When a command with seq s has been applied, first Enqueue every output
//     it produced with seq s, then call Gate.SetApplied(s). An output
//     enqueued with a seq already at or below Released is handed out at the
//     next release (Next): safe, since that seq was once covered by every input,
//     but no longer bounded by the current required ack if the in-sync set
//     changed since.
//  4. Feed Gate.SetDurable from the journal, Gate.OnAck from standby ACK
//     frames (with the monotonic time of arrival) and Gate.SetLease from the
//     lease keeper's may_lead.
//  5. After any of those calls, loop on publisher.Next(Publishable(gate))
//     until it reports none, sending each output it hands out: every output
//     whose seq is released, in order. Publishable is 0 while the lease is
//     not held, so nothing is handed out then.
//  6. When the lease is lost, call Publisher.DropAll: a node that is not sure
//     it leads keeps nothing to replay, and clients resend to the next
//     primary.
//  7. Periodically call Gate.Lagging and remove the laggards from the in-sync
//     set (a new SetInSync), so one dead standby, or one alive but cut off
//     from the primary and acking an old seq, does not stop releasing.
//
// Example loop (one goroutine owns both cores):
//
//	gate, _ := gating.NewGate(gating.Config{MinInSync: 1})
//	pub, _ := gating.NewPublisher[Output](4096)
//	_ = gate.SetInSync(1, []uint32{2}, nowNs)
//	for ev := range events {
//		switch ev.kind {
//		case applied:
//			for _, out := range ev.outputs {
//				if err := pub.Enqueue(ev.seq, out); err != nil {
//					// ErrFull: stop taking commands until outputs drain.
//				}
//			}
//			gate.SetApplied(ev.seq)
//		case durable:
//			gate.SetDurable(ev.seq)
//		case ack:
//			gate.OnAck(ev.standby, ev.seq, ev.nowNs)
//		case lease:
//			gate.SetLease(ev.held)
//			if !ev.held {
//				pub.DropAll()
//			}
//		}
//		for bound := gating.Publishable(gate); ; {
//			seq, out, ok := pub.Next(bound)
//			if !ok {
//				break
//			}
//			send(seq, out)
//		}
//	}
package gating
