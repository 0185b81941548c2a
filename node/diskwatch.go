package node

import (
	"time"

	"github.com/seqbus/seqbus/replica"
)

// watchDisk feeds the disk watch (replica.DiskWatch) at every tick, on
// either role: a disk that made nothing written durable for
// Config.DiskStallNs (the in-sync timeout unless set) is stalled. A
// primary gives its lease up at once, so a standby whose disk works
// leads instead of the market halting for as long as the disk hangs;
// neither role asks for the lease again until the disk makes something
// durable (leaseTick's WantLead).
func (n *Node) watchDisk(now int64) {
	_, written := n.j.Last()
	durable := n.j.Durable()
	switch n.disk.Observe(written, durable, now) {
	case replica.DiskStalled:
		n.stats.DiskStalls++
		n.cfg.Log.Error("DISK STALLED: nothing written became durable for --disk-stall-after (the in-sync timeout unless set); this node does not lead until its disk catches up",
			"waited", time.Duration(n.disk.WaitedNs(now)), "written", written, "durable", durable, "primary", n.tm.Primary())
		n.giveUpLease("the disk stalled")
	case replica.DiskRecovered:
		n.cfg.Log.Info("disk making writes durable again; may lead", "written", written, "durable", durable)
	}
	n.watchSpare(now)
}

// spareWatch is what the node last heard of the journal's next segment
// (journal.SpareError), for the warning's episodes and status.
type spareWatch struct {
	err  error
	room int64
}

// watchSpare warns, once an episode, when the journal cannot prepare
// its next segment ahead: the roll at the end of the current one then
// creates it itself, and on a full disk that roll fails the journal (a
// primary gives its lease up). The warning comes a segment of records
// early: time to free space before anything stops. A warning, not an
// error: nothing has failed yet (seqbus chaos counts a journal's ERROR
// lines as its failures).
func (n *Node) watchSpare(now int64) {
	room, err := n.j.SpareError(now)
	switch was := n.nextSeg.err; {
	case err != nil && was == nil:
		n.stats.SpareSegmentFailures++
		n.cfg.Log.Warn("JOURNAL CANNOT PREPARE ITS NEXT SEGMENT: free disk space; the journal fails when its current segment fills (a primary then gives its lease up)",
			"room_bytes", room, "err", err)
	case err == nil && was != nil:
		n.cfg.Log.Info("journal's next segment prepared again", "room_bytes", room)
	}
	n.nextSeg = spareWatch{err: err, room: room}
}
