package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/flagcheck"
	"github.com/seqbus/seqbus/internal/loadclient"
	"github.com/seqbus/seqbus/wire"
)

// clientSummary is what `seqbus client` prints (and writes with --json).
type clientSummary = cluster.ClientSummary

// clientFlags are `seqbus client`'s flags.
type clientFlags struct {
	primary, out, idle, witnessAddr, arbiterURL, keyFile, traceFile, record *string
	session, count, seed                                                    *uint64
	rate                                                                    *float64
	instruments, stream                                                     *uint
	drain, spin, coalesce                                                   *time.Duration
	nice, size, traceStages, datagramBytes, maxInFlight                     *int
	nodes                                                                   peerFlags
	traceWindow                                                             *string
	park                                                                    *bool
}

func defineClientFlags(fs *flag.FlagSet) *clientFlags {
	f := &clientFlags{nodes: peerFlags{}}
	f.primary = fs.String("primary", "127.0.0.1:7101", "the primary's unicast address")
	f.session = fs.Uint64("session", 1, "session id (>= 1)")
	f.rate = fs.Float64("rate", 10_000, "commands per second (fixed rate)")
	f.count = fs.Uint64("count", 100_000, "commands to send")
	f.instruments = fs.Uint("instruments", 4, "instruments to spread orders over")
	f.seed = fs.Uint64("seed", 1, "order stream seed")
	f.drain = fs.Duration("drain", 30*time.Second, "how long to wait for the last answers")
	f.nice = fs.Int("nice", 0, "nice value of the generator's thread for the run (0: leave it; below 0 needs root): keeps node wake-ups on a shared core from preempting it at its send times")
	f.spin = fs.Duration("spin", 0, "the generator spins this long before each send and yields (with --park: parks on its socket) before that (0: 20µs, 10µs with --park; ≥ the interval: spin throughout; at most 1s)")
	f.park = fs.Bool("park", false, "the generator parks on its socket (epoll_pwait2) between sends: a few syscalls per command and no CPU while waiting, but a wake-up per answer (docs/tuning.md)")
	f.coalesce = fs.Duration("coalesce", 0, "send in bursts: wait until the oldest unsent command is this late, then send all that are due (latency still runs from each intended time; 0: each at its time; at most 10ms). Frees the core a generator at a high rate spins on")
	f.out = fs.String("json", "", "write the summary as JSON to this file (- : to stdout, instead of the table)")
	f.idle = fs.String("idle", "block", "receive idle strategy (unused by the load itself: its paced generator polls the socket between sends)")
	f.witnessAddr = fs.String("witness", "", "the witness's address: follow the lease holder across failovers (needs --node)")
	fs.Var(f.nodes, "node", "a node the primary may be, as id=host:port (repeat)")
	f.arbiterURL = fs.String("arbiter", "", "follow the lease holder of an etcd arbiter: etcd://host:port,... (needs --node for every node)")
	f.keyFile = fs.String("key", "", "master key file (seqbus keygen): seal commands, accept only sealed answers")
	f.stream = fs.Uint("stream", 1, "stream id (selects the client key)")
	f.size = fs.Int("size", 0, "send opaque commands of this many bytes that the engine rejects after replicating them (0: real new orders)")
	f.traceStages = fs.Int("trace-stages", 0, "record intended/sent/received of the first N commands and write them at exit to --trace-file (seqbus bench; 0: off)")
	f.traceFile = fs.String("trace-file", "client.trace", "where --trace-stages writes")
	f.traceWindow = fs.String("trace-window", "", traceWindowUsage)
	f.datagramBytes = fs.Int("datagram-bytes", wire.DefaultDatagramLen, datagramBytesUsage)
	f.record = fs.String("record", "", "write every output received to this file, one JSON line each (for seqbus verify)")
	f.maxInFlight = fs.Int("max-in-flight", client.DefaultMaxInFlight, fmt.Sprintf("commands sent and not yet answered, at most (1..%d): at most the nodes' dedup window (1024 with the matching engine), or a command resent after a failover may be refused as too old although it was applied; --engine none nodes keep none, and a larger window carries more commands a datagram flat out (docs/tuning.md)", client.MaxInFlightMax))
	return f
}

