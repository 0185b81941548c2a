package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/loadclient"
	"github.com/seqbus/seqbus/wire"
)

// clientSummary is what `seqbus client` prints (and writes with --json).
type clientSummary = cluster.ClientSummary

// defineClientFlags defines `seqbus client`'s flags into the settings
// internal/loadclient checks and runs.
func defineClientFlags(fs *flag.FlagSet) *loadclient.Settings {
	s := &loadclient.Settings{Nodes: peerFlags{}}
	fs.StringVar(&s.Primary, "primary", "127.0.0.1:7101", "the primary's unicast address")
	fs.Uint64Var(&s.Session, "session", 1, "session id (>= 1)")
	fs.Float64Var(&s.Rate, "rate", 10_000, "commands per second (fixed rate)")
	fs.Uint64Var(&s.Count, "count", 100_000, "commands to send")
	fs.UintVar(&s.Instruments, "instruments", 4, "instruments to spread orders over")
	fs.Uint64Var(&s.Seed, "seed", 1, "order stream seed")
	fs.DurationVar(&s.Drain, "drain", 30*time.Second, "how long to wait for the last answers")
	fs.IntVar(&s.Nice, "nice", 0, "nice value of the generator's thread for the run (0: leave it; below 0 needs root): keeps node wake-ups on a shared core from preempting it at its send times")
	fs.DurationVar(&s.Spin, "spin", 0, "the generator spins this long before each send and yields (with --park: parks on its socket) before that (0: 20µs, 10µs with --park; ≥ the interval: spin throughout; at most 1s)")
	fs.BoolVar(&s.Park, "park", false, "the generator parks on its socket (epoll_pwait2) between sends: a few syscalls per command and no CPU while waiting, but a wake-up per answer (docs/tuning.md)")
	fs.DurationVar(&s.Coalesce, "coalesce", 0, "send in bursts: wait until the oldest unsent command is this late, then send all that are due (latency still runs from each intended time; 0: each at its time; at most 10ms). Frees the core a generator at a high rate spins on")
	fs.StringVar(&s.JSON, "json", "", "write the summary as JSON to this file (- : to stdout, instead of the table)")
	fs.StringVar(&s.Idle, "idle", "block", "receive idle strategy (unused by the load itself: its paced generator polls the socket between sends)")
	fs.StringVar(&s.Witness, "witness", "", "the witness's address: follow the lease holder across failovers (needs --node)")
	fs.Var(s.Nodes, "node", "a node the primary may be, as id=host:port (repeat)")
	fs.StringVar(&s.Arbiter, "arbiter", "", "follow the lease holder of an etcd arbiter: etcd://host:port,... (needs --node for every node)")
	fs.StringVar(&s.KeyFile, "key", "", "master key file (seqbus keygen): seal commands, accept only sealed answers")
	fs.UintVar(&s.Stream, "stream", 1, "stream id (selects the client key)")
	fs.IntVar(&s.Size, "size", 0, "send opaque commands of this many bytes that the engine rejects after replicating them (0: real new orders)")
	fs.IntVar(&s.TraceStages, "trace-stages", 0, "record intended/sent/received of the first N commands and write them at exit to --trace-file (seqbus bench; 0: off)")
	fs.StringVar(&s.TraceFile, "trace-file", "client.trace", "where --trace-stages writes")
	fs.StringVar(&s.TraceWindow, "trace-window", "", traceWindowUsage)
	fs.IntVar(&s.DatagramBytes, "datagram-bytes", wire.DefaultDatagramLen, datagramBytesUsage)
	fs.StringVar(&s.Record, "record", "", "write every output received to this file, one JSON line each (for seqbus verify)")
	fs.IntVar(&s.MaxInFlight, "max-in-flight", client.DefaultMaxInFlight, fmt.Sprintf("commands sent and not yet answered, at most (1..%d): at most the nodes' dedup window (1024 with the matching engine), or a command resent after a failover may be refused as too old although it was applied; --engine none nodes keep none, and a larger window carries more commands a datagram flat out (docs/tuning.md)", client.MaxInFlightMax))
	return s
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	s := defineClientFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cl, closeClient, err := s.Dial()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeClient(); cerr != nil {
			fmt.Fprintf(os.Stderr, "seqbus client: %v\n", cerr)
		}
	}()
	return runLoad(cl, s)
}

// runLoad runs the load on cl (internal/loadclient) and prints (or
// writes) its summary.
func runLoad(cl *client.Client, s *loadclient.Settings) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if s.JSON != "-" && isTerminal(os.Stderr) {
		progress = os.Stderr
	}
	res, err := loadclient.Run(ctx, cl, s.RunConfig(progress))
	if res != nil && res.Report.NiceErr != nil {
		fmt.Fprintf(os.Stderr, "seqbus client: --nice %d not applied (the generator ran at its own priority): %v\n", s.Nice, res.Report.NiceErr)
	}
	if err != nil {
		return err
	}
	sum := res.Summary
	b, _ := json.MarshalIndent(sum, "", "  ")
	if s.JSON == "-" {
		fmt.Println(string(b))
	} else {
		loadclient.WriteSummary(os.Stdout, &sum)
	}
	if s.JSON != "" && s.JSON != "-" {
		if err := os.WriteFile(s.JSON, b, 0o644); err != nil {
			return err
		}
	}
	return res.LoadErr
}
