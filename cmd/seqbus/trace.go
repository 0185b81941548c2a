package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/stagetrace"
)

// stateMachineFlag turns --engine into the node's state machine.
func stateMachineFlag(name string) (func() (engine.StateMachine, error), error) {
	switch name {
	case "matching":
		return func() (engine.StateMachine, error) { return engine.New(engineConfig()) }, nil
	case "none":
		return func() (engine.StateMachine, error) { return &engine.Nop{}, nil }, nil
	}
	return nil, fmt.Errorf("--engine: want matching or none, got %q", name)
}

// traceStagesFlag checks --trace-stages.
func traceStagesFlag(n int) (int, error) {
	if n < 0 || n > stagetrace.RowsMax {
		return 0, fmt.Errorf("--trace-stages: want 0..%d, got %d", stagetrace.RowsMax, n)
	}
	return n, nil
}

const traceWindowUsage = "FROM-TO: client order ids of the measured commands (seqbus bench); the trace also reports the allocations and socket calls between the process's first handling of FROM and its last of TO"

// traceWindowFlag checks --trace-window (it needs --trace-stages).
func traceWindowFlag(s string, traceStages int) error {
	if s == "" {
		return nil
	}
	if _, err := stagetrace.ParseWindow(s, nil); err != nil {
		return fmt.Errorf("--trace-window: %w", err)
	}
	if traceStages == 0 {
		return fmt.Errorf("--trace-window needs --trace-stages")
	}
	return nil
}

// clientTrace records each answered command's intended, sent and received
// times (client.Result, CLOCK_MONOTONIC) by client order id, for `seqbus
// bench` (an unanswered command leaves no row: the client's JSON counts
// those). record runs in Load's result callback: an index store, no
// allocation.
type clientTrace struct {
	rec                      *stagetrace.Recorder
	intended, sent, received int
	mallocs0                 uint64
	// window (--trace-window) opens at the first measured answer and
	// closes at the answer to the last measured command.
	window *stagetrace.Window
}

// newClientTrace records rows commands; window is --trace-window ("":
// none) over cl's socket calls.
func newClientTrace(rows int, window string, cl *client.Client) (*clientTrace, error) {
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
	return &clientTrace{rec: rec, intended: rec.Column(stagetrace.ColIntended), sent: rec.Column(stagetrace.ColSent),
		received: rec.Column(stagetrace.ColReceived), mallocs0: ms.Mallocs, window: w}, nil
}

func (t *clientTrace) record(r client.Result) {
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

// write writes the trace with the client's own counters: mallocs since
// newClientTrace, send and receive calls that moved data.
func (t *clientTrace) write(path string, session uint64, sent uint64, c bus.Counters) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := stagetrace.Header{Role: stagetrace.RoleClient, ID: uint32(session), Pid: uint32(os.Getpid()),
		Mallocs: ms.Mallocs - t.mallocs0, Syscalls: batchCalls(c), Commands: sent, GOMAXPROCS: uint32(runtime.GOMAXPROCS(0))}
	t.window.Fill(&h)
	return t.rec.WriteFile(path, h)
}
