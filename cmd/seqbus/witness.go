package main

import (
	"flag"
	"fmt"
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
	s := &serve.WitnessSettings{}
	fs.StringVar(&s.Listen, "listen", "127.0.0.1:7000", "UDP address to serve the lease protocol on")
	fs.StringVar(&s.Dir, "dir", "", "state directory (the highest epoch is persisted here)")
	fs.DurationVar(&s.Lease, "lease", time.Duration(arbiter.DefaultLeaseDurationNs), "lease duration (must match the nodes)")
	fs.StringVar(&s.KeyFile, "key", "", "master key file (seqbus keygen): authenticate the lease protocol")
	fs.StringVar(&s.Nodes, "nodes", "", "with --key: the node ids it serves, e.g. 1,2")
	fs.UintVar(&s.Stream, "stream", 1, "stream id (with --key: the keys are per stream)")
	fs.StringVar(&s.MetricsAddr, "metrics-addr", "", flagcheck.MetricsAddrUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, addr, metricsAddr, err := s.Config()
	if err != nil {
		return err
	}
	return serve.Witness(cfg, addr, s.Dir, metricsAddr, s.Lease, waitSignal)
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
	ids, err := flagcheck.NodeIDs(*allow)
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
