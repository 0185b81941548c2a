package main

import "github.com/seqbus/seqbus/internal/cluster"

// The benchmarks' process harness is internal/cluster's (RunBench, run
// by bench/suite): the witness, the primary, the standbys and the load
// client run as separate processes of this binary, each optionally
// pinned to CPUs.
type layout = cluster.Layout

func parseLayout(s string) (layout, error) { return cluster.ParseLayout(s) }
