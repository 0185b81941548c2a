// Package node is the runtime of one seqbus process: it owns the sockets,
// the journal files and the goroutines, and drives the pure cores
// (sequencer, standby window and repair timers, gate and publisher, lease
// keeper) with real frames and monotonic time.
//
// Concurrency model. Every core lives behind one mutex, n.mu. Three kinds
// of goroutine take it, each for a short, bounded piece of work and never
// across a blocking call other than a non-blocking socket send:
//
//   - one receive loop per socket (bus.Loop: spin, yield, then park), which
//     handles a whole batch of datagrams under one lock acquisition;
//   - the ticker (every TickIntervalNs): heartbeats, NAK and snapshot timers,
//     periodic acks, status;
//   - the syncer (fsync group and always only), which fsyncs the journal
//     outside the lock (group commit) and then, under the lock, raises the
//     durable watermark and releases outputs that were waiting for it.
//     Under fsync none there is no syncer: a record is durable as the
//     batch's journal write returns, with no wake-up and no syscall.
//
// The role decides what a frame means: a primary sequences COMMAND frames
// and answers ACK, NAK and SNAPSHOT_REQUEST; a standby applies DATA and
// RETRANSMIT frames by seq, NAKs gaps, acknowledges the highest contiguous
// seq it has journaled, and installs snapshots. Ordering rules:
//
//  1. A command is journaled (written) before the frame carrying it is
//     multicast, and applied to the engine before its outputs are queued.
//  2. An output leaves only when its seq <= min(applied, required standby
//     ack, durable) and only while the lease is held (gating.Publish).
//  3. A standby acknowledges no further than its own journal is durable.
//  4. Frames from an epoch older than the highest accepted are dropped and
//     counted; nothing from them is applied, journaled or acknowledged.
//
// The failover decisions are package replica's (pure: no clock, socket,
// file or lock): the gate, the in-sync set and the lease decisions of a
// primary (replica.Primary: rule 2 is its Ready's Release), a standby's
// fence and acks (replica.Standby, replica.Ack: rules 3 and 4), the
// history epochs and the reconciliation after NEW_EPOCH
// (replica.History). The node feeds them and carries out what they
// return; a promotion, a step-down or a lapse of the lease is carried
// out between batches (afterBatch), never in the middle of one.
package node
