package nodeconfig

import (
	"slices"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/session"
	"github.com/seqbus/seqbus/standby"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// Each part's configuration, as a node builds it from its settings.

// Bounds a node holds every part to.
const (
	// MaxCommandBytes is the largest command a primary sequences, whatever
	// the datagram size: what one default (1472-byte) DATA frame holds.
	// Jumbo datagrams batch more commands a frame; they do not make the
	// largest command, and with it every standby's window, larger.
	MaxCommandBytes = wire.DefaultDatagramLen - wire.HeaderLen - wire.MessageOverhead
	// MaxOutputBytes is the largest engine output the gate holds; larger
	// ones are a configuration error, counted and logged. 128: the session
	// history keeps outputs up to the same size.
	MaxOutputBytes = session.MaxOutputBytes
	// standbyMaxPending is how far ahead of applied a standby buffers
	// before it needs a snapshot: 8192 frames' worth of single messages,
	// 12 MB of slots of one default datagram each. A slot holds the
	// largest command (MaxCommandBytes), which does not grow with
	// DatagramBytes.
	standbyMaxPending = 8192
	// mdHeartbeatEveryNs: while releases move the primary heartbeats
	// this often (the sequencer only when idle), so standbys learn
	// released market data.
	mdHeartbeatEveryNs = sequencer.DefaultHeartbeatIntervalNs
)

// The gate's slot (replica.OutSlot) holds what the session history keeps:
// a compile-time check that the two bounds are one.
const _ = uint(replica.MaxOutputBytes-session.MaxOutputBytes) + uint(session.MaxOutputBytes-replica.MaxOutputBytes)

// DatagramLen is the largest datagram the node's frames may fill: the
// datagram size less a MAC tag when Key is set (transport.DatagramLen).
func (c *Config) DatagramLen() int { return transport.DatagramLen(c.DatagramBytes, c.Key != nil) }

// FollowerConfig is the standby core's (replica.Follower).
func (c *Config) FollowerConfig() replica.FollowerConfig {
	return replica.FollowerConfig{
		Window:     standby.Config{MaxPending: standbyMaxPending, MaxMessageBytes: wire.DefaultDatagramLen},
		Nak:        standby.NakConfig{Seed: uint64(c.ID)},
		Standby:    replica.StandbyConfig{AckIntervalNs: c.AckIntervalNs, AckDelayNs: c.AckDelayNs, NoFencing: c.Unsafe.NoFencing},
		ChunkBurst: SnapshotChunkBurst,
		ChunkBytes: wire.MaxSnapshotData(c.DatagramLen()),
	}
}

// PrimaryConfig is the primary core's for a term at epoch
// (replica.Primary): the peers in id order.
func (c *Config) PrimaryConfig(epoch uint64) replica.PrimaryConfig {
	peers := make([]uint32, 0, len(c.Peers))
	for id := range c.Peers {
		peers = append(peers, id)
	}
	slices.Sort(peers)
	return replica.PrimaryConfig{
		Self: arbiter.NodeID(c.ID), Epoch: epoch, Peers: peers, MinInSync: c.MinInSync,
		InSyncTimeoutNs: c.InSyncTimeoutNs, RetryNs: c.Lease.RetryNs,
		NoGating: c.Unsafe.NoGating, NoFencing: c.Unsafe.NoFencing,
		ProbeAfterNs: max(c.ProbeAfterNs, 0), ProbeSilentNs: c.ProbeAfterNs + 2*c.AckIntervalNs,
	}
}

// SequencerConfig is a term's sequencer's.
func (c *Config) SequencerConfig() sequencer.Config {
	return sequencer.Config{Stream: c.Stream, Node: c.ID, DatagramLen: c.DatagramLen(), MaxCommandBytes: MaxCommandBytes}
}

// FeedConfig is the market-data feed's: with a ring when the node
// publishes market data, else a disabled feed that keeps nothing and
// refuses requests.
func (c *Config) FeedConfig() mdfeed.Config {
	cfg := mdfeed.Config{DatagramLen: c.DatagramLen(),
		ReserveUpdates: replica.OutputReserve, HeartbeatEveryNs: mdHeartbeatEveryNs, NoRepublish: c.Unsafe.NoMDRepublish}
	if c.MarketData.IsValid() {
		cfg.RingUpdates = c.MDRingUpdates
	}
	return cfg
}

// ReplayConfig is session replay's.
func (c *Config) ReplayConfig() session.Config {
	return session.Config{History: c.SessionHistory, Off: c.Unsafe.NoSessionReplay, DatagramBytes: c.DatagramLen()}
}

// JournalOptions is the journal's: the next segment is prepared ahead,
// off the agent, except under a simulated clock, whose one goroutine
// creates it at the roll (unless Journal.PrepareAhead asks for it: a
// test of the node's side).
func (c *Config) JournalOptions() journal.Options {
	o := c.Journal
	o.PrepareAhead = o.PrepareAhead || c.Clock == nil
	return o
}
