package main

import (
	"flag"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/metrics"
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
	cfg.Arbiter.LeaseDurationNs = int64(*lease)
	cfg.Stream = uint16(*stream)
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
	return serveWitness(cfg, addr, *dir, metricsAddr, *lease)
}

// serveWitness runs the witness (and its metrics) until SIGINT or
// SIGTERM.
func serveWitness(cfg witness.Config, addr netip.AddrPort, dir, metricsAddr string, lease time.Duration) error {
	var reg *prometheus.Registry
	if metricsAddr != "" {
		reg = metrics.NewRegistry()
		ms, err := metrics.Serve(metricsAddr, reg, cfg.Logger)
		if err != nil {
			return err
		}
		defer ms.Close()
		cfg.Logger.Info("metrics", "url", "http://"+ms.Addr()+"/metrics")
	}
	// 8 MB of receive buffer, as a node has: a burst or a flood of requests
	// queues instead of dropping the holder's renewals with it.
	conn, err := bus.ListenUnicast(bus.UnicastConfig{Addr: addr, Tuning: bus.Tuning{RecvBufferBytes: 8 << 20}})
	if err != nil {
		return err
	}
	srv, err := witness.New(cfg, conn, dir)
	if err != nil {
		conn.Close()
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	if reg != nil {
		reg.MustRegister(metrics.WitnessCollector{S: srv})
	}
	cfg.Logger.Info("serving", "lease", lease, "epoch", srv.Status().Epoch)
	waitSignal()
	return srv.Close()
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
