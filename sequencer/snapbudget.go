package sequencer

// DefaultSnapshotTransfersPerStandby bounds how many times a primary sends
// one snapshot's worth of chunks to one standby per
// DefaultSnapshotBudgetWindowNs: a transfer, plus re-asks after losses and
// a restart or two, fit in 4; a standby looping on fetches (issue 15:
// 1.47M chunks, ~2 GB, in 17 s) gets 4 copies a second instead of as many
// as it asks for.
const DefaultSnapshotTransfersPerStandby = 4

// DefaultSnapshotBudgetWindowNs is the period after which a standby's
// budget for the same snapshot is renewed, so a standby on a very lossy
// link is slowed down, never locked out until the next snapshot.
const DefaultSnapshotBudgetWindowNs = 1_000_000_000

// maxSnapshotBudgetPeers bounds the table (the runtime only asks for
// configured peers; this is a guard against a caller that does not).
const maxSnapshotBudgetPeers = 256

// SnapshotBudget bounds the snapshot chunks served to each standby: per
// standby and per snapshot, at most transfers × the snapshot's chunk
// count in each window. A new snapshot starts a standby's count again. Pure: the runtime
// asks before sending each chunk and counts and logs what is refused.
// The zero value is not ready; use NewSnapshotBudget.
type SnapshotBudget struct {
	transfers uint64
	windowNs  int64
	peers     map[uint32]*snapshotPeer
	refused   uint64
}

type snapshotPeer struct {
	snapshotSeq uint64
	served      uint64
	sinceNs     int64 // start of the current window
	refused     bool  // this snapshot was refused to this peer (report once)
}

// NewSnapshotBudget returns a budget of transfers copies per standby and
// snapshot every windowNs (the defaults above when <= 0).
func NewSnapshotBudget(transfers int, windowNs int64) *SnapshotBudget {
	if transfers <= 0 {
		transfers = DefaultSnapshotTransfersPerStandby
	}
	if windowNs <= 0 {
		windowNs = DefaultSnapshotBudgetWindowNs
	}
	return &SnapshotBudget{transfers: uint64(transfers), windowNs: windowNs, peers: map[uint32]*snapshotPeer{}}
}

// Allow reports whether one more chunk of the snapshot at snapshotSeq
// (chunks long) may be sent to node, and counts it when it may. first is
// true on the first refusal for this node and snapshot, for a log line.
func (b *SnapshotBudget) Allow(node uint32, snapshotSeq, chunks uint64, nowNs int64) (ok, first bool) {
	p := b.peers[node]
	if p == nil {
		if len(b.peers) >= maxSnapshotBudgetPeers {
			b.refused++
			return false, false
		}
		p = &snapshotPeer{snapshotSeq: snapshotSeq, sinceNs: nowNs}
		b.peers[node] = p
	}
	if p.snapshotSeq != snapshotSeq {
		*p = snapshotPeer{snapshotSeq: snapshotSeq, sinceNs: nowNs}
	}
	if nowNs-p.sinceNs >= b.windowNs {
		p.served, p.sinceNs = 0, nowNs // refused stays: logged once per snapshot
	}
	if p.served >= b.transfers*max(chunks, 1) {
		b.refused++
		first = !p.refused
		p.refused = true
		return false, first
	}
	p.served++
	return true, false
}

// Served is how many chunks of its current snapshot node was sent.
func (b *SnapshotBudget) Served(node uint32) uint64 {
	if p := b.peers[node]; p != nil {
		return p.served
	}
	return 0
}

// Refused counts chunks refused by the bound.
func (b *SnapshotBudget) Refused() uint64 { return b.refused }
