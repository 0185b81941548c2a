// Package loadclient is what `seqbus client` runs around client.Load:
// the latency histogram of the answers and the progress line, the stage
// trace `seqbus bench` reads (intended, sent and received times by
// client order id), the summary it prints or writes as JSON, and the
// etcd arbiter follower that points the client at a new lease holder.
package loadclient

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// Latency is the client's latency histogram, shared by the result
// callback and the progress line.
type Latency struct {
	mu    sync.Mutex
	hist  *hdrhistogram.Histogram
	epoch atomic.Uint64 // of the latest answer's OUTPUT frame
	// pend holds the writer's latest values (n of them), added to hist
	// under mu a batch at a time: a lock and unlock per answer was 7 %
	// of the load client's samples flat out. Only the writer (the
	// result callback's goroutine, then Run after the load) touches it.
	pend [latencyBatch]int64
	n    int
	// asked is set by a reader (Quantile): the writer's next Record
	// flushes what it holds, so a progress line at a low rate lags by
	// one answer after the read before it, not by latencyBatch answers.
	asked atomic.Bool
}

// latencyBatch is how many answers Record holds before it takes the
// lock, unless a reader asked since the last flush (Latency.asked).
const latencyBatch = 64

// NewLatency is an empty Latency (1 µs to a minute).
func NewLatency() *Latency {
	return &Latency{hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
}

// Record adds one answer (called from the client's result callback, the
// one writer); Flush adds what it holds back.
func (l *Latency) Record(r client.Result) {
	l.pend[l.n] = max(r.LatencyNs/1000, 1)
	if l.n++; l.n == len(l.pend) || l.asked.Load() {
		l.Flush()
	}
	if r.Epoch > l.epoch.Load() {
		l.epoch.Store(r.Epoch)
	}
}

// Flush adds the answers Record holds back to the histogram: the
// writer's call, after its last Record.
func (l *Latency) Flush() {
	l.asked.Store(false)
	l.mu.Lock()
	for _, v := range l.pend[:l.n] {
		_ = l.hist.RecordValue(v)
	}
	l.mu.Unlock()
	l.n = 0
}

// Epoch is the epoch of the latest answer's OUTPUT frame.
func (l *Latency) Epoch() uint64 { return l.epoch.Load() }

// Quantile is the latency at quantile q (0..100), to the µs, over the
// answers flushed so far (Flush; every answer once the writer flushed
// after its last). It asks the writer to flush at its next Record.
func (l *Latency) Quantile(q float64) time.Duration {
	l.asked.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.hist.ValueAtQuantile(q)) * time.Microsecond
}

// StartProgress prints one line a second to w while the load runs, when
// on is set (stdout is a terminal): sent, answered, in flight, resent, the
// primary and epoch, p50 and p99 so far. It returns a function that stops
// it.
func StartProgress(w io.Writer, on bool, cl *client.Client, lat *Latency) func() {
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
				lat.Quantile(50).Round(time.Microsecond), lat.Quantile(99).Round(time.Microsecond))
		}
	}()
	return func() { close(stop); <-done }
}

// WriteSummary writes the summary as a table.
func WriteSummary(w io.Writer, s *cluster.ClientSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tsent\tanswered\tunanswered\tacks\trejects\tduplicates\tresent\texecutions\tfailovers\t\n")
	fmt.Fprintf(tw, "commands\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", s.Sent, s.Answered, s.Unanswered, s.Acks, s.Rejects, s.Duplicates, s.Resent, s.Executions, s.Failovers)
	_ = tw.Flush()
	if s.StaleRefused > 0 {
		fmt.Fprintf(w, "refused %d frames of a deposed primary (an epoch older than one seen)\n", s.StaleRefused)
	}
	if s.Duplicates > s.Resent {
		// A resend's answer may be a duplicate; more duplicates than
		// resends are commands whose (session, order id) was used before.
		fmt.Fprintf(w, "%d answers were to commands this session sent before this run, or another client sent: give each client, and each run, its own --session\n", s.Duplicates-s.Resent)
	}
	fmt.Fprintf(w, "\n%d answered in %.2fs: %.0f/s\n\n", s.Answered, s.ElapsedSec, s.RatePerSec)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "latency (from intended send)\tp50\tp90\tp99\tp99.9\tp99.99\tmax\t\n")
	fmt.Fprintf(tw, "µs\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", s.LatencyUs["p50"], s.LatencyUs["p90"], s.LatencyUs["p99"], s.LatencyUs["p99.9"], s.LatencyUs["p99.99"], s.LatencyUs["p100"])
	_ = tw.Flush()
}

