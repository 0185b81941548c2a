// Package status is what a node reports about itself: the Status that
// status.json, `seqbus stat`, the metrics exporter and the harness read,
// the node's own counters (Stats), and its writer, which marshals and
// writes the file on its own goroutine from a copy the node's agent
// published (Publisher), so the file system never holds up a command.
//
// The node fills a Status under its own ownership (values only: cheap);
// nothing here reads the node, takes its lock or runs on its agent.
package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/storage"
	"github.com/seqbus/seqbus/wire"
)

// IntervalNs is how often a running node rewrites its status file.
// A reader that finds the file older than a few intervals knows the node
// is dead or stalled (`seqbus stat` says STALE at 3).
const IntervalNs = int64(100 * time.Millisecond)

// Hash64 is a 64-bit hash that JSON carries as 16 hex digits: a JSON
// number above 2^53 is rounded by jq and JavaScript, so comparing state
// hashes with standard tools would be wrong. It still reads the old
// numeric form.
type Hash64 uint64

// String is the 16 hex digits, as in JSON.
func (h Hash64) String() string { return fmt.Sprintf("%016x", uint64(h)) }

// MarshalJSON implements json.Marshaler.
func (h Hash64) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "\"%016x\"", uint64(h)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (h *Hash64) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		v, nerr := strconv.ParseUint(string(b), 10, 64)
		if nerr != nil {
			return fmt.Errorf("state hash: want a hex string, got %s", b)
		}
		*h = Hash64(v)
		return nil
	}
	v, err := strconv.ParseUint(text, 16, 64)
	if err != nil {
		return fmt.Errorf("state hash: %w", err)
	}
	*h = Hash64(v)
	return nil
}

// SocketDrops are a socket's receive drops by reason (bus.DropReason),
// named: an unnamed array hid 9,806 bad-header drops from the operator.
// Reasons a filter adds beyond the named ones count as Other.
type SocketDrops struct {
	WrongGroup    uint64 `json:"wrong_group"`
	BadHeader     uint64 `json:"bad_header"`
	UnknownSender uint64 `json:"unknown_sender"`
	SendOnly      uint64 `json:"send_only"` // arrived on a send-only socket
	// OwnFrame: this node's own multicast, looped back (dropped at the
	// header; a primary normally left the group and sees none).
	OwnFrame uint64 `json:"own_frame"`
	Other    uint64 `json:"other"`
}

// SocketStatus is a socket's counters as status.json shows them: the
// bus's counters with the drops named.
type SocketStatus struct {
	bus.Counters
	Drops SocketDrops `json:"drops"` // shadows Counters.Drops in JSON
}

// FromCounters names a socket's drops (bus.DropReason) for status.json.
func FromCounters(c bus.Counters) SocketStatus {
	s := SocketStatus{Counters: c}
	s.Drops.WrongGroup = c.Drops[bus.DropWrongGroup]
	s.Drops.BadHeader = c.Drops[bus.DropBadHeader]
	s.Drops.UnknownSender = c.Drops[bus.DropUnknownSender]
	s.Drops.SendOnly = c.Drops[bus.DropSendOnly]
	s.Drops.OwnFrame = c.Drops[bus.DropOwnFrame]
	for r := bus.DropOther; r < bus.DropReasonsMax; r++ {
		if r != bus.DropSendOnly && r != bus.DropOwnFrame {
			s.Drops.Other += c.Drops[r]
		}
	}
	return s
}

