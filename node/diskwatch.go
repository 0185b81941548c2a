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
// durable (leaseTick's WantLead). Then the journal's next segment is
// checked (storage.Storage.WatchSpare).
func (n *Node) watchDisk(now int64) {
	_, written := n.j.Last()
	durable := n.j.Durable()
	switch n.rep.Disk().Observe(written, durable, now) {
	case replica.DiskStalled:
		n.stats.DiskStalls++
		n.cfg.Log.Error("DISK STALLED: nothing written became durable for --disk-stall-after (the in-sync timeout unless set); this node does not lead until its disk catches up",
			"waited", time.Duration(n.rep.Disk().WaitedNs(now)), "written", written, "durable", durable, "primary", n.rep.Roles().Primary())
		n.giveUpLease("the disk stalled")
	case replica.DiskRecovered:
		n.cfg.Log.Info("disk making writes durable again; may lead", "written", written, "durable", durable)
	}
	n.st.WatchSpare(now)
}
