package main

import (
	"context"
	"os"

	"github.com/seqbus/seqbus/internal/cluster"
)

// The benchmarks' process harness is internal/cluster's (RunBench): the
// witness, the primary, the standbys and the load client run as separate
// processes of this binary, each optionally pinned to CPUs.
type (
	layout        = cluster.Layout
	clusterConfig = cluster.BenchConfig
	clusterResult = cluster.BenchResult
	processInfo   = cluster.ProcessInfo
)

func parseLayout(s string) (layout, error) { return cluster.ParseLayout(s) }

func cpuText(cpus []int) string { return cluster.CPUText(cpus) }

// runCluster runs one benchmark cluster of this binary.
func runCluster(ctx context.Context, cfg clusterConfig) (*clusterResult, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return cluster.RunBench(ctx, bin, cfg)
}
