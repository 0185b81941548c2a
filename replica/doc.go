// Package replica holds seqbus's failover rules as a pure core, in
// etcd/raft's shape: it only decides; the sockets, the journal, the clock
// and the goroutines are the runtime's (package node). It has no clock,
// socket, file, lock or goroutine: time arrives as an int64 nowNs
// argument, inputs are method calls, and what to do comes back as a
// returned value or a Ready, never as a callback into the runtime. It
// composes the other cores (gating.Gate, arbiter.Keeper through the
// read-only Lease view) rather than being called back by them.
//
// The types:
//
//   - Primary: a leading node's gate (what may be released), the in-sync
//     set's upkeep and the lease decisions of its term.
//   - Standby: a following node's fence, the primary it follows and when
//     it acknowledges.
//   - History: where the current epoch's history starts, which epoch this
//     process verified it against, the epochs of older records, and the
//     reconciliation after NEW_EPOCH.
//   - InSync: the in-sync set as the witness confirmed it and as this
//     primary proposes it; kept across roles.
//   - Follower: the whole standby side, composing the receive window
//     (standby.Window in pull mode), the NAK scheduler, the snapshot
//     fetch, the hash check and Standby. Data(frame) then Next() hands
//     out the entries in seq order (journal and apply each before the
//     next; a payload is valid until the following Next); the other
//     inputs (Heartbeat, NeedSnapshot, Chunk, PrimaryChanged, Durable,
//     EndBatch, Tick) fill a FollowerReady: events to count and log, a
//     snapshot to install (then Install, Next, Installed), the NAK, the
//     snapshot request and the ACK (never above Durable), carried out in
//     that order, then Advance. Scenarios: testdata/follower/*.txt.
//   - Leader: the leading side's command path, composing the term's
//     sequencer, Primary, the gate's publisher and the state machine (its
//     Emitter is the Leader's own), holding the bounded session table
//     (Sessions, kept across terms by the runtime). Commands(frame, from)
//     then Next() admits the commands (bad header, lease, sessions,
//     back-pressure, the dedup table's answers gated at the applied seq)
//     and hands out one sequenced Entry at a time; the runtime sends the
//     LeaderReady's frames, appends the entry, then calls Apply (a failed
//     append: JournalFailed, and stop before the apply). LeaderReady:
//     the sequencer's frames, the counts, a lost output, the first
//     release after a promotion (once per term begun with Promoted), a
//     snapshot due, in that order, then Advance. The release step:
//     Release(nowNs, ReleaseInput) takes the Primary's Ready (and
//     advances it) and returns a ReleaseReady, carried out in field
//     order: the in-sync news (log RunningAlone and InSyncError, hand
//     Propose to the arbiter, then Proposed), then, when Released is
//     not 0 (never after the journal failed), the observer's Event
//     (only when the watermark rose) before any frame, then NextFrame
//     until it says no more, then the LeaderReady. A ReleaseTrack,
//     kept by the runtime across terms, holds the assign -> release
//     latency ring (stamped at Apply, recorded at the release into a
//     LatencyRecorder) and the watermark last reported. Scenarios:
//     testdata/leader/*.txt.
//   - Roles: the term: the role (primary or standby), the epoch led or
//     followed, the fence and the History, and the role changes as data.
//     Lease(decision) (promotion, new term, step-down, a lapse) and
//     NewEpoch(ne, from, known, applied, log) (stale, repeated, unknown,
//     UNSAFE ignored, or step down, reconcile and follow) return a
//     RolesReady carried out in the order of its fields; the outcome of
//     the runtime's I/O comes back as an input: Drained or DrainFailed
//     (the journal's flush and sync before leading), then Led or
//     LeadFailed (the leader built), Reconciled or ResetFailed (the
//     journal cut). Scenarios: testdata/term/*.txt.
//   - ReleaseFramer: the primary's release framing: the publisher's
//     released outputs in, finished OUTPUT frames (one per client per
//     release, market data apart) with their destination out, in the
//     order to send them (release.go).
//
// The usage contract, for a primary's gate and lease (Leader composes the
// Primary and takes the commands and acks; the standby's contract is
// Follower's, above):
//
//  1. Feed every input as it happens: Applied(seq) after a command is
//     journaled and applied, Ack(from, epoch, seq, nowNs) for each ACK,
//     Durable(seq) when the journal's durable watermark rises, Tick(nowNs)
//     on the ticker, ConfirmInSync(reply, nowNs) for each lease reply.
//  2. Between batches (never in the middle of one), call
//     LeaseChanged(nowNs) and carry out the Decision before anything else:
//     a StepDown or a LeaseLost drops what is queued; a NewTerm promotes
//     the same history again; a standby asks StandbyLease and promotes.
//  3. Before accepting a command ask MayRelease(nowNs): a query that
//     changes nothing.
//  4. Take Ready(nowNs) at the moment of release and carry it out in the
//     order of its fields: log RunningAlone, hand Propose to the arbiter
//     (then Proposed), then release every queued output with seq <=
//     Release, and only those. (A Leader does this step itself:
//     Leader.Release hands the news on in a ReleaseReady.)
//  5. Call Advance(rd) once rd was carried out.
//
// A runtime's loop, in outline:
//
//	for batch := range batches {
//		for _, msg := range batch {
//			switch msg.Type {
//			case ack:
//				p.Ack(msg.From, msg.Epoch, msg.Seq, now)
//			case command:
//				if p.MayRelease(now) {
//					seq := sequence(msg); journal(seq); apply(seq)
//					p.Applied(seq)
//				}
//			}
//		}
//		switch d := p.LeaseChanged(now); d.Do {
//		case replica.StepDown:
//			dropQueued(); follow(d.Epoch)
//			continue
//		case replica.LeaseLost:
//			dropQueued()
//		}
//		p.Durable(journal.Durable())
//		rd := p.Ready(now)
//		propose(rd.Propose)
//		release(rd.Release)
//		p.Advance(rd)
//	}
//
// The scenarios in testdata/*.txt are the rules, one file per rule of
// the README's failover guarantees; go test ./replica -rewrite
// regenerates their expectations.
package replica
