package status

import (
	"net/netip"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/storage"
	"github.com/seqbus/seqbus/transport"
)

// The parts of a Status that other runtime packages own, copied from
// them: the node calls these under its ownership (values only, no I/O),
// beside the fields it fills itself.

// SetSockets fills the socket rows and the transport's counters (its
// MACs, sends, group membership).
func (s *Status) SetSockets(tr *transport.Transport) {
	so := tr.Sockets()
	if so.Unicast != nil {
		s.Unicast = FromCounters(so.Unicast.Counters())
	}
	if so.Multicast != nil {
		s.Multicast = FromCounters(so.Multicast.Counters())
	}
	if so.MulticastSend != nil {
		c := so.MulticastSend.Counters()
		s.MulticastSend = FromCounters(c)
		s.Node.DropSendOnly += c.Drops[bus.DropSendOnly]
	}
	if so.MarketDataSend != nil {
		c := so.MarketDataSend.Counters()
		md := FromCounters(c)
		s.MarketDataSend = &md
		s.Node.DropSendOnly += c.Drops[bus.DropSendOnly]
	}
	tc := tr.Counters()
	s.Node.SendErrors, s.Node.GroupMembershipErrors = tc.SendErrors, tc.GroupMembershipErrors
	s.Node.ProbesSent, s.Node.ProbeErrors, s.Node.ProbesRefused = tc.ProbesSent, tc.ProbeErrors, tc.ProbesRefused
	s.Node.DropNoMAC, s.Node.DropBadMAC, s.Node.DropUnknownKey, s.Node.DropReplay = tc.DropNoMAC, tc.DropBadMAC, tc.DropUnknownKey, tc.DropReplay
}

// SetStorage copies the history's counters (storage.Counters), the
// snapshot store's, the journal's range and its next segment's trouble
// (storage.Storage.Spare); HistoryDiscarded adds to the node's own count
// (its reconciliations that discarded).
func (s *Status) SetStorage(st *storage.Storage) {
	c, snaps, j := st.Counters(), st.Snapshots(), st.Journal()
	s.Node.JournalsSetAside, s.Node.TornTailBytes, s.Node.HistoriesShort = c.JournalsSetAside, c.TornTailBytes, c.HistoriesShort
	s.Node.HistoryDiscarded += c.HistoryDiscarded
	s.Node.SpareSegmentFailures = c.SpareSegmentFailures
	s.JournalFailed = c.Broken
	s.Journal.FirstSeq = j.First()
	_, s.Journal.LastSeq = j.Last()
	if room, err := st.Spare(); err != nil {
		s.Journal.NextSegmentError, s.Journal.RoomBytes = err.Error(), room
	}
	s.SnapshotsWriting = snaps.Waiting()
	sc := snaps.Counters()
	s.Node.Snapshots, s.Node.SnapshotsOnDemand, s.Node.SnapshotsInstalled = sc.Written, sc.OnDemand, sc.Installed
	s.Node.SnapshotChunksSent, s.Node.SnapshotChunksRefused, s.Node.SnapshotRequestsNotBehind = sc.ChunksSent, sc.ChunksRefused, sc.RequestsNotBehind
	s.Node.SnapshotsSkipped = sc.Skipped
	s.Node.SnapshotEncodeNsMax, s.Node.SnapshotWriteNsMax, s.Node.SnapshotWaitNsMax = sc.EncodeNsMax, sc.WriteNsMax, sc.WaitNsMax
}

// SetAgent fills the agent's row from its runner (atomics: any
// goroutine).
func (s *Status) SetAgent(r *bus.AgentRunner) {
	st := r.Stalls()
	s.Agent = AgentStatus{Passes: r.Passes(), Parks: r.Parks(), LongestPassNs: st.LongestPassNs, LongestStallNs: st.LongestStallNs, Stalls: st.Stalls}
}

// SetInSync copies the in-sync set (the status is marshalled elsewhere
// while the node may change it).
func (s *Status) SetInSync(isr *replica.InSync) {
	s.InSync.Version, s.InSync.Members, s.InSync.Adding = isr.Version(), slices.Clone(isr.Members()), slices.Clone(isr.Adding())
}