// Summarize is the load's report as `seqbus client --json` writes it.
func Summarize(rep client.LoadReport, failovers uint64, lat *Latency) cluster.ClientSummary {
	st := rep.Stats
	sum := cluster.ClientSummary{
		Sent: rep.Sent, Answered: st.Answered, Acks: st.Acks, Rejects: st.Rejects, Duplicates: st.Duplicates,
		Resent: st.Resent, Unanswered: rep.Sent - st.Answered, Executions: st.Executions, Failovers: failovers, StaleRefused: st.StaleEpoch,
		ElapsedSec: rep.Elapsed.Seconds(), RatePerSec: float64(st.Answered) / max(rep.Elapsed.Seconds(), 1e-9),
		LatencyUs: map[string]float64{},
	}
	sum.SentLate10us, sum.IntendedToSentUs = rep.Pace.Late10us, map[string]float64{}
	for _, q := range []float64{50, 90, 99, 99.9, 99.99, 100} {
		if rep.IntendedToSent != nil {
			sum.IntendedToSentUs[fmt.Sprintf("p%g", q)] = float64(rep.IntendedToSent.ValueAtQuantile(q)) / 1000
		}
		sum.LatencyUs[fmt.Sprintf("p%g", q)] = float64(lat.Quantile(q) / time.Microsecond)
	}
	return sum
}

// Trace records each answered command's intended, sent and received
// times (client.Result, CLOCK_MONOTONIC) by client order id, for `seqbus
// bench` (an unanswered command leaves no row: the client's JSON counts
// those). record runs in Load's result callback: an index store, no
// allocation.
type Trace struct {
	rec                      *stagetrace.Recorder
	intended, sent, received int
	mallocs0                 uint64
	// window (--trace-window) opens at the first measured answer and
	// closes at the answer to the last measured command.
	window *stagetrace.Window
}

// NewTrace records rows commands; window is --trace-window ("":
// none) over cl's socket calls.
func NewTrace(rows int, window string, cl *client.Client) (*Trace, error) {
	rec, err := stagetrace.NewRecorder(rows, stagetrace.ColIntended, stagetrace.ColSent, stagetrace.ColReceived)
	if err != nil {
		return nil, err
	}
	w, err := stagetrace.ParseWindow(window, func() uint64 { return batchCalls(cl.Counters()) })
	if err != nil {
		return nil, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &Trace{rec: rec, intended: rec.Column(stagetrace.ColIntended), sent: rec.Column(stagetrace.ColSent),
		received: rec.Column(stagetrace.ColReceived), mallocs0: ms.Mallocs, window: w}, nil
}

// Record stores one answer's times (Load's result callback).
func (t *Trace) Record(r client.Result) {
	t.rec.Set(t.intended, r.ClientOrderID, r.IntendedNs)
	t.rec.Set(t.sent, r.ClientOrderID, r.SentNs)
	t.rec.Set(t.received, r.ClientOrderID, r.ReceivedNs)
	t.window.Handled(r.ClientOrderID)
}

// batchCalls is the send and receive calls that moved data.
func batchCalls(c bus.Counters) uint64 {
	var n uint64
	for i := range c.SendBatches {
		n += c.SendBatches[i] + c.ReceiveBatches[i]
	}
	return n
}

// Write writes the trace with the client's own counters: mallocs since
// NewTrace, send and receive calls that moved data.
func (t *Trace) Write(path string, session uint64, sent uint64, c bus.Counters) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := stagetrace.Header{Role: stagetrace.RoleClient, ID: uint32(session), Pid: uint32(os.Getpid()),
		Mallocs: ms.Mallocs - t.mallocs0, Syscalls: batchCalls(c), Commands: sent, GOMAXPROCS: uint32(runtime.GOMAXPROCS(0))}
	t.window.Fill(&h)
	return t.rec.WriteFile(path, h)
}
