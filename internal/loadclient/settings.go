package loadclient

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/etcdarb"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
)

// Settings are `seqbus client`'s settings as its flags give them, one
// field a flag (named after it). The command layer defines the flags
// into these fields, with their defaults and help; Check, Dial and
// RunConfig are everything between the parsed flags and a running load.
// Every Check error is a flagcheck.UsageError that names its flag.
type Settings struct {
	Primary, JSON, Idle, Witness, Arbiter, KeyFile string
	TraceFile, TraceWindow, Record                 string
	Session, Count, Seed                           uint64
	Rate                                           float64
	Instruments, Stream                            uint
	Drain, Spin, Coalesce                          time.Duration
	Nice, Size, TraceStages, DatagramBytes         int
	MaxInFlight                                    int
	Park                                           bool
	Nodes                                          flagcheck.Peers
}

// Check checks every flag on its own and against the others.
func (s *Settings) Check() error {
	return flagcheck.First(
		flagcheck.Dest("primary", s.Primary, false), flagcheck.Positive("session", s.Session), flagcheck.Rate("rate", s.Rate, client.RateMax),
		flagcheck.Positive("count", s.Count), flagcheck.Range("instruments", s.Instruments, 1, 1<<32-1), flagcheck.Positive("drain", s.Drain),
		flagcheck.Idle("idle", s.Idle), flagcheck.Dest("witness", s.Witness, true), flagcheck.Stream(s.Stream), s.checkFollow(),
		flagcheck.Range("spin", s.Spin, 0, time.Duration(client.SpinNsMax)), flagcheck.Range("nice", s.Nice, -20, 19),
		flagcheck.Range("coalesce", s.Coalesce, 0, time.Duration(client.CoalesceNsMax)), flagcheck.Range("max-in-flight", s.MaxInFlight, 1, client.MaxInFlightMax),
		flagcheck.TraceStages(s.TraceStages), flagcheck.AsUsage(flagcheck.Prefixed("size", client.CheckLoadSize(s.Size))),
		flagcheck.TraceWindow(s.TraceWindow, s.TraceStages), flagcheck.DatagramBytes(s.DatagramBytes),
		flagcheck.OutputFile("json", s.JSON), flagcheck.OutputFile("record", s.Record), flagcheck.TraceFile(s.TraceStages, s.TraceFile),
	)
}

// checkFollow: following the lease holder (--witness or --arbiter) needs
// the nodes' addresses, and the two are exclusive.
func (s *Settings) checkFollow() error {
	switch {
	case s.Witness != "" && s.Arbiter != "":
		return flagcheck.Usagef("--witness and --arbiter are exclusive")
	case (s.Witness != "" || s.Arbiter != "") && len(s.Nodes) == 0:
		return flagcheck.Usagef("--witness and --arbiter need --node id=host:port for every node")
	case s.Arbiter != "":
		_, err := s.etcdEndpoints()
		return err
	}
	return nil
}

func (s *Settings) etcdEndpoints() ([]string, error) {
	eps, err := etcdarb.ParseURL(s.Arbiter)
	return eps, flagcheck.AsUsage(flagcheck.Prefixed("arbiter", err))
}

// Options are the client's options (the --key file read), without the
// recorder Dial adds. The load's generator (internal/pace) polls the
// answers between sends on its own thread (Poll), so latency counts from
// the intended send time of a generator that keeps time.
func (s *Settings) Options() (client.Options, error) {
	if err := s.Check(); err != nil {
		return client.Options{}, err
	}
	addr, _ := netip.ParseAddrPort(s.Primary) // checked, as --witness below
	idle, _ := bus.ParseIdle(s.Idle)
	opts := client.Options{Core: client.Config{Session: s.Session, MaxInFlight: s.MaxInFlight}, Primary: addr, Idle: idle,
		Nodes: s.Nodes, Stream: uint16(s.Stream), Poll: true, DatagramBytes: s.DatagramBytes}
	if s.Witness != "" {
		opts.Witness, _ = netip.ParseAddrPort(s.Witness)
	}
	var err error
	opts.Key, err = flagcheck.LoadKey(s.KeyFile)
	return opts, err
}

// Dial checks the settings, opens the --record file and dials the
// client; with --arbiter it follows the etcd lease holder. close undoes
// all of it in order: the follower, the client (draining), then the
// record file, so nothing is added while it closes.
func (s *Settings) Dial() (cl *client.Client, close func() error, err error) {
	opts, err := s.Options()
	if err != nil {
		return nil, nil, err
	}
	var rec *client.Recorder
	if s.Record != "" {
		if rec, err = client.CreateRecorder(s.Record); err != nil {
			return nil, nil, fmt.Errorf("--record: %v", err)
		}
		opts.Recorder = rec
	}
	closeRecord := func() error {
		if rec == nil {
			return nil
		}
		if err := rec.Close(); err != nil {
			return fmt.Errorf("--record: %w", err)
		}
		return nil
	}
	if cl, err = client.Dial(opts); err != nil {
		return nil, nil, errors.Join(err, closeRecord())
	}
	stop := func() {}
	if s.Arbiter != "" {
		eps, _ := s.etcdEndpoints() // checked
		if stop, err = cluster.FollowEtcd(eps, uint16(s.Stream), s.Nodes, cl); err != nil {
			return nil, nil, errors.Join(err, cl.Close(), closeRecord())
		}
	}
	return cl, func() error {
		stop()
		return errors.Join(cl.Close(), closeRecord())
	}, nil
}

// RunConfig is the load the settings ask for (Run), with a progress line
// a second to progress (nil for none).
func (s *Settings) RunConfig(progress io.Writer) RunConfig {
	return RunConfig{Progress: progress, Session: s.Session, TraceStages: s.TraceStages, TraceWindow: s.TraceWindow, TraceFile: s.TraceFile,
		Load: client.LoadConfig{Rate: s.Rate, Count: s.Count, Instruments: uint32(s.Instruments), Seed: s.Seed, Drain: s.Drain,
			Size: s.Size, SpinNs: int64(s.Spin), Nice: s.Nice, Park: s.Park, CoalesceNs: int64(s.Coalesce)}}
}
