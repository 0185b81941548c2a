package main

import (
	"flag"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/serve"
	"github.com/seqbus/seqbus/witness"
)

func runWitness(args []string) error {
	fs := flag.NewFlagSet("witness", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7000", "UDP address to serve the lease protocol on")
	dir := fs.String("dir", "", "state directory (the highest epoch is persisted here)")
	lease := fs.Duration("lease", time.Duration(arbiter.DefaultLeaseDurationNs), "lease duration (must match the nodes)")
	keyFile := fs.String("key", "", "master key file (seqbus keygen): authenticate the lease protocol")
	nodesFlag := fs.String("nodes", "", "with --key: the node ids it serves, e.g. 1,2")
	stream := fs.Uint("stream", 1, "stream id (with --key: the keys are per stream)")
	metricsAddrFlag := fs.String("metrics-addr", "", metricsAddrUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkAddr("listen", *listen, false), checkRequired("dir", *dir), checkPositive("lease", *lease),
		checkStream(*stream), checkNodes(*nodesFlag),
	); err != nil {
		return err
	}
	metricsAddr, err := parseMetricsAddr(*metricsAddrFlag)
	if err != nil {
		return err
	}
	addr, _ := netip.ParseAddrPort(*listen) // checked above
	cfg := witness.DefaultConfig()
	cfg.Arbiter.LeaseDurationNs, cfg.Stream = int64(*lease), uint16(*stream)
	if cfg.Key, err = loadKey(*keyFile); err != nil {
		return asUsage(err)
	}
	if cfg.Key != nil {
		if *nodesFlag == "" {
			return usagef("--key needs --nodes (the node ids it holds keys for)")
		}
		cfg.Nodes, _ = parseIDs(*nodesFlag) // checked above
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("witness", addr.String())
	return serve.Witness(cfg, addr, *dir, metricsAddr, *lease, waitSignal)
}

// checkNodes: --nodes, when given, is a list of node ids.
func checkNodes(v string) error {
	if v == "" {
		return nil
	}
	if _, err := parseIDs(v); err != nil {
		return usagef("--nodes: %v (want ids 1..4294967295, e.g. 1,2)", err)
	}
	return nil
}
