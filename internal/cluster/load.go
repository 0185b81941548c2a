package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
)

// Load is a client of this process running a paced load in the
// background: the demo's and the drills' client. Its Recorder (when
// Options.Recorder is set) keeps every output received with the node and
// epoch of the frame that carried it, for the verifier.
type Load struct {
	Client *client.Client
	done   chan struct{}
	report client.LoadReport
	err    error

	mu         sync.Mutex
	hist       *hdrhistogram.Histogram // round trips, µs
	interval   *hdrhistogram.Histogram // the same since the last IntervalLatency
	acked      map[uint64]bool
	lastAnswer time.Time
	gap        Silence // the longest silence between two answers
	// markAt and windowGap: the longest silence since MarkWindow,
	// counted from markAt when it began before.
	markAt    time.Time
	windowGap Silence
}

// Silence is a stretch without answers: From is the answer before it,
// To the one that ended it (a failover's outage as the client saw it).
type Silence struct{ From, To time.Time }

// Len is how long the silence lasted.
func (s Silence) Len() time.Duration { return s.To.Sub(s.From) }

// StartLoad dials a client with opts and runs cfg's load on it until
// the load ends or ctx does.
func StartLoad(ctx context.Context, opts client.Options, cfg client.LoadConfig) (*Load, error) {
	cl, err := client.Dial(opts)
	if err != nil {
		return nil, err
	}
	l := &Load{Client: cl, done: make(chan struct{}), acked: map[uint64]bool{},
		hist:     hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
		interval: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
	go func() {
		defer close(l.done)
		rep, err := cl.Load(ctx, cfg, l.result)
		l.mu.Lock()
		l.report, l.err = rep, err
		l.mu.Unlock()
	}()
	return l, nil
}

func (l *Load) result(r client.Result) { l.note(r, time.Now()) }

// note counts r, answered at now.
func (l *Load) note(r client.Result, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	us := max(r.LatencyNs/1000, 1)
	_ = l.hist.RecordValue(us)
	_ = l.interval.RecordValue(us)
	if r.Kind == engine.KindAck {
		l.acked[r.ClientOrderID] = true
	}
	if !l.lastAnswer.IsZero() && now.Sub(l.lastAnswer) > l.gap.Len() {
		l.gap = Silence{From: l.lastAnswer, To: now}
	}
	if !l.markAt.IsZero() && !l.lastAnswer.IsZero() {
		if from := later(l.lastAnswer, l.markAt); now.Sub(from) > l.windowGap.Len() {
			l.windowGap = Silence{From: from, To: now}
		}
	}
	l.lastAnswer = now
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// MarkWindow starts a window (a fault's): WindowSilence is then the
// longest silence between answers since now.
func (l *Load) MarkWindow() { l.markWindow(time.Now()) }

func (l *Load) markWindow(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.markAt, l.windowGap = at, Silence{}
}

// WindowSilence is the longest silence since MarkWindow that an answer
// has ended (counted from the mark when it began before): what a fault
// cost the client, read once answers flow again.
func (l *Load) WindowSilence() Silence {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.windowGap
}

// Done is closed when the load has ended.
func (l *Load) Done() <-chan struct{} { return l.done }

// Result is the load's report and error; valid once Done is closed.
func (l *Load) Result() (client.LoadReport, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.report, l.err
}

// Acked is how many distinct orders the client saw acknowledged.
func (l *Load) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// LongestSilence is the longest time between two consecutive answers so
// far, with the answers on either side (zero before two answers).
func (l *Load) LongestSilence() Silence {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gap
}

// Latency is the round trip (from the intended send time) at quantile q
// (0..100); q > 100 gives the maximum.
func (l *Load) Latency(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q > 100 {
		return time.Duration(l.hist.Max()) * time.Microsecond
	}
	return time.Duration(l.hist.ValueAtQuantile(q)) * time.Microsecond
}

// IntervalLatency is the round trip at quantile q (0..100) of the answers
// since the previous call and how many they were (0 and 0 when none
// arrived), and starts a new interval: a progress line's steady state,
// which the whole run's percentiles (Latency) hide behind the start and
// a failover. Both come from one read, so a line never counts answers
// its quantile does not cover.
func (l *Load) IntervalLatency(q float64) (p time.Duration, answers int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, n := l.interval.ValueAtQuantile(q), l.interval.TotalCount()
	l.interval.Reset()
	return time.Duration(v) * time.Microsecond, n
}

// Stop closes the client and waits up to timeout for the load to end.
func (l *Load) Stop(timeout time.Duration) {
	l.Client.Close()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}
