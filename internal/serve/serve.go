// Package serve runs the long-lived processes of `seqbus node` and
// `seqbus witness` once their flags are parsed: the metrics endpoint
// (listened on first, so a taken port fails the start instead of leaving
// a process running without it), the node or witness itself, a wait for
// the caller's stop (a signal), and an orderly close with the node's
// stage trace written after it.
package serve

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/metrics"
	"github.com/seqbus/seqbus/internal/nodetrace"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/node"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/witness"
)

// NodeOptions are what runs around a node besides its Config.
type NodeOptions struct {
	// MetricsAddr serves Prometheus metrics on /metrics ("" for none).
	MetricsAddr string
	// TraceStages, when > 0, records the stage times of the first
	// TraceStages seqs (internal/nodetrace, wrapping cfg.Observer); 0
	// records nothing. TraceWindow (stagetrace.ParseWindow's FROM-TO, ""
	// for none) is the trace's measured window; TraceFile where the trace
	// is written at the end ("": Dir/stages.trace).
	TraceStages            int
	TraceWindow, TraceFile string
}

// metricsFor listens for metrics on addr ("" for none) and returns the
// registry to fill and a close function.
func metricsFor(addr string, log *slog.Logger) (*prometheus.Registry, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	reg := metrics.NewRegistry()
	ms, err := metrics.Serve(addr, reg, log)
	if err != nil {
		return nil, nil, err
	}
	log.Info("metrics", "url", "http://"+ms.Addr()+"/metrics")
	return reg, func() { ms.Close() }, nil
}

// Node starts the node (and its metrics), runs it until wait returns and
// closes it.
func Node(cfg nodeconfig.Config, o NodeOptions, wait func()) error {
	reg, closeMetrics, err := metricsFor(o.MetricsAddr, cfg.Log)
	if err != nil {
		return err
	}
	defer closeMetrics()
	var tr *nodetrace.Tracer
	if o.TraceStages > 0 {
		if tr, err = nodetrace.New(o.TraceStages, cfg.Observer); err != nil {
			return fmt.Errorf("--trace-stages: %w", err)
		}
		cfg.Observer = tr
	}
	n, err := node.New(cfg)
	if err != nil {
		return err
	}
	if reg != nil {
		reg.MustRegister(metrics.NodeCollector{N: n})
	}
	if w, _ := stagetrace.ParseWindow(o.TraceWindow, nil); w != nil && tr != nil {
		if err := tr.Window(w.From, w.To, n.SocketSyscalls); err != nil {
			n.Close()
			return fmt.Errorf("--trace-window: %w", err)
		}
	}
	WarnSockets(cfg.Log, n)
	if err := n.Start(); err != nil {
		return err
	}
	wait()
	cfg.Log.Info("stopping")
	err = n.Close()
	if tr != nil {
		path := o.TraceFile
		if path == "" {
			path = filepath.Join(cfg.Dir, "stages.trace")
		}
		if werr := tr.WriteFile(path, os.Getpid(), cfg.ID, n.Status()); werr != nil && err == nil {
			err = fmt.Errorf("--trace-file: %w", werr)
		}
	}
	return err
}

// WarnSockets logs the socket options the kernel did not grant.
func WarnSockets(log *slog.Logger, n *node.Node) {
	for _, r := range n.SocketReports() {
		if r.RecvBufferBytesGranted < r.RecvBufferBytesRequested {
			log.Warn("receive buffer smaller than asked (raise net.core.rmem_max or run as root)", "socket", r.Local, "asked", r.RecvBufferBytesRequested, "granted", r.RecvBufferBytesGranted)
		}
		if r.BusyPollErr != nil {
			log.Warn("SO_BUSY_POLL refused", "socket", r.Local, "err", r.BusyPollErr)
		}
		if r.GROErr != nil {
			log.Warn("UDP_GRO refused: this socket reads datagram by datagram", "socket", r.Local, "err", r.GROErr)
		}
	}
}

// Witness serves the witness on addr with its state in dir (and its
// metrics on metricsAddr, "" for none) until wait returns, then closes it.
func Witness(cfg witness.Config, addr netip.AddrPort, dir, metricsAddr string, lease time.Duration, wait func()) error {
	reg, closeMetrics, err := metricsFor(metricsAddr, cfg.Logger)
	if err != nil {
		return err
	}
	defer closeMetrics()
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
	cfg.Logger.Info("serving", "addr", conn.LocalAddr(), "lease", lease, "epoch", srv.Status().Epoch)
	wait()
	return srv.Close()
}