func (f *clientFlags) check() error {
	return firstError(
		checkDest("primary", *f.primary, false), checkPositive("session", *f.session), checkRate("rate", *f.rate),
		checkPositive("count", *f.count), checkRange("instruments", *f.instruments, 1, 1<<32-1), checkPositive("drain", *f.drain),
		checkIdle("idle", *f.idle), checkDest("witness", *f.witnessAddr, true), checkStream(*f.stream),
		checkFollow(*f.witnessAddr, *f.arbiterURL, f.nodes), checkRange("spin", *f.spin, 0, time.Duration(client.SpinNsMax)), checkRange("nice", *f.nice, -20, 19),
		checkRange("coalesce", *f.coalesce, 0, time.Duration(client.CoalesceNsMax)), checkRange("max-in-flight", *f.maxInFlight, 1, client.MaxInFlightMax),
		asUsage(second(traceStagesFlag(*f.traceStages))), asUsage(prefixed("size", checkLoadSize(*f.size))),
		asUsage(traceWindowFlag(*f.traceWindow, *f.traceStages)), checkDatagramBytes(*f.datagramBytes),
		flagcheck.OutputFile("json", *f.out), flagcheck.OutputFile("record", *f.record), flagcheck.TraceFile(*f.traceStages, *f.traceFile),
	)
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	f := defineClientFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	addr, _ := netip.ParseAddrPort(*f.primary) // checked above
	idl, _ := parseIdle(*f.idle)
	var err error
	// Poll: the load's generator (internal/pace) reads the answers between
	// sends on its own thread, so latency counts from the intended send
	// time of a generator that keeps time.
	opts := client.Options{Core: client.Config{Session: *f.session, MaxInFlight: *f.maxInFlight}, Primary: addr, Idle: idl, Nodes: f.nodes, Stream: uint16(*f.stream), Poll: true,
		DatagramBytes: *f.datagramBytes}
	if opts.Key, err = loadKey(*f.keyFile); err != nil {
		return asUsage(err)
	}
	if *f.witnessAddr != "" {
		opts.Witness, _ = netip.ParseAddrPort(*f.witnessAddr) // checked above
	}
	rec, err := openRecord(*f.record)
	if err != nil {
		return err
	}
	opts.Recorder = rec
	defer func() {
		// After the client is closed (deferred below): nothing is added
		// while it drains.
		if rec != nil {
			if err := rec.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "seqbus client: --record: %v\n", err)
			}
		}
	}()
	cl, err := client.Dial(opts)
	if err != nil {
		return err
	}
	defer cl.Close()
	if *f.arbiterURL != "" {
		eps, err := parseEtcdURL(*f.arbiterURL)
		if err != nil {
			return asUsage(err)
		}
		stop, err := cluster.FollowEtcd(eps, uint16(*f.stream), f.nodes, cl)
		if err != nil {
			return err
		}
		defer stop()
	}
	return f.runLoad(cl)
}

// runLoad runs the load on cl (internal/loadclient) and prints (or
// writes) its summary.
func (f *clientFlags) runLoad(cl *client.Client) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if *f.out != "-" && isTerminal(os.Stderr) {
		progress = os.Stderr
	}
	res, err := loadclient.Run(ctx, cl, loadclient.RunConfig{Progress: progress, Session: *f.session,
		TraceStages: *f.traceStages, TraceWindow: *f.traceWindow, TraceFile: *f.traceFile,
		Load: client.LoadConfig{Rate: *f.rate, Count: *f.count, Instruments: uint32(*f.instruments), Seed: *f.seed, Drain: *f.drain, Size: *f.size, SpinNs: int64(*f.spin), Nice: *f.nice, Park: *f.park, CoalesceNs: int64(*f.coalesce)}})
	if res != nil && res.Report.NiceErr != nil {
		fmt.Fprintf(os.Stderr, "seqbus client: --nice %d not applied (the generator ran at its own priority): %v\n", *f.nice, res.Report.NiceErr)
	}
	if err != nil {
		return err
	}
	sum := res.Summary
	b, _ := json.MarshalIndent(sum, "", "  ")
	if *f.out == "-" {
		fmt.Println(string(b))
	} else {
		loadclient.WriteSummary(os.Stdout, &sum)
	}
	if *f.out != "" && *f.out != "-" {
		if err := os.WriteFile(*f.out, b, 0o644); err != nil {
			return err
		}
	}
	return res.LoadErr
}

// checkFollow: following the lease holder (--witness or --arbiter) needs
// the nodes' addresses, and the two are exclusive.
func checkFollow(witness, arbiterURL string, nodes peerFlags) error {
	switch {
	case witness != "" && arbiterURL != "":
		return usagef("--witness and --arbiter are exclusive")
	case (witness != "" || arbiterURL != "") && len(nodes) == 0:
		return usagef("--witness and --arbiter need --node id=host:port for every node")
	case arbiterURL != "":
		_, err := parseEtcdURL(arbiterURL)
		return asUsage(err)
	}
	return nil
}

// openRecord creates the --record file's recorder (nil without one).
func openRecord(path string) (*client.Recorder, error) {
	if path == "" {
		return nil, nil
	}
	rec, err := client.CreateRecorder(path)
	if err != nil {
		return nil, fmt.Errorf("--record: %v", err)
	}
	return rec, nil
}
