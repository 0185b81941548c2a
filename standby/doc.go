// Package standby holds the hot standby's receive window: the pure core
// that turns a lossy, reordering, duplicating stream of sequenced messages
// into exactly-once, in-order calls to the state machine, and says what to
// NAK, what to ACK and when only a snapshot can help.
//
// A Window applies by sequence number, never by arrival:
//
//   - seq <= Applied is a duplicate and is ignored;
//   - seq == Applied+1 is applied, then everything buffered that has become
//     contiguous is applied in order;
//   - seq in Applied+2 .. Applied+1+MaxPending is copied into a
//     preallocated slot (a second copy of a buffered seq is ignored);
//   - anything further ahead returns ErrNeedSnapshot and changes nothing.
//
// Sequence numbers start at 1; 0 means nothing applied. All arithmetic is
// by differences from Applied, so nothing overflows near the uint64 maximum.
//
// The Window does no I/O, reads no clock and starts no goroutine. Timing
// (when to NAK, how often to repeat a NAK, when to give up and ask for a
// snapshot) belongs to the runtime that drives it, which passes its
// monotonic time to whatever core owns those decisions.
//
// Usage contract:
//
//  1. Create one Window per replicated stream with New, giving the ApplyFunc
//     that feeds the state machine and Config.Start = the seq recovered from
//     the journal. New preallocates every buffer; nothing on the message
//     path allocates afterwards.
//  2. Check the frame's epoch before calling the Window: the Window knows
//     sequence numbers, not leadership, and trusts that every message it is
//     given belongs to the accepted history.
//  3. For every message of every accepted DATA or RETRANSMIT frame, call
//     OnMessage(seq, payload). The payload may be the receive buffer: the
//     Window copies what it keeps, and ApplyFunc must not keep it either.
//  4. On ErrNeedSnapshot, count it (Rejects), request a snapshot and keep
//     feeding messages (the ones that fit are still buffered). After the
//     snapshot covering 1..S is installed in the state machine, call
//     ResetTo(S). ErrMessageTooLarge means the primary's limits differ from
//     ours: count it and treat the stream as needing operator attention.
//  5. For every HEARTBEAT call ObserveHighest(lastSeq) so that a tail gap
//     (messages lost after the last one received) becomes visible.
//  6. When the NAK timer fires, send Gaps(nakRanges[:0]) (a fixed-capacity
//     array, e.g. 16 ranges per NAK frame); an empty result means nothing
//     is missing. The hasGap result of OnMessage can trigger an early NAK
//     for the first gap.
//  7. Acknowledge Ack() to the primary (if this standby journals, no
//     further than its journal is durable): Ack is the highest contiguous
//     applied seq, never the highest received.
//  8. Do not call the Window from inside ApplyFunc (it panics) or from two
//     goroutines at once (it has no locks).
//
// A runtime loop, in outline:
//
//	w, err := standby.New(standby.Config{Start: journal.LastSeq()}, engine.Apply)
//	var rejects standby.Rejects
//	var naks [16]standby.Range
//	for each received frame f (epoch already checked):
//		switch f.Type {
//		case DATA, RETRANSMIT:
//			for i, msg := range f.Messages() {
//				_, _, err := w.OnMessage(f.Seq+uint64(i), msg)
//				rejects.Count(err)
//				if err == standby.ErrNeedSnapshot { requestSnapshot() }
//			}
//		case HEARTBEAT:
//			w.ObserveHighest(f.Seq)
//		case SNAPSHOT_DONE:
//			w.ResetTo(f.Seq)
//		}
//		on NAK timer: if g := w.Gaps(naks[:0]); len(g) > 0 { sendNak(g) }
//		on ACK timer or progress: sendAck(w.Ack())
package standby