// StandbyStatus is what a primary knows of one standby.
type StandbyStatus struct {
	ID    uint32 `json:"id"`
	Acked uint64 `json:"acked"` // highest contiguous seq it acknowledged
	// LastAckAgeNs: time since its last accepted ack (or since the
	// primary first saw it, if it never acked).
	LastAckAgeNs int64 `json:"last_ack_age_ns"`
	InSync       bool  `json:"in_sync"`
	// Leaving: its last ack said it was stopping (a planned stop,
	// wire.Ack.Leaving); cleared when it acks again.
	Leaving bool `json:"leaving,omitempty"`
	// Unreachable: its host refused a probe sent after its last ack (its
	// process is gone); cleared when it acks again.
	Unreachable bool `json:"unreachable,omitempty"`
}

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
	// SnapshotChunksRefused: chunks not sent because one standby reached
	// its bound for one snapshot (sequencer.SnapshotBudget).
	SnapshotChunksRefused uint64
	// SnapshotsOnDemand: snapshots cut to answer a fetch (none was ahead
	// of the standby, or the latest was stale).
	SnapshotsOnDemand uint64
	// SnapshotRequestsNotBehind: fetches from a standby not behind us.
	SnapshotRequestsNotBehind uint64
	// SnapshotsSkipped: snapshots that did not verify at start-up
	// (logged; the node restored from an older one or the journal).
	SnapshotsSkipped uint64
	// SnapshotsNotAhead: offered snapshots a standby refused as not ahead
	// of what it applied; CatchUpsByRetransmit: catch-ups by retransmit
	// begun after a snapshot (installed or refused).
	SnapshotsNotAhead, CatchUpsByRetransmit uint64
	// A snapshot's cost (either role), each the longest seen: encoding
	// the state during the apply, on the agent (delays that pass);
	// writing and fsyncing the file, off the agent after the pass (delays
	// nothing); and the agent's wait for a disk two snapshots behind
	// (0 unless the disk is slower than SnapshotEvery commands).
	SnapshotEncodeNsMax, SnapshotWriteNsMax, SnapshotWaitNsMax int64
	HashMismatches                                             uint64
	JournalErrors, SyncErrors, SendErrors                      uint64
	JournalsSetAside, TornTailBytes, HistoriesShort            uint64
	// RefetchesDone: times a node that set its journal aside caught up
	// with a live primary and may lead again.
	RefetchesDone uint64
	// LeadsDeclinedNewDirectory: leases above the first epoch a node
	// with a new directory was granted and gave back (NewDirectory).
	LeadsDeclinedNewDirectory uint64
	// LeadsDeclinedForeign: leases a node whose directory holds another
	// history (replica.Identity.Foreign) was granted, by a request that
	// left before it knew, and gave back declined.
	LeadsDeclinedForeign uint64
	// GroupMembershipErrors: leaving the replication group on promotion,
	// or rejoining it on step-down, failed (logged).
	GroupMembershipErrors uint64
	// Session replay's counters (session.Counters: ReplayRequests,
	// ReplayServed, ...), flat, as every counter here: status.json's node
	// object holds numbers only. The core keeps them; Status copies them.
	session.Counters

	Promotions, StepDowns, LeaseLost, NotLeading uint64
	// LeasesReleased: leases this node gave up as primary before they
	// ran out (closing, its journal failed, its disk stalled), so a
	// standby took over at once.
	LeasesReleased uint64
	// DiskStalls: times this node's disk made nothing it wrote durable
	// for the in-sync timeout (replica.DiskWatch): a primary gave its
	// lease up, and neither role asked for it until the disk caught up.
	DiskStalls uint64
	// SpareSegmentFailures: times the journal could not prepare its next
	// segment ahead (a full disk, journal.SpareError), counted once per
	// episode: the roll at the end of the current segment then needs
	// the disk itself, and fails the journal if it is still full.
	SpareSegmentFailures uint64
	// StandbysLeaving: on a primary, in-sync standbys that said they
	// were stopping (a planned stop) and were proposed for removal at
	// once; LeavingSent: on a standby, the planned stops it announced
	// to its primary.
	StandbysLeaving, LeavingSent uint64
	// Probes of in-sync standbys that held a release back or fell
	// silent (a HEARTBEAT from a socket that hears "port unreachable"):
	// sent, not sent (an error, or a network that cannot probe), and
	// refused; StandbysUnreachable: members a refusal marked gone and
	// proposed for removal at once.
	ProbesSent, ProbeErrors, ProbesRefused, StandbysUnreachable uint64
	// NotLeadingSent: NOT_LEADING notices sent to client sessions as this
	// node stopped leading (it gave its lease up, lost it or stepped
	// down), one per session address.
	NotLeadingSent uint64
	// LeaseReleasesHeard: heartbeats of this node's primary saying it gave
	// its lease up, so this node asked for the lease at once.
	LeaseReleasesHeard uint64
	// NewTerms counts newer epochs granted to this node while it led
	// (a seamless change of term, never a step-down).
	NewTerms             uint64
	WitnessSilent        uint64
	OutputsDroppedAtGate uint64
	// ReleaseFramesUnsent: OUTPUT frames of a release not sent because
	// the lease ran out between the release's check and the send (the
	// agent was stopped in between: SIGSTOP, a descheduled VM); the
	// clients resend, as for outputs dropped at the gate.
	ReleaseFramesUnsent                          uint64
	SuffixDiscarded, HistoryDiscarded            uint64
	InSyncMembers, InSyncProposals, RunningAlone uint64

	DropStaleEpoch, DropWrongStream, DropUnknownNode  uint64
	DropAwaitingNewEpoch                              uint64
	DropNotPrimary, DropUnexpected                    uint64
	DropShort, DropChecksum, DropMalformed            uint64
	DropNoMAC, DropBadMAC, DropUnknownKey, DropReplay uint64
	// DropSendOnly: datagrams that arrived on the send-only sockets
	// (replication and market-data senders), drained and discarded; the
	// sum of their bus counters' Drops[bus.DropSendOnly].
	DropSendOnly uint64
	// WitnessBehind: grants of an epoch this node already knew used
	// (replica.Roles.WitnessGrant): the witness lost its state.
	WitnessBehind uint64
	// AcksFromOtherAddr: acks from a standby at another address than its
	// --peer here (probes, NAK answers and snapshots go to the --peer).
	AcksFromOtherAddr uint64
	// DropAckAhead: acks of the primary's epoch beyond the last seq it
	// sequenced (replica.AckAhead): a standby whose directory holds
	// another history; never counted.
	DropAckAhead uint64
	// DropForeignHistory: acks stamped with another history's id
	// (replica.AckForeign), never counted; ForeignHistoryHeard: frames
	// of a primary of another history a standby heard (it latched
	// ForeignHistory).
	DropForeignHistory, ForeignHistoryHeard uint64
	// HistoryAsked: ACKs a restarted standby sent asking which history
	// its primary leads (wire.Ack.AskHistory) before it applied anything;
	// DropAwaitingHistory: DATA and RETRANSMIT frames it dropped meanwhile
	// (NAKed again once it knows).
	HistoryAsked, DropAwaitingHistory uint64

	// AnsweredFromTable: commands the primary answered from the state
	// machine's dedup table (replays, resends, too-old ids) without
	// sequencing, journaling or replicating them.
	AnsweredFromTable uint64
}

