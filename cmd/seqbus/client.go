package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/etcdarb"
	"github.com/seqbus/seqbus/internal/cluster"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/client"
)

// followEtcd asks the etcd arbiter who holds the lease every 100 ms (the
// client's witness query interval) and points the client at a new holder,
// resending what is in flight there. It returns a function that stops it.
func followEtcd(url string, stream uint16, nodes map[uint32]netip.AddrPort, cl *client.Client) (func(), error) {
	eps, err := parseEtcdURL(url)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("--arbiter needs --node id=host:port for every node")
	}
	q, err := etcdarb.NewQuerier(etcdarb.Config{Endpoints: eps, Stream: stream})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var holder arbiter.NodeID
		var epoch uint64
		t := time.NewTicker(client.DefaultQueryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			qctx, qcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			h, e, _, err := q.Query(qctx)
			qcancel()
			if err != nil || h == arbiter.NodeNone || (h == holder && e == epoch) || e < epoch {
				continue
			}
			if addr, ok := nodes[uint32(h)]; ok {
				holder, epoch = h, e
				if addr != cl.Primary() {
					cl.SetPrimary(addr)
				}
			}
		}
	}()
	return func() { cancel(); <-done; q.Close() }, nil
}

// clientSummary is what `seqbus client` prints (and writes with --json).
type clientSummary = cluster.ClientSummary

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	primary := fs.String("primary", "127.0.0.1:7101", "the primary's unicast address")
	session := fs.Uint64("session", 1, "session id (>= 1)")
	rate := fs.Float64("rate", 10_000, "commands per second (fixed rate)")
	count := fs.Uint64("count", 100_000, "commands to send")
	instruments := fs.Uint("instruments", 4, "instruments to spread orders over")
	seed := fs.Uint64("seed", 1, "order stream seed")
	drain := fs.Duration("drain", 30*time.Second, "how long to wait for the last answers")
	nice := fs.Int("nice", 0, "nice value of the generator's thread for the run (0: leave it; below 0 needs root): keeps node wake-ups on a shared core from preempting it at its send times")
	spin := fs.Duration("spin", 0, "the generator spins this long before each send and yields the CPU before that (0: 20µs; ≥ the interval: never yield)")
	out := fs.String("json", "", "write the summary as JSON to this file (- : to stdout, instead of the table)")
	idle := fs.String("idle", "block", "receive idle strategy (unused by the load itself: its paced generator polls the socket between sends)")
	witnessAddr := fs.String("witness", "", "the witness's address: follow the lease holder across failovers (needs --node)")
	nodes := peerFlags{}
	fs.Var(nodes, "node", "a node the primary may be, as id=host:port (repeat)")
	arbiterURL := fs.String("arbiter", "", "follow the lease holder of an etcd arbiter: etcd://host:port,... (needs --node for every node)")
	keyFile := fs.String("key", "", "master key file (seqbus keygen): seal commands, accept only sealed answers")
	stream := fs.Uint("stream", 1, "stream id (selects the client key)")
	size := fs.Int("size", 0, "send opaque commands of this many bytes that the engine rejects after replicating them (0: real new orders)")
	traceStages := fs.Int("trace-stages", 0, "record intended/sent/received of the first N commands and write them at exit to --trace-file (seqbus bench; 0: off)")
	traceFile := fs.String("trace-file", "client.trace", "where --trace-stages writes")
	record := fs.String("record", "", "write every output received to this file, one JSON line each (for seqbus verify)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(
		checkAddr("primary", *primary, false), checkPositive("session", *session), checkPositive("rate", *rate),
		checkPositive("count", *count), checkRange("instruments", *instruments, 1, 1<<32-1), checkPositive("drain", *drain),
		checkIdle("idle", *idle), checkAddr("witness", *witnessAddr, true), checkStream(*stream),
		checkFollow(*witnessAddr, *arbiterURL, nodes), checkNonNegative("spin", *spin), checkRange("nice", *nice, -20, 19),
		asUsage(second(traceStagesFlag(*traceStages))), asUsage(prefixed("size", checkLoadSize(*size))),
	); err != nil {
		return err
	}
	addr, _ := netip.ParseAddrPort(*primary) // checked above
	idl, _ := parseIdle(*idle)
	var err error
	// Poll: the load's generator (internal/pace) reads the answers between
	// sends on its own thread, so latency counts from the intended send
	// time of a generator that keeps time.
	opts := client.Options{Core: client.Config{Session: *session}, Primary: addr, Idle: idl, Nodes: nodes, Stream: uint16(*stream), Poll: true}
	if opts.Key, err = loadKey(*keyFile); err != nil {
		return asUsage(err)
	}
	if *witnessAddr != "" {
		opts.Witness, _ = netip.ParseAddrPort(*witnessAddr) // checked above
	}
	rec, err := openRecord(*record)
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
	if *arbiterURL != "" {
		if _, err := parseEtcdURL(*arbiterURL); err != nil {
			return asUsage(err)
		}
		stop, err := followEtcd(*arbiterURL, uint16(*stream), nodes, cl)
		if err != nil {
			return err
		}
		defer stop()
	}
	lat := newClientLatency()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var trace *clientTrace
	if *traceStages > 0 {
		if trace, err = newClientTrace(*traceStages); err != nil {
			return err
		}
	}
	stopProgress := startProgress(os.Stderr, *out != "-" && isTerminal(os.Stderr), cl, lat)
	rep, loadErr := cl.Load(ctx, client.LoadConfig{Rate: *rate, Count: *count, Instruments: uint32(*instruments), Seed: *seed, Drain: *drain, Size: *size, SpinNs: int64(*spin), Nice: *nice},
		func(r client.Result) {
			lat.record(r)
			if trace != nil {
				trace.record(r)
			}
		})
	stopProgress()
	if rep.NiceErr != nil {
		fmt.Fprintf(os.Stderr, "seqbus client: --nice %d not applied (the generator ran at its own priority): %v\n", *nice, rep.NiceErr)
	}
	if trace != nil {
		if err := trace.write(*traceFile, *session, rep.Sent, cl.Counters()); err != nil {
			return fmt.Errorf("--trace-file: %w", err)
		}
	}
	st := rep.Stats
	sum := clientSummary{
		Sent: rep.Sent, Answered: st.Answered, Acks: st.Acks, Rejects: st.Rejects, Duplicates: st.Duplicates,
		Resent: st.Resent, Unanswered: rep.Sent - st.Answered, Executions: st.Executions, Failovers: cl.Failovers(),
		ElapsedSec: rep.Elapsed.Seconds(), RatePerSec: float64(st.Answered) / max(rep.Elapsed.Seconds(), 1e-9),
		LatencyUs: map[string]float64{},
	}
	sum.SentLate10us, sum.IntendedToSentUs = rep.Pace.Late10us, map[string]float64{}
	for _, q := range []float64{50, 90, 99, 99.9, 99.99, 100} {
		if rep.IntendedToSent != nil {
			sum.IntendedToSentUs[fmt.Sprintf("p%g", q)] = float64(rep.IntendedToSent.ValueAtQuantile(q)) / 1000
		}
		sum.LatencyUs[fmt.Sprintf("p%g", q)] = float64(lat.quantile(q) / time.Microsecond)
	}
	b, _ := json.MarshalIndent(sum, "", "  ")
	if *out == "-" {
		fmt.Println(string(b))
	} else {
		printClientSummary(os.Stdout, &sum)
	}
	if *out != "" && *out != "-" {
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return err
		}
	}
	return loadErr
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
