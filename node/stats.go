package node

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/wire"
)

// Stats are the node's own counters (the bus, sequencer, window and gate
// keep theirs; Status gathers them all).
type Stats struct {
	Commands, BadCommands, Backpressure, SessionsFull uint64
	OutputsReleased, OutputsLost                      uint64
	Released, Applied                                 uint64
	AcksReceived, AcksSent, NaksSent                  uint64
	RetransmitsReceived                               uint64
	Snapshots, SnapshotsInstalled, SnapshotFetches    uint64
	SnapshotChunksSent                                uint64
	HashMismatches                                    uint64
	JournalErrors, SyncErrors, SendErrors             uint64
	JournalsSetAside, TornTailBytes                   uint64

	Promotions, StepDowns, LeaseLost, NotLeading uint64
	// NewTerms counts newer epochs granted to this node while it led
	// (a seamless change of term, never a step-down).
	NewTerms                                     uint64
	WitnessSilent                                uint64
	OutputsDroppedAtGate                         uint64
	SuffixDiscarded, HistoryDiscarded            uint64
	InSyncMembers, InSyncProposals, RunningAlone uint64

	DropStaleEpoch, DropWrongStream, DropUnknownNode  uint64
	DropAwaitingNewEpoch                              uint64
	DropNotPrimary, DropUnexpected                    uint64
	DropShort, DropChecksum, DropMalformed            uint64
	DropNoMAC, DropBadMAC, DropUnknownKey, DropReplay uint64
}

func (s *Stats) countDrop(err error) {
	switch {
	case errors.Is(err, wire.ErrShort), errors.Is(err, wire.ErrLength):
		s.DropShort++
	case errors.Is(err, wire.ErrChecksum):
		s.DropChecksum++
	default:
		s.DropMalformed++
	}
}

// Status is everything an operator (and `seqbus stat`) reads about a node.
type Status struct {
	ID       uint32 `json:"id"`
	Role     string `json:"role"`
	Epoch    uint64 `json:"epoch"`
	Applied  uint64 `json:"applied"`
	Durable  uint64 `json:"durable"`
	Released uint64 `json:"released"`
	Ack      uint64 `json:"ack"` // standby: highest contiguous seq acknowledged
	Primary  uint32 `json:"primary"`
	InSync   struct {
		Version uint64           `json:"version"`
		Members []arbiter.NodeID `json:"members"`
		Adding  []arbiter.NodeID `json:"adding,omitempty"`
	} `json:"in_sync"`
	Lease struct {
		Held        bool   `json:"held"`
		Epoch       uint64 `json:"epoch"`
		RemainingNs int64  `json:"remaining_ns"`
	} `json:"lease"`
	StateHash uint64 `json:"state_hash"`
	// Refetching: the journal was set aside as corrupt and the node has
	// not yet caught up with a primary; it will not ask to lead.
	Refetching bool `json:"refetching,omitempty"`
	Journal    struct {
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
	} `json:"journal"`
	Node      Stats        `json:"node"`
	Sequencer any          `json:"sequencer,omitempty"`
	Window    any          `json:"window,omitempty"`
	Naks      any          `json:"naks,omitempty"`
	Fetch     any          `json:"fetch,omitempty"`
	Hashes    any          `json:"hashes,omitempty"`
	Gate      any          `json:"gate,omitempty"`
	Unicast   bus.Counters `json:"unicast"`
	Multicast bus.Counters `json:"multicast"`
	UptimeNs  int64        `json:"uptime_ns"`
	// LatencyUs: assign -> release (gated), µs percentiles over the
	// node's life as primary.
	LatencyUs map[string]int64 `json:"latency_us,omitempty"`
}

// Status returns a snapshot of the node's state and counters.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.statusLocked()
}

func (n *Node) statusLocked() Status {
	st := Status{
		ID:         n.cfg.ID,
		Role:       n.role.String(),
		Epoch:      n.epoch,
		Applied:    n.eng.AppliedSeq(),
		Durable:    n.j.Durable(),
		StateHash:  n.eng.StateHash(),
		Refetching: n.refetching,
		Node:       n.stats,
		UptimeNs:   n.nowNs(),
	}
	st.Lease.Held, st.Lease.RemainingNs, st.Lease.Epoch = n.leaseView(st.UptimeNs)
	st.Primary = n.primaryID
	st.InSync.Version, st.InSync.Members, st.InSync.Adding = n.isr.version, n.isr.members, n.isr.adding
	if n.role == RolePrimary {
		st.Primary = n.cfg.ID
	}
	st.Journal.FirstSeq = n.j.First()
	_, st.Journal.LastSeq = n.j.Last()
	if n.uc != nil {
		st.Unicast = n.uc.Counters()
	}
	if n.mcRecv != nil {
		st.Multicast = n.mcRecv.Counters()
	}
	if n.role == RolePrimary {
		st.Released = n.gate.Released()
		st.Sequencer = n.seqr.Stats()
		st.Gate = n.gate.Stats()
		h := n.releaseHist
		if h.TotalCount() > 0 {
			st.LatencyUs = map[string]int64{
				"p50": h.ValueAtQuantile(50), "p99": h.ValueAtQuantile(99),
				"p99.9": h.ValueAtQuantile(99.9), "max": h.Max(), "count": h.TotalCount(),
			}
		}
	} else {
		st.Ack = n.lastAckSent
		st.Window = n.win.Stats()
		st.Naks = n.naks.Stats()
		st.Fetch = n.fetch.Stats()
		st.Hashes = n.hashes.Stats()
	}
	return st
}

// writeStatusLocked rewrites StatusFile atomically (temp + rename).
func (n *Node) writeStatusLocked() {
	if n.cfg.StatusFile == "" {
		return
	}
	b, err := json.MarshalIndent(n.statusLocked(), "", "  ")
	if err != nil {
		return
	}
	tmp := n.cfg.StatusFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return
	}
	_ = os.Rename(tmp, filepath.Clean(n.cfg.StatusFile))
}
