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

// clientTrace records each answered command's intended, sent and received
// times (client.Result, CLOCK_MONOTONIC) by client order id, for `seqbus
// bench` (an unanswered command leaves no row: the client's JSON counts
// those). record runs in Load's result callback: an index store, no
// allocation.
type clientTrace struct {
	rec                      *stagetrace.Recorder
	intended, sent, received int
	mallocs0                 uint64
}

func newClientTrace(rows int) (*clientTrace, error) {
	rec, err := stagetrace.NewRecorder(rows, stagetrace.ColIntended, stagetrace.ColSent, stagetrace.ColReceived)
	if err != nil {
		return nil, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &clientTrace{rec: rec, intended: rec.Column(stagetrace.ColIntended), sent: rec.Column(stagetrace.ColSent),
		received: rec.Column(stagetrace.ColReceived), mallocs0: ms.Mallocs}, nil
}

func (t *clientTrace) record(r client.Result) {
	t.rec.Set(t.intended, r.ClientOrderID, r.IntendedNs)
	t.rec.Set(t.sent, r.ClientOrderID, r.SentNs)
	t.rec.Set(t.received, r.ClientOrderID, r.ReceivedNs)
}

// write writes the trace with the client's own counters: mallocs since
// newClientTrace, send and receive calls that moved data.
func (t *clientTrace) write(path string, session uint64, sent uint64, c bus.Counters) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var syscalls uint64
	for i := range c.SendBatches {
		syscalls += c.SendBatches[i] + c.ReceiveBatches[i]
	}
	return t.rec.WriteFile(path, stagetrace.Header{Role: stagetrace.RoleClient, ID: uint32(session), Pid: uint32(os.Getpid()),
		Mallocs: ms.Mallocs - t.mallocs0, Syscalls: syscalls, Commands: sent, GOMAXPROCS: uint32(runtime.GOMAXPROCS(0))})
}
