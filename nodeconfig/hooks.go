package nodeconfig

// Clock is a node's monotonic clock in nanoseconds. It never goes
// backwards; a simulated clock may run fast or slow (drift) or jump
// (a pause).
type Clock interface {
	NowNs() int64
}

// Observer watches what a node applies and releases, for invariant
// checkers. Its methods are called under the node's lock, in order; they
// must not call back into the node. nil (the default) costs one branch.
type Observer interface {
	// Applied: the node applied the command journaled at (epoch, seq).
	Applied(node uint32, epoch, seq uint64, cmd []byte)
	// Rebuilt: the node's state machine was rebuilt from its snapshot and
	// journal (start-up, or after truncating a forked history); the
	// commands replayed follow as Applied. applied is the snapshot's seq
	// the rebuild started from (0 for none).
	Rebuilt(node uint32, fromSnapshot uint64)
	// Installed: a fetched snapshot replaced the state at seq.
	Installed(node uint32, seq uint64)
	// Released: a primary's released watermark advanced.
	Released(r ReleaseEvent)
}

// StageObserver is an optional extension of Observer for latency
// benchmarks (internal/nodetrace): when Config.Observer also implements
// it, the node reports each pass whose commands follow as Applied, and
// the primary each ack it receives and each rise of its durable
// watermark, with the node's clock.
type StageObserver interface {
	// Batch: the commands Applied reports next were sequenced (primary:
	// one COMMAND frame) or applied (a standby's run of entries, or the
	// start-up replay) in one pass.
	Batch(node uint32, primary bool)
	// Acked: an ack from a standby; requiredAck is what the in-sync set
	// as a whole has acknowledged since (the gate's required ack;
	// MaxUint64 when there is none to require).
	Acked(node, from uint32, ackSeq, requiredAck uint64, nowNs int64)
	Durable(node uint32, durable uint64, nowNs int64)
}

// ReleaseEvent is the gate's state when a primary released up to Released.
type ReleaseEvent struct {
	Node     uint32
	Epoch    uint64
	Released uint64
	Applied  uint64 // the state machine's applied seq
	Durable  uint64 // the journal's durable watermark
	// RequiredAck is the ack the in-sync set requires (MaxUint64 for an
	// empty set); RequiredOK is false when the set is below MinInSync.
	RequiredAck uint64
	RequiredOK  bool
	// LeaseHeld is the keeper's MayLead at the moment of release (true
	// for a static primary).
	LeaseHeld bool
}
