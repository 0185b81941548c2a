package node

import (
	"net/netip"

	"github.com/seqbus/seqbus/journal"
)

// Driving a node by hand. A deterministic simulator (package sim) owns the
// clock, the network and the disk: it builds a node with Config.Clock,
// Config.Network and Config.FS, never calls Start, and instead calls
// Deliver for each datagram, Tick for each ticker period and SyncStep for
// the group committer. The node then runs the same code as a process does,
// on one goroutine, with no real time.
//
// A simulated crash abandons the node without Close (Close syncs the
// journal, which a crash does not) and crashes the FS.

// Deliver handles one datagram as if a socket had received it now.
func (n *Node) Deliver(pkt []byte, from netip.AddrPort) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	now := n.nowNs()
	n.tr.Begin()
	n.onDatagram(pkt, from, now)
	n.afterBatch(now)
	n.tr.End()
}

// Tick runs one ticker period: the lease keeper, heartbeats, NAK timers,
// acks and in-sync maintenance.
func (n *Node) Tick() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.closed {
		n.tr.Begin()
		n.tickLocked(n.nowNs())
		n.tr.End()
	}
}

// SyncStep is one step of the group committer: when the journal's policy
// says a sync is due, it fsyncs and raises the durable watermark. It
// reports whether it synced.
func (n *Node) SyncStep() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.cfg.Journal.Policy == journal.SyncNone || !n.j.SyncDue(n.nowNs()) {
		return false
	}
	if err := n.j.Sync(); err != nil {
		n.syncFailedLocked(err)
		return false
	}
	n.tr.Begin()
	n.syncedLocked(n.nowNs())
	n.tr.End()
	return true
}

func (n *Node) tickLocked(now int64) {
	n.tr.NoteTruncations()
	n.watchDisk(now)
	n.leaseTick(now)
	if n.rep.Roles().Primary() {
		n.primaryTick(now)
	} else {
		n.standbyTick(now)
	}
}

// syncFailedLocked records a failed fsync: the journal is failed for good
// (it needs a reopen), so nothing more becomes durable, released or
// acknowledged. Logged once, counted every time.
func (n *Node) syncFailedLocked(err error) {
	n.stats.SyncErrors++
	if n.stats.SyncErrors == 1 {
		n.cfg.Log.Error("journal sync failed; nothing more becomes durable: restart the node once the disk is fixed", "err", err)
	}
	// What the failed fsync covered is of unknown durability (the page
	// cache may have dropped it): the journal is broken as for a failed
	// write. A primary stops and gives its lease up (nothing it holds can
	// be released any more); a standby will not be promoted.
	if n.st.Break() && n.rep.Roles().Primary() {
		n.rep.Leader().JournalFailed()
		n.giveUpLease("the journal's fsync failed")
	}
}

// syncedLocked runs what follows an fsync: the agent calls it when it
// sees the durable watermark the fsync thread published move, SyncStep
// after its own sync.
func (n *Node) syncedLocked(now int64) {
	n.commit.Seen()
	n.onDurable(now)
}
