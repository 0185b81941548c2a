package node

import "github.com/seqbus/seqbus/status"

// MetricsSnapshot returns the status and the latency histogram, read
// together under the node's lock, as Status() does. It is meant for a
// scrape (every few seconds): it walks the histogram's buckets, and adds
// nothing to the path of a command.
func (n *Node) MetricsSnapshot(boundsUs []float64) (status.Status, status.LatencyBuckets) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.statusLocked()
	return st, status.BucketsOf(n.rel.hist, boundsUs)
}