// CountDrop counts a frame that did not parse, by wire's error.
func (s *Stats) CountDrop(err error) {
	switch {
	case errors.Is(err, wire.ErrShort), errors.Is(err, wire.ErrLength):
		s.DropShort++
	case errors.Is(err, wire.ErrChecksum):
		s.DropChecksum++
	default:
		s.DropMalformed++
	}
}

// AgentStatus is what the agent's runner counted (bus.AgentRunner): its
// passes and parks, the longest pass that did work, the longest stall
// (a turn of the duty cycle less its pass's work and its park's allowed
// wait: the thread did not run when it should have) and the stalls
// longer than bus.StallNs. A datagram that arrives during a pass or a
// stall waits for it: a latency outlier that matches one is the node's
// own (a pass) or its machine's (a stall), not the network's.
type AgentStatus struct {
	Passes, Parks                 uint64
	LongestPassNs, LongestStallNs int64
	Stalls                        uint64
}

// DiskStatus is what a node's disk watch sees (replica.DiskWatch).
type DiskStatus struct {
	// Stalled: nothing written became durable for StallAfterNs while
	// records waited; the node does not ask to lead (a primary gave its
	// lease up) until the disk makes something durable.
	Stalled bool `json:"stalled,omitempty"`
	// WaitingNs: how long the durable watermark has not moved while
	// written records wait (0: nothing waits).
	WaitingNs int64 `json:"waiting_ns,omitempty"`
	// StallAfterNs is the bound (--disk-stall-after; the in-sync timeout
	// unless set).
	StallAfterNs int64 `json:"stall_after_ns"`
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
	StateHash Hash64 `json:"state_hash"` // 16 hex digits
	// Refetching: the journal was set aside as corrupt and the node has
	// not yet caught up with a primary; it will not ask to lead.
	Refetching bool `json:"refetching,omitempty"`
	// NewDirectory: the node's directory was empty when it started and
	// the node has neither led nor caught up with a primary since
	// (storage.Storage.NewDirectory): it acknowledges nothing yet, and
	// leads only a term no other node can hold a history for
	// (replica.MayLeadTerm).
	NewDirectory bool `json:"new_directory,omitempty"`
	// History is the id of the history the directory holds
	// (replica.Identity; journal.HistoryFile), 16 hex digits; absent
	// while it has none. ForeignHistory: a primary of another history
	// was heard, so this node acknowledges nothing and will not lead
	// (its directory is another cluster's: empty it and restart).
	History        Hash64 `json:"history,omitempty"`
	ForeignHistory bool   `json:"foreign_history,omitempty"`
	// JournalFailed: a journal write, fsync or cut failed (the node's log
	// says which; JournalErrors, SyncErrors count them): nothing more
	// becomes durable, released or acknowledged, and the node will not
	// lead again until it is restarted once its disk is fixed.
	JournalFailed bool `json:"journal_failed,omitempty"`
	Journal       struct {
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
		// NextSegmentError: why the next segment could not be prepared
		// ahead ("" while it can), and RoomBytes the records the
		// current segment still takes before the roll that needs it.
		NextSegmentError string `json:"next_segment_error,omitempty"`
		RoomBytes        int64  `json:"room_bytes,omitempty"`
	} `json:"journal"`
	// SnapshotsWriting: snapshots cut and not yet finished (0, 1 or 2):
	// waiting for the disk, being written, or written and not yet
	// compacted behind (the agent finishes a write at its next pass).
	SnapshotsWriting int `json:"snapshots_writing"`
	// Disk is the node's watch on its own disk (replica.DiskWatch).
	Disk DiskStatus `json:"disk"`
	// Agent: the agent thread's passes and parks, and its time away from
	// its sockets (bus.AgentStalls); zero for a node driven by hand.
	Agent AgentStatus `json:"agent"`
	// Fsync: the journal's fsyncs run inline on the agent and on the
	// fsync thread, and their moving average (storage.Committer).
	Fsync storage.CommitterCounters `json:"fsync"`
	// DatagramBytes is the largest datagram this node sends and reads
	// (Config.DatagramBytes after defaults): every member and client of a
	// stream must use the same.
	DatagramBytes int          `json:"datagram_bytes"`
	Node          Stats        `json:"node"`
	MD            mdfeed.Stats `json:"md"` // market-data ring and recovery
	Sequencer     any          `json:"sequencer,omitempty"`
	Window        any          `json:"window,omitempty"`
	Naks          any          `json:"naks,omitempty"`
	Fetch         any          `json:"fetch,omitempty"`
	Hashes        any          `json:"hashes,omitempty"`
	Gate          any          `json:"gate,omitempty"`
	Unicast       SocketStatus `json:"unicast"`
	Multicast     SocketStatus `json:"multicast"`
	// MulticastSend and MarketDataSend are the send-only sockets: all
	// they receive is drained and counted (drops.send_only).
	MulticastSend  SocketStatus  `json:"multicast_send"`
	MarketDataSend *SocketStatus `json:"market_data_send,omitempty"`
	UptimeNs       int64         `json:"uptime_ns"`
	// Standbys: on the primary, every standby it has heard from or
	// requires, with its acked seq.
	Standbys []StandbyStatus `json:"standbys,omitempty"`
	// When and by whom this status was written: the wall time (RFC 3339),
	// the host's CLOCK_MONOTONIC (comparable across processes on one
	// host), the process and when it started, and how often it rewrites
	// the file, so a reader can tell a dead node's last words from news.
	WrittenAt       string `json:"written_at"`
	WrittenAtMonoNs int64  `json:"written_at_mono_ns"`
	PID             int    `json:"pid"`
	StartedAt       string `json:"started_at"`
	WriteIntervalNs int64  `json:"write_interval_ns"`
	// LatencyUs: assign -> release (gated), µs percentiles over the
	// node's life as primary.
	LatencyUs map[string]int64 `json:"latency_us,omitempty"`
}

// AddLeader adds what the leader core counted (its Ready's Counts) to
// the node's counters, which outlive its terms.
func (s *Stats) AddLeader(c *replica.LeaderCounts) {
	s.Commands += c.Commands
	s.BadCommands += c.BadCommands
	s.NotLeading += c.NotLeading
	s.SessionsFull += c.SessionsFull
	s.Backpressure += c.Backpressure
	s.AnsweredFromTable += c.AnsweredFromTable
	s.OutputsLost += c.OutputsLost
	s.OutputsReleased += c.OutputsReleased
}

// Syscalls is the number of send and receive calls that moved data on
// every socket of the node (sendmmsg and recvmmsg calls, from the bus
// counters); receive calls that found nothing are not counted.
func (s *Status) Syscalls() uint64 {
	var sum uint64
	sockets := []bus.Counters{s.Unicast.Counters, s.Multicast.Counters, s.MulticastSend.Counters}
	if s.MarketDataSend != nil {
		sockets = append(sockets, s.MarketDataSend.Counters)
	}
	for _, c := range sockets {
		for i := range c.SendBatches {
			sum += c.SendBatches[i] + c.ReceiveBatches[i]
		}
	}
	return sum
}
