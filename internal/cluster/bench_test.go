package cluster

import (
	"slices"
	"strings"
	"testing"
)

// A run's datagram size reaches the load client's flags (and, through
// datagramArgs, every node's); the default adds no flag, so the
// processes keep their own default.
func TestBenchDatagramArgs(t *testing.T) {
	jumbo := BenchConfig{DatagramBytes: 8972, GeneratorCoalesceNs: 100_000}
	args := LoadArgs(jumbo)
	if i := slices.Index(args, "--datagram-bytes"); i < 0 || i+1 >= len(args) || args[i+1] != "8972" {
		t.Fatalf("load args %q lack --datagram-bytes 8972", args)
	}
	if got := strings.Join(datagramArgs(jumbo), " "); got != "--datagram-bytes 8972" {
		t.Fatalf("node args %q, want --datagram-bytes 8972", got)
	}
	if args := LoadArgs(BenchConfig{}); slices.Contains(args, "--datagram-bytes") || datagramArgs(BenchConfig{}) != nil {
		t.Fatalf("default run passes a datagram size: %q", args)
	}
}

// A run's client window reaches the load client's flags; the default
// (0) adds none, so the client keeps its own (the engine's dedup window).
func TestBenchMaxInFlightArgs(t *testing.T) {
	args := LoadArgs(BenchConfig{MaxInFlight: 8192})
	if i := slices.Index(args, "--max-in-flight"); i < 0 || i+1 >= len(args) || args[i+1] != "8192" {
		t.Fatalf("load args %q lack --max-in-flight 8192", args)
	}
	if args := LoadArgs(BenchConfig{}); slices.Contains(args, "--max-in-flight") {
		t.Fatalf("default run passes a window: %q", args)
	}
}
