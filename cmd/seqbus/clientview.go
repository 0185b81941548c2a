package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/client"
)

// clientLatency is the client's latency histogram, shared by the result
// callback and the progress line.
type clientLatency struct {
	mu    sync.Mutex
	hist  *hdrhistogram.Histogram
	epoch atomic.Uint64 // of the latest answer's OUTPUT frame
}

func newClientLatency() *clientLatency {
	return &clientLatency{hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
}

// record adds one answer (called from the client's result callback).
func (l *clientLatency) record(r client.Result) {
	l.mu.Lock()
	_ = l.hist.RecordValue(max(r.LatencyNs/1000, 1))
	l.mu.Unlock()
	if r.Epoch > l.epoch.Load() {
		l.epoch.Store(r.Epoch)
	}
}

func (l *clientLatency) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.hist.ValueAtQuantile(q)) * time.Microsecond
}

// startProgress prints one line a second to w while the load runs, when
// on is set (stdout is a terminal): sent, answered, in flight, resent, the
// primary and epoch, p50 and p99 so far. It returns a function that stops
// it.
func startProgress(w io.Writer, on bool, cl *client.Client, lat *clientLatency) func() {
	if !on {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	begin := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			st := cl.Stats()
			fmt.Fprintf(w, "%5.0fs  sent %-8d answered %-8d in flight %-5d resent %-6d primary %s epoch %d  p50 %v  p99 %v\n",
				time.Since(begin).Seconds(), st.Sent, st.Answered, cl.InFlight(), st.Resent, cl.Primary(), lat.epoch.Load(),
				lat.quantile(50).Round(time.Microsecond), lat.quantile(99).Round(time.Microsecond))
		}
	}()
	return func() { close(stop); <-done }
}

// printClientSummary writes the summary as a table.
func printClientSummary(w io.Writer, s *clientSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tsent\tanswered\tunanswered\tacks\trejects\tduplicates\tresent\texecutions\tfailovers\t\n")
	fmt.Fprintf(tw, "commands\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", s.Sent, s.Answered, s.Unanswered, s.Acks, s.Rejects, s.Duplicates, s.Resent, s.Executions, s.Failovers)
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d answered in %.2fs: %.0f/s\n\n", s.Answered, s.ElapsedSec, s.RatePerSec)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "latency (from intended send)\tp50\tp90\tp99\tp99.9\tp99.99\tmax\t\n")
	fmt.Fprintf(tw, "µs\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", s.LatencyUs["p50"], s.LatencyUs["p90"], s.LatencyUs["p99"], s.LatencyUs["p99.9"], s.LatencyUs["p99.99"], s.LatencyUs["p100"])
	_ = tw.Flush()
}