// SetLeader fills a primary's rows: the released watermark, the
// sequencer's and the gate's counters, what the gate knows of every
// configured peer and in-sync member (in id order). The assign ->
// release percentiles are Latency.Fill's, read off the node's lock.
func (s *Status) SetLeader(l *replica.Leader[netip.AddrPort], peers map[uint32]netip.AddrPort, members []arbiter.NodeID, nowNs int64) {
	g := l.Primary().Gate()
	s.Released, s.Sequencer, s.Gate = g.Released(), l.Sequencer().Stats(), g.Stats()
	ids := make([]uint32, 0, len(peers)+len(members))
	for id := range peers {
		ids = append(ids, id)
	}
	for _, id := range members {
		ids = append(ids, uint32(id))
	}
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		if sb, ok := g.Standby(id); ok {
			s.Standbys = append(s.Standbys, StandbyStatus{ID: id, Acked: sb.AckSeq, LastAckAgeNs: max(nowNs-sb.LastAckNs, 0), InSync: sb.Member,
				Leaving: sb.Leaving, Unreachable: sb.Unreachable})
		}
	}
}

// SetReplica fills what the protocol core knows (replica.Replica): the
// epoch, the history id, the in-sync set, the disk watch (its timeout
// stallAfterNs), the grants found behind, and the role's rows, a
// primary's (SetLeader, self leading) or a standby's (SetFollower).
func (s *Status) SetReplica(r *replica.Replica[netip.AddrPort], self uint32, peers map[uint32]netip.AddrPort, stallAfterNs, nowNs int64) {
	s.Epoch, s.Node.WitnessBehind = r.Roles().Epoch(), r.Roles().BehindGrants()
	s.SetIdentity(r.Identity())
	s.SetInSync(r.InSync())
	s.Disk = DiskStatus{Stalled: r.Disk().Stalled(), WaitingNs: r.Disk().WaitedNs(nowNs), StallAfterNs: stallAfterNs}
	if r.Roles().Primary() {
		s.Primary = self
		s.SetLeader(r.Leader(), peers, r.InSync().Members(), nowNs)
	} else {
		s.Primary = r.Follower().Standby().Primary()
		s.SetFollower(r.Follower())
	}
}

// SetFollower fills a standby's rows: its ack, window, NAKs, snapshot
// fetch and hash checks.
func (s *Status) SetFollower(f *replica.Follower) {
	s.Ack, s.Window, s.Naks, s.Fetch, s.Hashes = f.Standby().AckSent(), f.Window().Stats(), f.NakStats(), f.FetchStats(), f.HashStats()
}

// SetIdentity fills the history id and whether a primary of another
// history was heard.
func (s *Status) SetIdentity(id *replica.Identity) {
	s.History, s.ForeignHistory, s.Node.ForeignHistoryHeard = Hash64(id.ID()), id.Foreign(), id.Refused()
}

// LatencyBuckets is a latency histogram cut at caller-given upper
// bounds, for an exporter such as Prometheus.
type LatencyBuckets struct {
	BoundsUs []float64 // ascending upper bounds, µs
	// Cumulative[i] counts releases of at most BoundsUs[i] µs (within the
	// histogram's precision).
	Cumulative []uint64
	Count      uint64
	SumUs      float64 // count × mean: the histogram keeps no exact sum
}

// BucketsOf cuts h (µs) at boundsUs. It walks every bucket: for a
// scrape, never per command.
func BucketsOf(h *hdrhistogram.Histogram, boundsUs []float64) LatencyBuckets {
	lb := LatencyBuckets{BoundsUs: boundsUs, Cumulative: make([]uint64, len(boundsUs))}
	lb.Count = uint64(h.TotalCount())
	lb.SumUs = h.Mean() * float64(lb.Count)
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		for i, b := range boundsUs {
			if float64(bar.To) <= b {
				lb.Cumulative[i] += uint64(bar.Count)
			}
		}
	}
	return lb
}
