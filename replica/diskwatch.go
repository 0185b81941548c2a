package replica

// DiskWatch tells when a node's disk has stopped making what the node
// wrote durable. A device that stops completing writes (a SAN path
// failover, a cloud volume's I/O hang) fails nothing: writes still land
// in the page cache and an fsync on its own thread just does not return.
// A primary then renews its lease on and releases nothing, and the market
// halts for as long as the disk hangs. Past TimeoutNs of no durable
// progress while something written waits, the disk is stalled: a primary
// gives its lease up so a standby whose disk works leads (as a standby
// whose acks stop leaves the in-sync set after the same timeout), and
// neither role asks for the lease until the disk has caught up.
//
// Only time the node itself ran counts: a gap between two observations
// longer than a quarter of the timeout (the process was paused, its VM
// descheduled, its agent blocked) restarts the wait, since the fsync
// thread did not run either. Without that, a primary paused for less than
// its lease with an fsync in flight would take itself for stalled when it
// resumed, before its fsync thread got a chance, and give a lease up for
// nothing.
//
// Pure: the runtime feeds it the journal's watermarks and its clock.
type DiskWatch struct {
	timeoutNs int64
	// waitSinceNs: since when durable has not moved while behind what
	// was written (waiting; not: caught up). lastNs: the last Observe
	// (seen: there was one).
	waitSinceNs, lastNs    int64
	durable                uint64
	waiting, stalled, seen bool
}

// DiskEvent is what an Observe found.
type DiskEvent uint8

const (
	// DiskSteady: nothing changed.
	DiskSteady DiskEvent = iota
	// DiskStalled: nothing written became durable for the timeout while
	// something waited (reported once per stall).
	DiskStalled
	// DiskRecovered: a stalled disk made something durable again.
	DiskRecovered
)

var diskEventNames = [...]string{"steady", "stalled", "recovered"}

func (e DiskEvent) String() string {
	if int(e) < len(diskEventNames) {
		return diskEventNames[e]
	}
	return "disk-event?"
}

// NewDiskWatch watches with timeoutNs (> 0: the node's disk-stall bound,
// the in-sync timeout unless set).
func NewDiskWatch(timeoutNs int64) DiskWatch { return DiskWatch{timeoutNs: timeoutNs} }

// Observe takes the journal's written and durable watermarks at nowNs.
// Durable progress restarts the wait; a stalled disk recovers at its
// first progress. Watermarks below the last ones (the journal was cut
// back: a reconciliation, a snapshot installed) start the watch over.
func (w *DiskWatch) Observe(written, durable uint64, nowNs int64) DiskEvent {
	if durable < w.durable {
		w.durable, w.waiting = durable, false
	}
	progress := durable > w.durable
	w.durable = durable
	gap := w.seen && nowNs-w.lastNs > w.timeoutNs/4
	w.seen, w.lastNs = true, nowNs
	switch {
	case durable >= written:
		w.waiting = false
	case progress || !w.waiting || gap:
		w.waiting, w.waitSinceNs = true, nowNs
	}
	if w.stalled && progress {
		w.stalled = false
		return DiskRecovered
	}
	if !w.stalled && w.waiting && nowNs-w.waitSinceNs >= w.timeoutNs {
		w.stalled = true
		return DiskStalled
	}
	return DiskSteady
}

// Stalled reports whether the disk is stalled: the node must not ask for
// the lease (WantLead).
func (w *DiskWatch) Stalled() bool { return w.stalled }

// WaitedNs is how long the disk has made nothing durable while something
// waited, at nowNs (0: nothing waits).
func (w *DiskWatch) WaitedNs(nowNs int64) int64 {
	if !w.waiting {
		return 0
	}
	return nowNs - w.waitSinceNs
}
