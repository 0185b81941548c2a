package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/seqbus/seqbus/auth"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/verdict"
	"github.com/seqbus/seqbus/node"
)

// demo runs the whole product on loopback: a witness and two nodes as
// child processes of this binary, and a load client in this process that
// follows the lease holder. Partway through it SIGKILLs the primary and
// shows the failover, then checks that nothing a client saw was lost.
type demo struct {
	procSet
	witness netip.AddrPort
	group   netip.AddrPort
	nodes   map[uint32]netip.AddrPort
	dead    map[uint32]bool
}

func freeLoopbackPort() (uint16, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port), nil
}

func loopback(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

type nodeStatus struct {
	Role     string      `json:"role"`
	Epoch    uint64      `json:"epoch"`
	Applied  uint64      `json:"applied"`
	Released uint64      `json:"released"`
	Hash     node.Hash64 `json:"state_hash"`
	InSync   struct {
		Members []uint32 `json:"members"`
	} `json:"in_sync"`
}

// killWaitMax bounds how long past --kill-after the demo waits for the
// standby to be in the in-sync set before it kills the primary anyway.
const killWaitMax = 3 * time.Second

func (d *demo) status(id uint32) (nodeStatus, error) {
	var s nodeStatus
	b, err := os.ReadFile(filepath.Join(d.dir, "node"+strconv.Itoa(int(id)), "status.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// primary is the live node that says it is primary at the highest epoch
// (a killed node's last status file still says primary).
func (d *demo) primary() (uint32, nodeStatus) {
	var best uint32
	var bs nodeStatus
	for id := range d.nodes {
		if d.dead[id] {
			continue
		}
		if s, err := d.status(id); err == nil && s.Role == "primary" && s.Epoch >= bs.Epoch {
			best, bs = id, s
		}
	}
	return best, bs
}

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	rate := fs.Float64("rate", 5_000, "client commands per second")
	duration := fs.Duration("duration", 8*time.Second, "how long the load runs")
	killAfter := fs.Duration("kill-after", 3*time.Second, "SIGKILL the primary this long into the load (0: never)")
	keep := fs.Bool("keep", false, "keep the demo's directory (logs, journals)")
	noAuth := fs.Bool("no-auth", false, "run without frame authentication (by default the demo generates a key)")
	record := fs.String("record", "", "write every output the client received here, one JSON line each (default: client.jsonl in the demo's directory)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDemoFlags(*rate, *duration, *killAfter); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "seqbus-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	d := &demo{procSet: procSet{bin: bin, dir: dir}, nodes: map[uint32]netip.AddrPort{}, dead: map[uint32]bool{}}
	defer d.stopAll()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ports := make([]uint16, 5)
	for i := range ports {
		if ports[i], err = freeLoopbackPort(); err != nil {
			return err
		}
	}
	d.witness = loopback(ports[0])
	d.group = netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 77, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), ports[1])
	d.nodes[1], d.nodes[2] = loopback(ports[2]), loopback(ports[3])
	mdGroup := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 78, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), ports[4])
	fmt.Printf("seqbus demo on loopback (multicast %s pinned to lo, TTL 0); files in %s%s\n", d.group, dir, keepNote(*keep))
	var keyArgs []string
	var key *auth.MasterKey
	if !*noAuth {
		keyPath := filepath.Join(dir, "seqbus.key")
		k, err := auth.Keygen(keyPath)
		if err != nil {
			return err
		}
		key, keyArgs = &k, []string{"--key", keyPath}
		fmt.Printf("every frame is authenticated (HMAC-SHA256, key %s; --no-auth to compare)\n", keyPath)
	}
	if err := d.start("witness", append([]string{"witness", "--listen", d.witness.String(), "--dir", filepath.Join(dir, "witness"), "--nodes", "1,2"}, keyArgs...)...); err != nil {
		return err
	}
	for id, addr := range d.nodes {
		other := uint32(3 - id)
		args := []string{"node", "--id", strconv.Itoa(int(id)),
			"--dir", filepath.Join(dir, "node"+strconv.Itoa(int(id))), "--listen", addr.String(),
			"--group", d.group.String(), "--iface", "lo", "--witness", d.witness.String(),
			"--market-data", mdGroup.String(),
			"--peer", fmt.Sprintf("%d=%s", other, d.nodes[other]), "--fsync", "group"}
		err := d.start("node"+strconv.Itoa(int(id)), append(args, keyArgs...)...)
		if err != nil {
			return err
		}
	}
	start := time.Now()
	var first uint32
	for first == 0 {
		if time.Since(start) > 10*time.Second {
			return errors.New("no node became primary within 10 s (see the logs with --keep)")
		}
		if ctx.Err() != nil {
			fmt.Println("\ninterrupted before the load started: stopping every process")
			return errInterrupted
		}
		time.Sleep(20 * time.Millisecond)
		first, _ = d.primary()
	}
	fmt.Printf("witness up; node %d holds the lease (%v)\n", first, time.Since(start).Round(time.Millisecond))

	md, err := client.SubscribeMarketDataKey(mdGroup, "lo", nil, key, 1)
	if err != nil {
		return err
	}
	defer md.Close()
	const session = 42
	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var mu sync.Mutex
	acked := map[uint64]bool{}
	var lastAnswer time.Time
	recPath := *record
	if recPath == "" {
		recPath = filepath.Join(dir, "client.jsonl")
	}
	rec, err := client.CreateRecorder(recPath)
	if err != nil {
		return fmt.Errorf("--record: %v", err)
	}
	defer rec.Close()
	cl, err := client.Dial(client.Options{Core: client.Config{Session: session}, Primary: d.nodes[first], Witness: d.witness, Nodes: d.nodes, Key: key, Recorder: rec,
		Poll: true}) // Load's paced generator reads the answers itself
	if err != nil {
		return err
	}
	defer cl.Close()
	count := uint64(*rate * duration.Seconds())
	loadDone := make(chan error, 1)
	var rep client.LoadReport
	go func() {
		var err error
		rep, err = cl.Load(ctx, client.LoadConfig{Rate: *rate, Count: count, Instruments: 4, Seed: 7, Drain: 20 * time.Second}, func(r client.Result) {
			mu.Lock()
			defer mu.Unlock()
			_ = hist.RecordValue(max(r.LatencyNs/1000, 1))
			if r.Kind == engine.KindAck {
				acked[r.ClientOrderID] = true
			}
			lastAnswer = time.Now()
		})
		loadDone <- err
	}()
	var killedAt, promotedAt, resumedAt time.Time
	var second uint32
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	loadStart := time.Now()
	var prevAnswered uint64
	var loadErr error
	interrupted := false
loop:
	for {
		select {
		case loadErr = <-loadDone:
			break loop
		case <-ctx.Done():
			// The load sees the same context and stops at once; wait
			// for its report, then print the summary so far.
			fmt.Printf("\ninterrupted after %v: stopping every process; the summary so far:\n", time.Since(loadStart).Round(time.Millisecond))
			interrupted, loadErr = true, <-loadDone
			break loop
		case <-tick.C:
		}
		st := cl.Stats()
		pid, ps := d.primary()
		mu.Lock()
		p99 := time.Duration(hist.ValueAtQuantile(99)) * time.Microsecond
		mu.Unlock()
		fmt.Printf("%5.1fs  %6.0f cmd/s answered  primary=node%d epoch=%d released=%-7d p99=%v\n",
			time.Since(loadStart).Seconds(), float64(st.Answered-prevAnswered)*2, pid, ps.Epoch, ps.Released, p99.Round(time.Microsecond))
		prevAnswered = st.Answered
		if *killAfter > 0 && killedAt.IsZero() && time.Since(loadStart) >= *killAfter {
			// The failover the demo shows needs a standby the witness may
			// promote: one in the in-sync set. On a loaded machine the
			// primary may have just removed a standby that stalled; a kill
			// then halts the market by design (nobody may lead), so wait
			// for it to be added back, within a bound.
			inSync := pid == first && slices.Contains(ps.InSync.Members, uint32(3-first))
			if !inSync && time.Since(loadStart) < *killAfter+killWaitMax {
				fmt.Printf(">>> waiting for node%d to be back in the in-sync set before the kill\n", 3-first)
				continue
			}
			if !inSync {
				fmt.Printf(">>> node%d is not in the in-sync set: the witness will not promote it, so this kill halts the market (by design)\n", 3-first)
			}
			fmt.Printf(">>> SIGKILL node%d (the primary)\n", first)
			d.signal("node"+strconv.Itoa(int(first)), syscall.SIGKILL)
			d.dead[first] = true
			killedAt = time.Now()
		}
		if !killedAt.IsZero() && promotedAt.IsZero() {
			if id, _ := d.primary(); id != 0 && id != first {
				second, promotedAt = id, time.Now()
				fmt.Printf(">>> node%d promoted\n", second)
			}
		}
		if !promotedAt.IsZero() && resumedAt.IsZero() {
			mu.Lock()
			if lastAnswer.After(promotedAt.Add(-500 * time.Millisecond)) {
				resumedAt = lastAnswer
			}
			mu.Unlock()
		}
	}
	fmt.Println()
	final, _ := d.primary()
	if final == 0 {
		final = first
	}
	d.stopAll()
	// Nothing a client saw may be missing from the final primary's
	// history, nor differ from it: seqbus verify's check, on the record.
	cl.Close()
	if err := rec.Close(); err != nil {
		return err
	}
	res, err := demoVerdict(recPath, dir, final)
	if err != nil {
		return err
	}
	lost := res.Lost
	st := rep.Stats
	fmt.Printf("\nsummary\n  commands sent %d, answered %d (acks %d, rejects %d), resent %d, answered as duplicates %d\n",
		rep.Sent, st.Answered, st.Acks, st.Rejects, st.Resent, st.Duplicates)
	fmt.Printf("  lost (received but not in node%d's history): %d\n", final, lost)
	for _, s := range res.Sessions {
		fmt.Printf("  session %d: delivered %d of its %d outputs in node%d's history (missing %d, duplicated %d, out of order %d, not yet received at the end %d), %d by replay, of them %d executions recovered\n",
			s.Session, s.Delivered-s.Duplicated, s.History, final, s.Missing, s.Duplicated, s.OutOfOrder, s.Tail, s.Replayed, s.ReplayedExecutions)
	}
	fmt.Printf("  seqbus verify --record %s %s %s:\n", recPath, filepath.Join(dir, "node1"), filepath.Join(dir, "node2"))
	for _, l := range res.Lines() {
		fmt.Printf("    %s\n", l)
	}
	mt := md.Tracker()
	fmt.Printf("  market data: %d updates, duplicates or reused seqs %d, gaps %d (%d updates never seen",
		mt.Updates, mt.Dups, mt.Gaps, mt.Missing)
	if mt.Gaps > 0 {
		fmt.Printf("; last gap md seq %d..%d: applied by the old primary but never released before it died", mt.LastGapFrom, mt.LastGapTo)
	}
	fmt.Println(")")
	epochs, _ := epochSummary(dir, demoNodeIDs(d))
	fmt.Println("  " + epochs)
	if !killedAt.IsZero() {
		fmt.Printf("  failover: primary killed -> node%d promoted in %v (lease %v; status polled every 500 ms)\n",
			second, promotedAt.Sub(killedAt).Round(time.Millisecond), time.Second)
		if !resumedAt.IsZero() {
			fmt.Printf("  answers resumed %v after the kill\n", resumedAt.Sub(killedAt).Round(time.Millisecond))
		}
		fmt.Printf("  timeline by step (from node%d's log%s):\n", second, logNote(*keep, filepath.Join(dir, fmt.Sprintf("node%d.log", second))))
		printTimeline(filepath.Join(dir, fmt.Sprintf("node%d.log", second)))
	}
	fmt.Printf("  client round trip (from intended send time, HDR): p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n",
		us(hist.ValueAtQuantile(50)), us(hist.ValueAtQuantile(90)), us(hist.ValueAtQuantile(99)), us(hist.ValueAtQuantile(99.9)), us(hist.Max()))
	if interrupted {
		return errInterrupted
	}
	if loadErr != nil {
		return loadErr
	}
	if lost > 0 {
		return fmt.Errorf("%d outputs the client received are lost", lost)
	}
	if !res.OK() {
		return fmt.Errorf("the history breaks the promise (duplicates %d, conflicts %d, hash mismatches %d, stale %d)",
			res.Duplicates, res.Conflicts, res.HashMismatches, res.Stale)
	}
	if mt.Dups > 0 {
		return fmt.Errorf("%d market-data updates duplicated or reused", mt.Dups)
	}
	fmt.Println("  verdict: OK, nothing a client saw was lost")
	return nil
}

