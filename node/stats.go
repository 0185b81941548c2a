package node

import (
	"os"
	"slices"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/status"
)

// Status returns a snapshot of the node's state and counters.
func (n *Node) Status() status.Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.statusLocked()
}

func (n *Node) statusLocked() status.Status {
	st := status.Status{
		ID:            n.cfg.ID,
		Role:          n.role().String(),
		Epoch:         n.tm.Epoch(),
		Applied:       n.eng().AppliedSeq(),
		Durable:       n.j.Durable(),
		StateHash:     status.Hash64(n.eng().StateHash()),
		Refetching:    n.refetching(),
		DatagramBytes: n.cfg.DatagramBytes,
		Node:          n.stats,
		UptimeNs:      n.nowNs(),
		// Status is read every StatusIntervalNs or on demand, never per
		// command: the clock reads here cost nothing on the hot path.
		WrittenAt:       time.Now().UTC().Format(time.RFC3339Nano),
		WrittenAtMonoNs: monotime.Now(),
		PID:             os.Getpid(),
		StartedAt:       n.start.UTC().Format(time.RFC3339Nano),
		WriteIntervalNs: status.IntervalNs,
	}
	st.Node.Counters = n.replay.Counters()
	stc := n.st.Counters()
	st.Node.JournalsSetAside, st.Node.TornTailBytes = stc.JournalsSetAside, stc.TornTailBytes
	st.Node.HistoryDiscarded += stc.HistoryDiscarded // and the node's own: reconciliations that discarded
	st.MD = n.md.Stats()
	st.Lease.Held, st.Lease.RemainingNs, st.Lease.Epoch = n.leaseView(st.UptimeNs)
	st.Primary = n.fol.Standby().Primary()
	// Copies: the status is marshalled outside the lock, while the node
	// may change its in-sync set.
	st.InSync.Version, st.InSync.Members, st.InSync.Adding = n.isr.Version(), slices.Clone(n.isr.Members()), slices.Clone(n.isr.Adding())
	if n.tm.Primary() {
		st.Primary = n.cfg.ID
	}
	st.Journal.FirstSeq = n.j.First()
	_, st.Journal.LastSeq = n.j.Last()
	st.SnapshotsWriting = n.snaps.Waiting()
	sc := n.snaps.Counters()
	st.Node.Snapshots, st.Node.SnapshotsOnDemand, st.Node.SnapshotsInstalled = sc.Written, sc.OnDemand, sc.Installed
	st.Node.SnapshotChunksSent, st.Node.SnapshotChunksRefused, st.Node.SnapshotRequestsNotBehind = sc.ChunksSent, sc.ChunksRefused, sc.RequestsNotBehind
	st.Node.SnapshotEncodeNsMax, st.Node.SnapshotWriteNsMax, st.Node.SnapshotWaitNsMax = sc.EncodeNsMax, sc.WriteNsMax, sc.WaitNsMax
	n.socketStatus(&st)
	if n.tm.Primary() {
		st.Released = n.ldr.Primary().Gate().Released()
		st.Sequencer = n.ldr.Sequencer().Stats()
		st.Gate = n.ldr.Primary().Gate().Stats()
		st.Standbys = n.standbysLocked(st.UptimeNs)
		h := n.rel.hist
		if h.TotalCount() > 0 {
			st.LatencyUs = map[string]int64{
				"p50": h.ValueAtQuantile(50), "p99": h.ValueAtQuantile(99),
				"p99.9": h.ValueAtQuantile(99.9), "max": h.Max(), "count": h.TotalCount(),
			}
		}
	} else {
		st.Ack = n.fol.Standby().AckSent()
		st.Window = n.fol.Window().Stats()
		st.Naks = n.fol.NakStats()
		st.Fetch = n.fol.FetchStats()
		st.Hashes = n.fol.HashStats()
	}
	return st
}

// publishStatus copies the status under the lock (values only: cheap)
// and marshals and writes it outside (the drivers' and tests' way; the
// agent publishes to its status.Publisher instead).
func (n *Node) publishStatus() {
	if n.cfg.StatusFile == "" {
		return
	}
	n.mu.Lock()
	st := n.statusLocked()
	n.mu.Unlock()
	n.writeStatus(&st)
}

// writeStatus marshals st and rewrites StatusFile atomically through
// n.statusWrite (nil: status.WriteFileAtomic). It takes no lock.
func (n *Node) writeStatus(st *status.Status) {
	if n.cfg.StatusFile != "" {
		_ = status.Write(n.cfg.StatusFile, st, n.statusWrite)
	}
}

// standbysLocked lists what the gate knows of every configured peer and
// every in-sync member, in id order.
func (n *Node) standbysLocked(nowNs int64) []status.StandbyStatus {
	ids := make([]uint32, 0, len(n.cfg.Peers)+len(n.isr.Members()))
	for id := range n.cfg.Peers {
		ids = append(ids, id)
	}
	for _, id := range n.isr.Members() {
		ids = append(ids, uint32(id))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out []status.StandbyStatus
	for _, id := range ids {
		if g, ok := n.ldr.Primary().Gate().Standby(id); ok {
			out = append(out, status.StandbyStatus{ID: id, Acked: g.AckSeq, LastAckAgeNs: max(nowNs-g.LastAckNs, 0), InSync: g.Member})
		}
	}
	return out
}

// SocketSyscalls is Status.Syscalls read straight from the sockets'
// atomic counters (no lock, no allocation): a stage trace's window
// samples it from the node's agent, in an Observer call.
func (n *Node) SocketSyscalls() uint64 { return n.tr.Syscalls() }

// socketStatus fills st's socket rows and the transport's counters.
func (n *Node) socketStatus(st *status.Status) {
	s := n.tr.Sockets()
	if s.Unicast != nil {
		st.Unicast = status.FromCounters(s.Unicast.Counters())
	}
	if s.Multicast != nil {
		st.Multicast = status.FromCounters(s.Multicast.Counters())
	}
	if s.MulticastSend != nil {
		c := s.MulticastSend.Counters()
		st.MulticastSend = status.FromCounters(c)
		st.Node.DropSendOnly += c.Drops[bus.DropSendOnly]
	}
	if s.MarketDataSend != nil {
		c := s.MarketDataSend.Counters()
		md := status.FromCounters(c)
		st.MarketDataSend = &md
		st.Node.DropSendOnly += c.Drops[bus.DropSendOnly]
	}
	tc := n.tr.Counters()
	st.Node.SendErrors, st.Node.GroupMembershipErrors = tc.SendErrors, tc.GroupMembershipErrors
	st.Node.DropNoMAC, st.Node.DropBadMAC, st.Node.DropUnknownKey, st.Node.DropReplay = tc.DropNoMAC, tc.DropBadMAC, tc.DropUnknownKey, tc.DropReplay
}

// stageBatch tells a StageObserver that the commands about to be
// sequenced or applied are one pass's.
func (n *Node) stageBatch() {
	if n.stages != nil {
		n.stages.Batch(n.cfg.ID, n.tm.Primary())
	}
}
