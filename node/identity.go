package node

import (
	"fmt"

	"github.com/seqbus/seqbus/replica"
	"github.com/seqbus/seqbus/status"
	"github.com/seqbus/seqbus/wire"
)

// ownHistory makes sure a node about to lead has a history id
// (replica.Identity; storage.Storage.MakeHistory): one whose directory
// has none (a fresh cluster's first primary, or a directory from before
// ids) makes one before it leads; the simulator's is from its clock.
func (n *Node) ownHistory() error {
	var seed uint64
	if n.cfg.Clock != nil {
		seed = uint64(n.cfg.Clock.NowNs())*0x9e3779b97f4a7c15 ^ uint64(n.cfg.ID) | 1
	}
	id, err := n.st.MakeHistory(seed)
	if err == nil {
		n.ident.Adopted(id) // leading it: confirmed
	}
	return err
}

// heardHistory judges the history id of a primary's HEARTBEAT or
// NEW_EPOCH (replica.Identity): ours, none, or one we take (recorded
// first) lets the frame through, and from the first of them the standby
// takes DATA; another history's is dropped, and the node stops
// acknowledging and asking for the lease for the rest of its run.
func (n *Node) heardHistory(id uint64, from uint32) bool {
	v, first := n.ident.HeardPrimary(id)
	switch v {
	case replica.AdoptHistory:
		if err := n.st.SetHistory(id); err != nil {
			n.journalFailed(err)
			return false
		}
		n.ident.Adopted(id)
		n.cfg.Log.Info("following history", "history", status.Hash64(id), "primary", from)
	case replica.ForeignHistory:
		if first {
			n.foreignHistory(id, fmt.Sprintf("primary %d", from))
		}
		return false
	}
	return true
}

// foreignHistory carries out Identity's latch (logged once): acks held,
// and no lease asked for (leaseTick).
func (n *Node) foreignHistory(id uint64, who string) {
	n.holdAcks()
	n.cfg.Log.Error("FOREIGN HISTORY: "+who+" knows another history than this directory holds (another cluster's, or a copy): "+
		"this node acknowledges nothing and will not lead; stop it, empty its directory, restart it",
		"theirs", status.Hash64(id), "ours", status.Hash64(n.ident.ID()), "dir", n.cfg.Dir)
}

// confirmHistory reports whether the standby knows its primary leads its
// history (replica.Identity.Confirmed); until then the DATA it receives
// is dropped (counted, NAKed again later: the follower's window must not
// take what is not applied at once, since an in-order entry's payload is
// the receive buffer's), and it asks its primary, at most once a
// millisecond, with an ACK flagged AskHistory, which the primary answers
// with a HEARTBEAT.
func (n *Node) confirmHistory(now int64) bool {
	if n.ident.Confirmed() {
		return true
	}
	if !n.ident.Foreign() && n.primaryAddr.IsValid() && n.fol.Standby().Primary() != 0 && n.fol.Standby().AskNewEpoch(now) {
		n.sendAck(wire.Ack{Origin: n.origin(), Seq: n.fol.Standby().AckSent(), AskHistory: true}, n.primaryAddr, 1)
		n.stats.HistoryAsked++
	}
	return false
}

// holdAcks holds the follower's acks while the directory is new or holds
// another history than its primary's.
func (n *Node) holdAcks() { n.fol.HoldAcks(n.st.NewDirectory() || n.ident.Foreign()) }

// foreignAck counts and logs (the 1st, 2nd, 4th... time) an ACK of
// another history (replica.AckAhead, replica.AckForeign).
func (n *Node) foreignAck(f *wire.Frame, v replica.AckVerdict) {
	c, why := &n.stats.DropForeignHistory, "its history id is another's"
	if v == replica.AckAhead {
		c, why = &n.stats.DropAckAhead, "it acknowledges a seq of our epoch beyond the last we sequenced"
	}
	if *c++; *c&(*c-1) == 0 {
		n.cfg.Log.Error("FOREIGN HISTORY: a standby's directory holds another history (another cluster's, or a copy): "+why+"; its acks are refused, so it never counts as in sync: stop it, empty its directory, restart it",
			"standby", f.Node, "acked", f.Seq, "epoch", f.Epoch, "its_history", status.Hash64(wire.HistoryOf(f)), "refused", *c)
	}
}