// checkDemoFlags: the load must have a rate, a duration and at least one
// command, and the kill must fall inside the load.
func checkDemoFlags(rate float64, duration, killAfter time.Duration) error {
	if err := firstError(checkPositive("rate", rate), checkPositive("duration", duration), checkNonNegative("kill-after", killAfter)); err != nil {
		return err
	}
	if rate*duration.Seconds() < 1 {
		return usagef("--rate %v for --duration %v is less than one command", rate, duration)
	}
	if killAfter >= duration {
		return usagef("--kill-after must be < --duration (%v), got %v (0: never kill)", duration, killAfter)
	}
	return nil
}

// keepNote and logNote say where the files are only while they exist:
// without --keep the demo deletes its directory when it ends.
func keepNote(keep bool) string {
	if keep {
		return " (kept: --keep)"
	}
	return " (deleted at the end; --keep keeps them)"
}

func logNote(keep bool, path string) string {
	if keep {
		return ", kept in " + path
	}
	return "; --keep keeps the logs"
}

// demoVerdict runs the verifier (seqbus verify's) on a demo or drill
// directory: the client's record against node1 and node2, final the
// primary.
func demoVerdict(record, dir string, final uint32) (*verdict.Result, error) {
	return verdict.Verify(verdict.Options{
		Records: []string{record},
		Nodes:   []string{filepath.Join(dir, "node1"), filepath.Join(dir, "node2")},
		Primary: filepath.Join(dir, "node"+strconv.Itoa(int(final))),
		Engine:  engineConfig(),
	})
}

func us(v int64) time.Duration { return (time.Duration(v) * time.Microsecond).Round(time.Microsecond) }
