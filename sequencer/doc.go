// Package sequencer is the primary's replication core: it assigns sequence
// numbers under the primary's epoch, packs commands into DATA frames up to
// the datagram size, keeps a bounded ring of recent frames to answer NAKs,
// falls back to the journal (through the History interface) for older
// ranges, answers NEED_SNAPSHOT when a range is gone, bounds the bandwidth
// retransmits may use, and heartbeats when idle so standbys see tail gaps.
//
// The core does no I/O of its own: it never reads a clock (time arrives as
// nowNs), never opens a socket and starts no goroutine. What it decides to
// send it hands to an Output during the call; the runtime (node/) owns the
// sockets.
//
// Usage contract, per command burst (the runtime's loop):
//
//  1. For each client command: seq, err := s.Submit(cmd, nowNs). Journal the
//     command as (s.Epoch(), seq) and apply it to the engine. Submit may call
//     Output.Multicast with a full batch of earlier commands; those were
//     journaled already, because the runtime journals each command right
//     after its Submit returns and a batch only fills with earlier commands.
//  2. When the burst is drained (no more input ready): s.Flush(nowNs), which
//     multicasts the open batch. Batching is thus "as many as arrived while
//     the last frame was being sent", never a timer that adds latency.
//  3. On every NAK from a standby: s.OnNak(&nak, nowNs).
//  4. Regularly (every idle loop): s.Tick(nowNs), which heartbeats after
//     HeartbeatIntervalNs without a send.
//
// Outputs are released to clients only by the gating package; the
// sequencer's frames carry commands, never anything a client can see.
package sequencer
