package main

import (
	"fmt"

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
