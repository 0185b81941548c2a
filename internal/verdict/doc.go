// Package verdict is the one verifier of seqbus: Verify checks what
// clients recorded (client.Recorder files) against the nodes' journals and
// snapshots, read-only, and counts what breaks the promise: outputs lost
// (received but not in the final primary's history at their epoch and
// seq), duplicates (an order applied at two seqs), conflicts (two
// histories or a history and a client disagreeing at one epoch and seq),
// state hash mismatches between replicas (by replay through the engine),
// and stale outputs (an older epoch's received after a newer one's).
// seqbus verify, the demo and the drills all print its Result.
//
// An acked order older than a node's journal (compacted behind its
// snapshot) is looked up in the snapshot's dedup table, whose state hash
// is verified on restore; an order older than the table's window is
// covered only by the session's high-water mark (the engine applies a
// session's ids in increasing order, so the mark proves the session got
// past it, not that this very id was applied).
package verdict
