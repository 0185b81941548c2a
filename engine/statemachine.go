package engine

import "io"

// MarketData is the Emitter address of the public market-data stream.
// Session 0 is reserved for it: ParseCommand refuses commands from session 0.
const MarketData uint64 = 0

// Emitter receives the outputs of one Apply. to == MarketData (0) means the
// market-data stream; otherwise it is the client session the output is for.
// payload is only valid during the call (the emitter copies it): the engine
// encodes every output into one reused buffer so that Apply does not
// allocate.
type Emitter interface {
	Emit(to uint64, payload []byte)
}

// StateMachine is what the bus replicates. It is byte-oriented so that the
// bus never imports the engine's order types: commands are opaque bytes
// behind a CommandHeader, outputs are opaque payloads with an address.
type StateMachine interface {
	// Apply applies the command sequenced at seq and emits its outputs, in
	// order, to out (out may be nil to discard them, for example while a
	// standby catches up). It is deterministic and never fails: a bad
	// command produces a reject output, or no output at all when it has no
	// valid header to address a reject to. seq must be greater than
	// AppliedSeq (gaps are allowed); anything else is a bug in the caller
	// and panics, because applying a command twice would fork the replicas.
	Apply(seq uint64, command []byte, out Emitter)
	// Snapshot writes the whole replicated state, AppliedSeq and StateHash
	// included. Replicas in the same state write identical bytes.
	Snapshot(w io.Writer) error
	// Restore replaces the state with a snapshot. On error the state is
	// unchanged. After Restore, applying the commands that followed the
	// snapshot yields the same outputs and hash as never having snapshotted.
	Restore(r io.Reader) error
	// StateHash is a 64-bit hash of the whole replicated state, maintained
	// incrementally; equal on replicas that applied the same commands.
	StateHash() uint64
	// AppliedSeq is the seq of the last applied command (0 for none).
	// Added to the brief's interface because a standby that installs a
	// snapshot must learn where to resume from the snapshot itself, and a
	// HASH(seq, hash) check needs both values taken atomically.
	AppliedSeq() uint64
}

var _ StateMachine = (*Engine)(nil)

// Deduper is an optional ability of a StateMachine: answering a command
// from the dedup table without applying it. The bus type-asserts it; a
// state machine without it has every command sequenced and applied.
//
// A primary asks before it sequences a command: a replayed or resent
// command the table can answer costs no seq, no journal record and no
// replication. The answer is an output like any other: the bus releases it
// only once everything the primary has applied so far is released, since
// it reveals the original's result.
type Deduper interface {
	// Answer reports whether the state machine answers command without
	// applying it; if so it has emitted to out exactly the outputs Apply
	// would have, and applying it would change nothing but AppliedSeq.
	// Answer never changes the state.
	Answer(command []byte, out Emitter) bool
}

var _ Deduper = (*Engine)(nil)
