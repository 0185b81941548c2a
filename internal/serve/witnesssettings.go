package serve

import (
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/witness"
)

// WitnessSettings are `seqbus witness`'s settings as its flags give
// them, one field a flag (named after it).
type WitnessSettings struct {
	Listen, Dir, KeyFile, Nodes, MetricsAddr string
	Lease                                    time.Duration
	Stream                                   uint
}

// Config checks the settings and builds the witness's Config, the
// address it serves on and the metrics address ("" for none). Every
// error is a flagcheck.UsageError that names its flag.
func (s *WitnessSettings) Config() (cfg witness.Config, addr netip.AddrPort, metricsAddr string, err error) {
	ids, idsErr := flagcheck.NodeIDs(s.Nodes)
	if idsErr != nil {
		idsErr = flagcheck.Usagef("--nodes: %v (want ids 1..4294967295, e.g. 1,2)", idsErr)
	}
	err = flagcheck.First(flagcheck.Listen("listen", s.Listen), flagcheck.Required("dir", s.Dir), flagcheck.Range("lease", s.Lease, time.Millisecond, 24*time.Hour),
		flagcheck.Stream(s.Stream), idsErr)
	if err != nil {
		return cfg, addr, "", err
	}
	if metricsAddr, err = flagcheck.MetricsAddr(s.MetricsAddr); err != nil {
		return cfg, addr, "", err
	}
	addr, _ = netip.ParseAddrPort(s.Listen) // checked
	cfg = witness.DefaultConfig()
	cfg.Arbiter, cfg.Stream = witnessLease(s.Lease), uint16(s.Stream)
	if cfg.Key, err = flagcheck.LoadKey(s.KeyFile); err != nil {
		return cfg, addr, "", err
	}
	switch {
	case cfg.Key != nil && len(ids) == 0:
		return cfg, addr, "", flagcheck.Usagef("--key needs --nodes (the node ids it holds keys for)")
	case cfg.Key == nil && len(ids) > 0:
		return cfg, addr, "", flagcheck.Usagef("--nodes names the nodes --key holds keys for; without --key it does nothing")
	}
	cfg.Nodes = ids
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("witness", addr.String())
	return cfg, addr, metricsAddr, nil
}

// witnessLease is the arbiter configuration of a witness granting leases
// of lease: the witness uses the duration alone (the renew, margin and
// retry are each node's own flags, checked where the node starts), so
// the rest is the defaults' proportions (a quarter, 15 %, 5 %), which
// arbiter.Config.Validate accepts for any lease; the defaults at the
// default lease.
func witnessLease(lease time.Duration) arbiter.Config {
	l := int64(lease)
	return arbiter.Config{LeaseDurationNs: l, RenewIntervalNs: l / 4, MarginNs: l * 3 / 20, RetryNs: l / 20}
}
