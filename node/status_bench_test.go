package node

import (
	"math/rand/v2"
	"testing"

	"github.com/seqbus/seqbus/journal"
)

// primaryWithLatency is a driven primary whose latency histogram holds a
// million assign -> release latencies the shape a busy primary's are
// (tens of µs, a tail out to seconds).
func primaryWithLatency(b *testing.B) *Node {
	n, _ := drivenPrimary(b, journal.SyncNone)
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1_000_000 {
		v := int64(20 + r.ExpFloat64()*50)
		if i%1000 == 0 {
			v = r.Int64N(5_000_000)
		}
		_ = n.rel.lat.RecordValue(v)
	}
	b.ReportAllocs()
	return n
}

// BenchmarkStatusCopy is the agent's status copy, every 100 ms while a
// status file is written: what it holds the node's lock for, on the
// agent.
func BenchmarkStatusCopy(b *testing.B) {
	n := primaryWithLatency(b)
	for b.Loop() {
		n.mu.Lock()
		_ = n.statusLocked()
		n.mu.Unlock()
	}
}

// BenchmarkStatusFinish is the copy and then what the status writer
// does with it before it marshals it (finishStatus: the latency
// percentiles, the clock), off the node's lock.
func BenchmarkStatusFinish(b *testing.B) {
	n := primaryWithLatency(b)
	for b.Loop() {
		n.mu.Lock()
		st := n.statusLocked()
		n.mu.Unlock()
		n.finishStatus(&st)
	}
}

// BenchmarkMetricsScrape is a Prometheus scrape's read of the node
// (MetricsSnapshot): the copy under the lock, the walk off it.
func BenchmarkMetricsScrape(b *testing.B) {
	n := primaryWithLatency(b)
	bounds := []float64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1e6}
	for b.Loop() {
		_, _ = n.MetricsSnapshot(bounds)
	}
}
