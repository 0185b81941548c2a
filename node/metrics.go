package node

import "github.com/seqbus/seqbus/status"

// MetricsSnapshot returns the status and the latency histogram, as
// Status() does: copied under the node's lock, the histogram's buckets
// walked off it (status.Latency), so a scrape holds the agent up for the
// copy's few µs, not for the walk's ~100 µs. The buckets cover what was
// recorded up to the copy (or up to the agent's status copy after it).
func (n *Node) MetricsSnapshot(boundsUs []float64) (status.Status, status.LatencyBuckets) {
	st := n.Status()
	return st, n.rel.lat.Buckets(boundsUs)
}
