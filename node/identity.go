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
		n.rep.Identity().Adopted(id) // leading it: confirmed
	}
	return err
}

// heardHistory judges the history id of a primary's HEARTBEAT or
// NEW_EPOCH (replica.Identity): ours, none, or one we take (recorded
// first) lets the frame through, and from the first of them the standby
// takes DATA; another history's is dropped, and the node stops
// acknowledging and asking for the lease for the rest of its run.
func (n *Node) heardHistory(id uint64, from uint32) bool {
	take, adopt, latched := n.rep.HeardHistory(id)
	if latched {
		n.foreignHistory(id, fmt.Sprintf("primary %d", from))
	}
	if adopt {
		if err := n.st.SetHistory(id); err != nil {
			n.journalFailed(err)
			return false
		}
		n.rep.Identity().Adopted(id)
		n.cfg.Log.Info("following history", "history", status.Hash64(id), "primary", from)
	}
	return take
}

// foreignHistory carries out Identity's latch (logged once): acks held,
// and no lease asked for (leaseTick).
func (n *Node) foreignHistory(id uint64, who string) {
	n.holdAcks()
	n.cfg.Log.Error("FOREIGN HISTORY: "+who+" knows another history than this directory holds (another cluster's, or a copy): "+
		"this node acknowledges nothing and will not lead; stop it, empty its directory, restart it",
		"theirs", status.Hash64(id), "ours", status.Hash64(n.rep.Identity().ID()), "dir", n.cfg.Dir)
}

// holdAcks holds the follower's acks while the directory is new or holds
// another history than its primary's.
func (n *Node) holdAcks() { n.rep.HoldAcks(n.st.NewDirectory()) }

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
