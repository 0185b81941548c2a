// Package node is the runtime of one seqbus process: it owns the sockets,
// the journal files and the goroutines, and drives the pure cores
// (sequencer, standby window and repair timers, gate and publisher, lease
// keeper) with real frames and monotonic time.
//
// Concurrency model (agent.go). Every core lives behind one mutex, n.mu,
// and one thread takes it on the hot path: the node's agent, a locked OS
// thread running a duty cycle. Each pass polls every receiving socket
// without blocking, handles what arrived and then afterBatch once, runs the
// timers (heartbeats, NAK and snapshot timers, periodic acks, the lease)
// when their deadline has passed by the clock, raises the durable
// watermark the fsync thread published, and sends the pass's unicast
// frames in one sendmmsg; an idle agent spins, yields or parks in
// epoll_wait on its own fds, bounded by the next timer deadline. The
// thread, the receive buffers, the idle strategy and the park are
// bus.AgentRunner's; the node is its bus.Agent. Two other goroutines
// never take n.mu:
//
//   - the fsync thread (fsync group and always only) fsyncs whatever the
//     agent wrote (natural group commit, no timer) and wakes a parked
//     agent through an eventfd. Under fsync none there is none: a record
//     is durable as the pass's journal write returns, with no wake-up and
//     no syscall;
//   - the status writer (status.Publisher) marshals and writes the copy
//     of the status the agent publishes every status.IntervalNs.
//
// API calls (Status, Role, Released) take n.mu and wait at most one pass.
// The simulator runs no thread: Deliver, Tick and SyncStep run the pieces
// of the pass one at a time (drive.go).
//
// The role decides what a frame means: a primary sequences COMMAND frames
// and answers ACK, NAK and SNAPSHOT_REQUEST; a standby applies DATA and
// RETRANSMIT frames by seq, NAKs gaps, acknowledges the highest contiguous
// seq it has journaled, and installs snapshots. Ordering rules:
//
//  1. A command is journaled (written) before the frame carrying it is
//     multicast, and applied to the engine before its outputs are queued.
//  2. An output leaves only when its seq <= min(applied, required standby
//     ack, durable) and only while the lease is held. No core calls back:
//     the node pulls the released OUTPUT frames (replica.Leader.NextFrame)
//     and carries out the leader core's Ready (the sequencer's frames, in
//     order) after each input (leaderReady).
//  3. A standby acknowledges no further than its own journal is durable.
//  4. Frames from an epoch older than the highest accepted are dropped and
//     counted; nothing from them is applied, journaled or acknowledged.
//
// The failover decisions are package replica's (pure: no clock, socket,
// file or lock): the gate, the in-sync set and the lease decisions of a
// primary (replica.Primary: rule 2 is its Ready's Release), a standby's
// fence and acks (replica.Standby, replica.Ack: rules 3 and 4), the
// history epochs and the reconciliation after NEW_EPOCH
// (replica.History), and the two sides as whole cores: the command path
// (replica.Leader: admission, sequencing, the engine's emitter; node
// appends each entry it hands out before applying it) and the standby
// side (replica.Follower). One replica.Replica owns them all across roles
// (n.rep), with the rules that span them: what a standby takes of the
// replication stream before its payload (Admit), a primary's ACK step,
// an arbiter's reply, whether to ask for the lease or decline a grant,
// and the term's hand-overs. The node feeds them and carries out what they
// return; a promotion, a step-down or a lapse of the lease is carried
// out between batches (afterBatch), never in the middle of one.
package node
