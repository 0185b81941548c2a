package node

import (
	"fmt"
	"net/netip"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// Market data across failovers and lost datagrams: the ring, publishing
// from it and the recovery service are the pure core mdfeed (its doc.go);
// this file feeds it and sends the frames it returns.

// mdState is the node's feed, and the emitter a standby applies with.
type mdState struct {
	*mdfeed.Feed[netip.AddrPort]
	n     *Node
	batch *wire.Batch // the frames the ring publishes, reused
}

// Emit keeps a standby's market data in the ring.
func (m *mdState) Emit(to uint64, payload []byte) {
	if to == engine.MarketData {
		m.Add(m.n.eng().AppliedSeq(), payload) // Apply sets AppliedSeq first
	}
}

// mdInit builds the feed (nodeconfig.Config.FeedConfig).
func (n *Node) mdInit() error {
	md, err := mdfeed.New[netip.AddrPort](n.cfg.FeedConfig())
	if err != nil {
		return fmt.Errorf("%w: %v", nodeconfig.ErrConfig, err)
	}
	n.md = mdState{Feed: md, n: n, batch: wire.NewBatch(n.cfg.DatagramLen())}
	return nil
}

// mdStandbyEmitter is the emitter a standby applies with: nil (outputs
// discarded) without a market-data ring.
func (n *Node) mdStandbyEmitter() engine.Emitter {
	if !n.md.Enabled() {
		return nil
	}
	return &n.md
}

// mdPublish sends the ring's released updates on the market-data group.
func (n *Node) mdPublish(released uint64) {
	if !n.tr.MarketData() {
		return
	}
	o, state := n.origin(), n.engineMDSeq()
	// Each Publish that packs something resets the batch first and fills
	// it; the frame leaves at once (sendNow), before the next reuses it.
	for k := n.md.Publish(n.md.batch, o, released, state); k > 0; k = n.md.Publish(n.md.batch, o, released, state) {
		n.stats.OutputsReleased += uint64(k)
		n.tr.SendMarketData(n.md.batch.Bytes())
	}
}

// mdAfterRelease publishes, tells the sequencer what heartbeats carry,
// sends one when due, and serves a snapshot released now.
func (n *Node) mdAfterRelease(now int64) {
	if !n.rep.Roles().Primary() {
		return
	}
	r := n.rep.Leader().Primary().Gate().Released()
	n.mdPublish(r)
	n.rep.Leader().SetReleased(r, n.md.Released())
	if n.md.HeartbeatDue(r, now) {
		n.rep.Leader().Heartbeat(now)
		n.leaderReady()
	}
	n.md.ServeSnapshot(now)
	n.mdSendReplies()
}

// mdPromoted: the ring's unreleased tail is published as the epoch releases.
func (n *Node) mdPromoted() {
	if from, to := n.md.Promoted(n.engineMDSeq()); to >= from {
		n.cfg.Log.Info("market data above the last known release will be published again", "md_from", from, "md_to", to)
	}
}

// books is the state machine's book export (nil: none).
func (n *Node) books() engine.BookExporter { ex, _ := n.eng().(engine.BookExporter); return ex }

func (n *Node) engineMDSeq() uint64 { return mdfeed.StateMDSeq(n.books()) }

// onMDRecovery serves one market-data recovery frame (client traffic,
// from anyone: the MAC, when configured, was checked).
func (n *Node) onMDRecovery(f *wire.Frame, from netip.AddrPort, now int64) {
	if f.Type != wire.TypeMDRequest {
		n.stats.DropUnexpected++
		return
	}
	if f.Stream != n.cfg.Stream {
		n.stats.DropWrongStream++
		return
	}
	req, _ := wire.DecodeMDRequest(f) // never fails on a parsed MD_REQUEST
	n.md.Request(from, req, now, n.books())
	n.mdSendReplies()
}

// mdSendReplies sends the unicast frames the feed has to send.
func (n *Node) mdSendReplies() {
	for b, to, ok := n.md.Next(n.origin()); ok; b, to, ok = n.md.Next(n.origin()) {
		n.tr.Send(b, to)
	}
}
