package loadclient

import (
	"context"
	"fmt"
	"io"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
)

// RunConfig is one load of `seqbus client`.
type RunConfig struct {
	Load client.LoadConfig
	// TraceStages > 0 records the first TraceStages answers' times and
	// writes them to TraceFile at the end, with Session in the header;
	// TraceWindow is the measured window ("" for none).
	TraceStages            int
	TraceWindow, TraceFile string
	Session                uint64
	// Progress, when not nil, receives a line a second while the load
	// runs (StartProgress).
	Progress io.Writer
}

// RunResult is what Run measured.
type RunResult struct {
	Summary cluster.ClientSummary
	Report  client.LoadReport
	// LoadErr is client.Load's error (the summary is valid with it).
	LoadErr error
}

// Run runs the load on cl with the latency histogram, the progress line
// and the stage trace (when asked) fed from its result callback, and
// summarizes it. The error is the trace's: not creatable (no result), or
// not written (the result without its summary). The load's own error is
// RunResult.LoadErr.
func Run(ctx context.Context, cl *client.Client, cfg RunConfig) (*RunResult, error) {
	lat := NewLatency()
	var trace *Trace
	if cfg.TraceStages > 0 {
		var err error
		if trace, err = NewTrace(cfg.TraceStages, cfg.TraceWindow, cl); err != nil {
			return nil, err
		}
	}
	stopProgress := StartProgress(cfg.Progress, cfg.Progress != nil, cl, lat)
	rep, loadErr := cl.Load(ctx, cfg.Load, func(r client.Result) {
		lat.Record(r)
		if trace != nil {
			trace.Record(r)
		}
	})
	lat.Flush()
	stopProgress()
	res := &RunResult{Report: rep, LoadErr: loadErr}
	if trace != nil {
		if err := trace.Write(cfg.TraceFile, cfg.Session, rep.Sent, cl.Counters()); err != nil {
			return res, fmt.Errorf("--trace-file: %w", err)
		}
	}
	res.Summary = Summarize(rep, cl.Failovers(), lat)
	return res, nil
}
