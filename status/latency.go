package status

import (
	"sync"
	"sync/atomic"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency is a primary's assign -> release histogram, split so that
// neither the thread that records it nor the lock it records under ever
// waits for a reader. HdrHistogram's interval recorder in small:
//
//   - the recording side (the node's agent, under the node's lock) calls
//     RecordValue into the active interval, and Rotate at status cadence,
//     which hands the interval over and takes a cleared one: a pointer
//     swap, no walk of the buckets, no allocation;
//   - a reader (the status writer, a scrape, Status) folds what was
//     handed over into the cumulative histogram and reads percentiles
//     and buckets from it, under a lock of its own that the recording
//     side never takes.
//
// What a reader sees is everything recorded up to the last Rotate. When
// no reader folded the previous interval yet, Rotate keeps recording
// into the active one (nothing is lost; the next Rotate after a fold
// hands it all over). At most three histograms exist.
type Latency struct {
	active *hdrhistogram.Histogram // the recording side's

	handed atomic.Pointer[hdrhistogram.Histogram] // an interval to fold
	spare  atomic.Pointer[hdrhistogram.Histogram] // folded and cleared

	mu    sync.Mutex
	total *hdrhistogram.Histogram // guarded by mu
}

// NewLatency returns an empty histogram of µs from 1 to 10 s at two
// significant digits (1 %): small enough that a reader's walk of its
// buckets takes tens of µs.
func NewLatency() *Latency {
	l := &Latency{active: newLatencyHist(), total: newLatencyHist()}
	l.spare.Store(newLatencyHist())
	return l
}

func newLatencyHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 10_000_000, 2) }

// RecordValue records one latency in µs (replica.LatencyRecorder).
// Recording side only.
func (l *Latency) RecordValue(v int64) error { return l.active.RecordValue(v) }

// Rotate hands what was recorded since the last Rotate to the readers,
// if the previous hand-over was folded; otherwise it does nothing and
// recording goes on into the same interval. Recording side only.
func (l *Latency) Rotate() {
	if l.active.TotalCount() == 0 {
		return
	}
	next := l.spare.Swap(nil)
	if next == nil {
		return // a reader has not folded the last interval yet
	}
	// spare is stored only after handed was emptied (fold): nothing is
	// overwritten here.
	l.handed.Store(l.active)
	l.active = next
}

// fold adds the interval handed over, if any, to the total and returns
// it cleared as the spare. mu held.
func (l *Latency) fold() {
	h := l.handed.Swap(nil)
	if h == nil {
		return
	}
	l.total.Merge(h)
	h.Reset()
	l.spare.Store(h)
}

// Fill sets st.LatencyUs from everything handed over so far (nothing
// when nothing was recorded). Any goroutine but the recording side's.
func (l *Latency) Fill(st *Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fold()
	h := l.total
	if h.TotalCount() == 0 {
		return
	}
	st.LatencyUs = map[string]int64{
		"p50": h.ValueAtQuantile(50), "p99": h.ValueAtQuantile(99),
		"p99.9": h.ValueAtQuantile(99.9), "max": h.Max(), "count": h.TotalCount(),
	}
}

// Buckets is BucketsOf of everything handed over so far. Any goroutine
// but the recording side's.
func (l *Latency) Buckets(boundsUs []float64) LatencyBuckets {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fold()
	return BucketsOf(l.total, boundsUs)
}
