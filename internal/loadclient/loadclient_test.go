package loadclient

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// TestSummarize: the counts, the rate over the elapsed time and both sets
// of percentiles (answers in µs, the generator's lateness from ns).
func TestSummarize(t *testing.T) {
	lat := NewLatency()
	for _, us := range []int64{100, 200, 300, 400} {
		lat.Record(client.Result{LatencyNs: us * 1000, Epoch: 2})
	}
	lat.Flush()
	late := hdrhistogram.New(1, 1e9, 3)
	_ = late.RecordValue(5_000)
	rep := client.LoadReport{Sent: 5, Elapsed: 2 * time.Second, IntendedToSent: late,
		Stats: client.Stats{Answered: 4, Acks: 3, Rejects: 1, Resent: 2, Executions: 1}}
	rep.Pace.Late10us = 1
	s := Summarize(rep, 1, lat)
	if s.Sent != 5 || s.Answered != 4 || s.Unanswered != 1 || s.Acks != 3 || s.Rejects != 1 || s.Resent != 2 || s.Failovers != 1 || s.SentLate10us != 1 {
		t.Fatalf("counts %+v", s)
	}
	if s.RatePerSec != 2 || s.ElapsedSec != 2 {
		t.Fatalf("rate %v over %v s", s.RatePerSec, s.ElapsedSec)
	}
	if s.LatencyUs["p50"] != 200 || s.LatencyUs["p100"] != 400 || s.IntendedToSentUs["p99"] < 4.99 || s.IntendedToSentUs["p99"] > 5.01 {
		t.Fatalf("percentiles %v %v", s.LatencyUs, s.IntendedToSentUs)
	}
	if lat.Epoch() != 2 {
		t.Fatalf("epoch %d", lat.Epoch())
	}
}

// TestTrace: each answer's intended, sent and received times land in its
// client order id's row, and the header carries the session and counts.
func TestTrace(t *testing.T) {
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 7}, Primary: netip.MustParseAddrPort("127.0.0.1:9")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tr, err := NewTrace(4, "", cl)
	if err != nil {
		t.Fatal(err)
	}
	tr.Record(client.Result{ClientOrderID: 2, IntendedNs: 10, SentNs: 11, ReceivedNs: 30})
	tr.Record(client.Result{ClientOrderID: 3, IntendedNs: 20, SentNs: 25, ReceivedNs: 50})
	path := filepath.Join(t.TempDir(), "client.trace")
	if err := tr.Write(path, 7, 3, bus.Counters{}); err != nil {
		t.Fatal(err)
	}
	got, err := stagetrace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Role != stagetrace.RoleClient || got.ID != 7 || got.Commands != 3 || int(got.Pid) != os.Getpid() {
		t.Fatalf("header %+v", got.Header)
	}
	in, sent, recv := got.Col(stagetrace.ColIntended), got.Col(stagetrace.ColSent), got.Col(stagetrace.ColReceived)
	if len(in) < 4 || in[2] != 10 || sent[2] != 11 || recv[3] != 50 || in[3] != 20 {
		t.Fatalf("columns %v %v %v", in, sent, recv)
	}
}

// TestRun: the load's summary counts what was sent, and the trace is
// written with the session and the commands sent; a trace that cannot
// be written is the error, the load's report still returned.
func TestRun(t *testing.T) {
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 5}, Primary: netip.MustParseAddrPort("127.0.0.1:9")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	path := filepath.Join(t.TempDir(), "client.trace")
	cfg := RunConfig{Load: client.LoadConfig{Rate: 1000, Count: 3, Instruments: 1, Seed: 1, Drain: 50 * time.Millisecond},
		TraceStages: 8, TraceFile: path, Session: 5}
	res, err := Run(context.Background(), cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Sent != 3 || res.Summary.Answered != 0 || res.Summary.Unanswered != 3 {
		t.Fatalf("summary %+v", res.Summary)
	}
	tr, err := stagetrace.ReadFile(path)
	if err != nil || tr.ID != 5 || tr.Commands != 3 {
		t.Fatalf("trace %+v, %v", tr, err)
	}
	cfg.TraceFile = filepath.Join(t.TempDir(), "missing", "dir", "client.trace")
	res, err = Run(context.Background(), cl, cfg)
	if err == nil || !strings.HasPrefix(err.Error(), "--trace-file: ") || res == nil || res.Report.Sent != 3 {
		t.Fatalf("unwritable trace: %v, %+v", err, res)
	}
}

// TestLatencyFlush: Record holds answers back until it has latencyBatch
// of them or the writer flushes; then every one is in the histogram.
func TestLatencyFlush(t *testing.T) {
	lat := NewLatency()
	for i := range latencyBatch + 10 {
		lat.Record(client.Result{LatencyNs: int64(i+1) * 1000})
	}
	if got := lat.hist.TotalCount(); got != latencyBatch {
		t.Fatalf("before Flush: %d answers in the histogram, want %d", got, latencyBatch)
	}
	lat.Flush()
	if got := lat.hist.TotalCount(); got != latencyBatch+10 {
		t.Fatalf("after Flush: %d answers, want %d", got, latencyBatch+10)
	}
	if got := lat.Quantile(100); got != time.Duration(latencyBatch+10)*time.Microsecond {
		t.Fatalf("max %v", got)
	}
	// A read asks the writer to flush at its next answer: a progress
	// line at a low rate is not latencyBatch answers behind.
	lat.Record(client.Result{LatencyNs: 500_000})
	if got := lat.hist.TotalCount(); got != latencyBatch+11 {
		t.Fatalf("the answer after a read: %d answers in the histogram, want %d", got, latencyBatch+11)
	}
	lat.Record(client.Result{LatencyNs: 1000})
	if got := lat.hist.TotalCount(); got != latencyBatch+11 {
		t.Fatalf("with no read since: %d answers in the histogram, want %d held back", got, latencyBatch+11)
	}
}

// BenchmarkLatencyRecord is the load client's per-answer cost.
func BenchmarkLatencyRecord(b *testing.B) {
	lat := NewLatency()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		lat.Record(client.Result{LatencyNs: int64(i&1023+1) * 1000, Epoch: 1})
	}
	lat.Flush()
}

// More duplicate answers than resends: the session's order ids were used
// before (another client on it, an earlier run); the summary says so.
// Duplicates of resends alone (a failover) say nothing.
func TestSummarySaysSessionReused(t *testing.T) {
	for _, c := range []struct {
		dup, resent uint64
		want        bool
	}{{1024, 0, true}, {5, 9, false}, {0, 0, false}} {
		var b strings.Builder
		WriteSummary(&b, &cluster.ClientSummary{Sent: 2000, Answered: 2000, Duplicates: c.dup, Resent: c.resent})
		if got := strings.Contains(b.String(), "its own --session"); got != c.want {
			t.Errorf("duplicates %d, resent %d: hint %v\n%s", c.dup, c.resent, got, b.String())
		}
	}
}
