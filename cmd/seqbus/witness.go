package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/serve"
	"github.com/seqbus/seqbus/witness"
)

func runWitness(args []string) error {
	if len(args) > 0 && args[0] == "override" {
		return runWitnessOverride(args[1:])
	}
	fs := flag.NewFlagSet("witness", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7000", "UDP address to serve the lease protocol on")
	dir := fs.String("dir", "", "state directory (the highest epoch is persisted here)")
	lease := fs.Duration("lease", time.Duration(arbiter.DefaultLeaseDurationNs), "lease duration (must match the nodes)")
	keyFile := fs.String("key", "", "master key file (seqbus keygen): authenticate the lease protocol")
	nodesFlag := fs.String("nodes", "", "with --key: the node ids it serves, e.g. 1,2")
	stream := fs.Uint("stream", 1, "stream id (with --key: the keys are per stream)")
	metricsAddrFlag := fs.String("metrics-addr", "", flagcheck.MetricsAddrUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkAddr("listen", *listen, false), checkRequired("dir", *dir), checkPositive("lease", *lease),
		checkStream(*stream), checkNodes(*nodesFlag),
	); err != nil {
		return err
	}
	metricsAddr, err := flagcheck.MetricsAddr(*metricsAddrFlag)
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
	if _, err := parseIDs(v); err != nil {
		return usagef("--nodes: %v (want ids 1..4294967295, e.g. 1,2)", err)
	}
	return nil
}

// runWitnessOverride is `seqbus witness override`: the operator's way out
// when no node may be promoted, on a stopped witness's directory
// (witness.ApplyOverride; docs/witness.md).
func runWitnessOverride(args []string) error {
	fs := flag.NewFlagSet("witness override", flag.ContinueOnError)
	dir := fs.String("dir", "", "the stopped witness's state directory")
	allow := fs.String("allow", "", "the nodes that may be promoted next, e.g. 2 or 2,3 (the in-sync set; needs a readable record)")
	epoch := fs.Uint64("epoch", 0, "instead of --allow, for a corrupt or lost record: rewrite it at this epoch, above every epoch any node or journal used; then any node may acquire")
	accept := fs.Bool("accept-loss", false, "required to write: output only the lost primary released is lost")
	dry := fs.Bool("dry-run", false, "show the record before and after; write nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := parseIDs(*allow)
	if err := firstError(checkRequired("dir", *dir), asUsage(prefixed("allow", err)), flagcheck.Either("allow", *allow != "", "epoch", *epoch != 0),
		flagcheck.Confirmed("accept-loss", *accept || *dry, "output only the lost primary released is lost")); err != nil {
		return err
	}
	o := witness.Override{Epoch: *epoch, DryRun: *dry}
	for _, id := range ids {
		o.Allow = append(o.Allow, arbiter.NodeID(id))
	}
	res, err := witness.ApplyOverride(*dir, o)
	if err == nil {
		fmt.Print(res.Report())
	}
	return err
}
