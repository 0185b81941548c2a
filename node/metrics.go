package node

import "github.com/seqbus/seqbus/status"

// LatencyBuckets is the assign -> release latency histogram (the one
// status.json's latency_us percentiles come from) cut at caller-given
// upper bounds, for an exporter such as Prometheus.
type LatencyBuckets struct {
	BoundsUs []float64 // ascending upper bounds, µs
	// Cumulative[i] counts releases of at most BoundsUs[i] µs (within the
	// histogram's 1% precision).
	Cumulative []uint64
	Count      uint64
	SumUs      float64 // count × mean: the histogram keeps no exact sum
}

// MetricsSnapshot returns the status and the latency histogram, read
// together under the node's lock, as Status() does. It is meant for a
// scrape (every few seconds): it walks the histogram's buckets, and adds
// nothing to the path of a command.
func (n *Node) MetricsSnapshot(boundsUs []float64) (status.Status, LatencyBuckets) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.statusLocked()
	lb := LatencyBuckets{BoundsUs: boundsUs, Cumulative: make([]uint64, len(boundsUs))}
	h := n.rel.hist
	lb.Count = uint64(h.TotalCount())
	lb.SumUs = h.Mean() * float64(lb.Count)
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		for i, b := range boundsUs {
			if float64(bar.To) <= b {
				lb.Cumulative[i] += uint64(bar.Count)
			}
		}
	}
	return st, lb
}
