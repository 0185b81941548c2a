// Package sequencer is the primary's replication core: it assigns sequence
// numbers under the primary's epoch, packs commands into DATA frames up to
// the datagram size, keeps a bounded ring of recent frames to answer NAKs,
// falls back to the journal (through the History interface) for older
// ranges, answers NEED_SNAPSHOT when a range is gone, bounds the bandwidth
// retransmits may use, and heartbeats when idle so standbys see tail gaps.
//
// The core does no I/O of its own: it never reads a clock (time arrives as
// nowNs), never opens a socket and starts no goroutine, and it calls
// nothing back: what it decides to send it appends to its outbox, each
// frame with its destination (the group or one standby) in the order
// produced, and the runtime (node/), which owns the sockets, sends
// Outbox() after the call and then calls ClearOutbox, as etcd/raft's user
// carries out a Ready. The outbox's buffers are allocated once and reused.
//
// Usage contract, per command burst (the runtime's loop):
//
//  1. For each client command: seq, err := s.Submit(cmd, nowNs). Journal the
//     command as (s.Epoch(), seq) and apply it to the engine. Submit may
//     leave a full batch of earlier commands in the outbox; those were
//     journaled already, because the runtime journals each command right
//     after its Submit returns and a batch only fills with earlier commands.
//  2. When the burst is drained (no more input ready): s.Flush(nowNs), which
//     seals the open batch into the outbox. Batching is thus "as many as
//     arrived while the last frame was being sent", never a timer that adds
//     latency.
//  3. On every NAK from a standby: s.OnNak(&nak, nowNs).
//  4. Regularly (every idle loop): s.Tick(nowNs), which heartbeats after
//     HeartbeatIntervalNs without a send.
//  5. After each of these calls: send every s.Outbox() entry, in order (to
//     the group when Group is set, else to standby Node), then
//     s.ClearOutbox().
//
// The primary's side of a snapshot fetch is here too: SnapshotServer holds
// the latest snapshot in memory and answers each SNAPSHOT_REQUEST (serve,
// not behind, or cut a fresh one first), handing out a burst of chunks
// into the caller's buffer within a SnapshotBudget per standby.
//
// Outputs are released to clients only by the gating package; the
// sequencer's frames carry commands, never anything a client can see.
package sequencer
