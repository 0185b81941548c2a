package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/internal/stagetrace"
	"github.com/seqbus/seqbus/status"
)

// The process harness of `seqbus bench latency` and `bench throughput`:
// the witness, the primary, the standbys and the load client run as
// separate processes of this binary (`seqbus witness`, `seqbus node`,
// `seqbus client`), the production code path, each optionally pinned to
// CPUs. Every node and the client record their stage times
// (--trace-stages) and write them at exit; the harness merges them.

// BenchSession is the load client's session.
const BenchSession = 77

// Bounds of one run.
const (
	benchStartTimeout = 10 * time.Second // a node becomes primary, standbys join
	benchStopTimeout  = 10 * time.Second // a node writes its trace and exits
	benchDrain        = 30 * time.Second // the client waits for the last answers
)

// Layout pins roles to CPUs: "primary=1,standby=0,client=0". Roles:
// witness, primary, standby (every standby), standby1.. (one), client.
// Values are a CPU or a range ("0-1"). Empty: nothing pinned.
type Layout map[string][]int

var LayoutRoles = []string{"witness", "primary", "standby", "client"}

func ParseLayout(s string) (Layout, error) {
	l := Layout{}
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	for _, part := range strings.Split(s, ",") {
		role, list, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("want role=cpu[-cpu], got %q", part)
		}
		if !slices.Contains(LayoutRoles, role) && !IsStandbyN(role) {
			return nil, fmt.Errorf("unknown role %q (witness, primary, standby, standbyN, client)", role)
		}
		cpus, err := parseCPURange(list)
		if err != nil {
			return nil, err
		}
		l[role] = cpus
	}
	return l, nil
}

func IsStandbyN(role string) bool {
	n, ok := strings.CutPrefix(role, "standby")
	v, err := strconv.Atoi(n)
	return ok && err == nil && v >= 1
}

func parseCPURange(s string) ([]int, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.Atoi(lo)
	b := a
	if err == nil && isRange {
		b, err = strconv.Atoi(hi)
	}
	if err != nil || a < 0 || b < a || b >= 1024 {
		return nil, fmt.Errorf("bad CPU %q (want N or N-M)", s)
	}
	var out []int
	for c := a; c <= b; c++ {
		out = append(out, c)
	}
	return out, nil
}

// CPUsOf is the CPUs of a role (standbyN falls back to standby).
func (l Layout) CPUsOf(role string) []int {
	if c, ok := l[role]; ok {
		return c
	}
	if IsStandbyN(role) {
		return l["standby"]
	}
	return nil
}

func CPUText(cpus []int) string {
	switch len(cpus) {
	case 0:
		return "any"
	case 1:
		return strconv.Itoa(cpus[0])
	}
	return fmt.Sprintf("%d-%d", cpus[0], cpus[len(cpus)-1])
}

// String is the Layout as the report states it.
func (l Layout) String() string {
	if len(l) == 0 {
		return "unpinned (every process on any CPU)"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + CPUText(l[k])
	}
	return strings.Join(parts, ",")
}

// FloorCPUs maps the Layout onto the floor's processes, so the floor runs
// where the gated run does: the floor's client is the load client, its
// first hop the primary, and a 4-hop floor's far end a standby.
func (l Layout) FloorCPUs(hops int) map[string]string {
	m := map[string]string{}
	set := func(floorRole string, cpus []int) {
		if len(cpus) > 0 {
			m[floorRole] = CPUText(cpus)
		}
	}
	set("client", l.CPUsOf("client"))
	if hops == 2 {
		set("echo", l.CPUsOf("primary"))
	} else {
		set("relay", l.CPUsOf("primary"))
		set("echo", l.CPUsOf("standby1"))
	}
	return m
}

// BenchConfig is one run of the harness.
type BenchConfig struct {
	Size  int    // command bytes (0: real new orders)
	Fsync string // none, group, always
	// FsyncInlineNs is every node's --fsync-inline (under group and
	// always: fsync on the agent while fsyncs average at most this).
	FsyncInlineNs int64
	Idle          string // every node's and the client's
	Engine        string // matching or none
	Standbys      int
	Layout        Layout
	Auth          bool // authenticate every frame (a fresh key per run)
	// Rate is commands per second; 0 runs flat out (as fast as the
	// client's in-flight window allows).
	Rate          float64
	Count, Warmup int
	Keep          bool // keep the run's directory
	Out           string
	// GeneratorNice is the load client's generator thread nice value
	// (seqbus client --nice; 0: leave it).
	GeneratorNice int
	// GeneratorPark: the load client parks on its socket between sends
	// (seqbus client --park).
	GeneratorPark bool
	// GeneratorCoalesceNs: the load client sends in bursts this far
	// apart at most (seqbus client --coalesce; 0: each command at its
	// time).
	GeneratorCoalesceNs int64
	// DatagramBytes is every node's and the load client's datagram size
	// (seqbus node and client --datagram-bytes; 0: their default).
	DatagramBytes int
	// MaxInFlight is the load client's window (seqbus client
	// --max-in-flight; 0: its default, the matching engine's dedup
	// window).
	MaxInFlight int
}

// ProcessInfo is one process of a run, as summary.json reports it.
type ProcessInfo struct {
	Role           string  `json:"role"`
	Pid            int     `json:"pid"`
	CPUs           string  `json:"cpus"`
	GOMAXPROCS     int     `json:"gomaxprocs,omitempty"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	CPUSPerMillion float64 `json:"cpu_s_per_million"`
	// MallocsPerCommand and SyscallsPerCommand are over the process's
	// whole traced life (start-up, warm-up and drain included) divided by
	// every command sent, warm-up included.
	MallocsPerCommand  float64 `json:"mallocs_per_command"`
	SyscallsPerCommand float64 `json:"syscalls_per_command"`
	// The measured window (stagetrace.Window): from the process's first
	// handling of a measured command to its last, divided by the measured
	// commands (Count). Window is false when the process's window never
	// closed (the figures are then absent, not zero).
	Window                   bool    `json:"window"`
	WindowMallocsPerCommand  float64 `json:"window_mallocs_per_command,omitempty"`
	WindowSyscallsPerCommand float64 `json:"window_syscalls_per_command,omitempty"`
	// WindowCPUUsPerCommand is the process's CPU time (user + system,
	// every thread) over the window, in µs per measured command: what
	// steady state costs, without the start-up (the trace's prefaulting),
	// warm-up and drain that CPUSPerMillion includes.
	WindowCPUUsPerCommand float64 `json:"window_cpu_us_per_command,omitempty"`
	// Agent is a node's agent thread over its life, from its last
	// status.json (status.AgentStatus: the longest pass, the longest
	// stall and the stalls over 1 ms); nil for the client and the
	// witness, or when the node wrote none.
	Agent *status.AgentStatus `json:"agent,omitempty"`
}

// BenchResult is what one run measured.
type BenchResult struct {
	Merged    *stagetrace.Merged
	Processes []ProcessInfo
	Client    ClientSummary
	// AchievedPerSec is answered commands/s past the warm-up, from the
	// first send to the last answer.
	AchievedPerSec float64
	// ReplicatedPerSec is commands/s the in-sync standbys acknowledged
	// (the primary's acked stamps) over the same span.
	ReplicatedPerSec float64
	Dir              string
}

type benchCluster struct {
	*Local
	cfg     BenchConfig
	keyArgs []string
}

func (c *benchCluster) nodeName(id uint32) string { return NodeName(id) }

func (c *benchCluster) nodeRole(id uint32) string {
	if id == 1 {
		return "primary"
	}
	return "standby" + strconv.Itoa(int(id-1))
}

// RunBench starts the processes (bin's subcommands), runs the load, stops
// everything and merges the traces. It kills only the processes it
// started.
func RunBench(ctx context.Context, bin string, cfg BenchConfig) (*BenchResult, error) {
	dir, err := os.MkdirTemp(cfg.Out, "run-")
	if err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	local, err := NewLocal(bin, dir, 1+cfg.Standbys, 79)
	if err != nil {
		return nil, err
	}
	c := &benchCluster{Local: local, cfg: cfg}
	defer c.StopAll()
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	res, err := c.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (logs in %s with --keep)", err, dir)
	}
	res.Dir = dir
	return res, nil
}

func (c *benchCluster) start(ctx context.Context) error {
	cfg := c.cfg
	if cfg.Auth {
		path := filepath.Join(c.Dir, "seqbus.key")
		if _, err := auth.Keygen(path); err != nil {
			return err
		}
		c.keyArgs = []string{"--key", path}
	}
	if err := c.StartWitness(cfg.Layout.CPUsOf("witness"), c.WitnessKeyArgs(c.keyArgs)...); err != nil {
		return err
	}
	// Node 1 starts first and takes the lease alone, so the layout's
	// "primary" is the process that leads.
	if err := c.startNode(1); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "node1 to lead", func() bool {
		s, err := c.Status(1)
		return err == nil && s.Role == "primary"
	}); err != nil {
		return err
	}
	for id := uint32(2); id <= uint32(1+cfg.Standbys); id++ {
		if err := c.startNode(id); err != nil {
			return err
		}
	}
	// The gate needs every standby in the in-sync set, or the run would
	// measure a primary running alone.
	return c.waitFor(ctx, "every standby to join the in-sync set", func() bool {
		s, err := c.Status(1)
		return err == nil && len(s.InSync.Members) == cfg.Standbys
	})
}

func (c *benchCluster) startNode(id uint32) error {
	cfg := c.cfg
	args := append([]string{"node"}, c.NodeArgs(id)...)
	args = append(args, "--fsync", cfg.Fsync, "--fsync-inline", time.Duration(cfg.FsyncInlineNs).String(), "--idle", cfg.Idle, "--engine", cfg.Engine,
		"--trace-stages", strconv.Itoa(cfg.Count+cfg.Warmup+1024), "--trace-window", stagetrace.WindowText(cfg.Warmup, cfg.Count))
	args = append(args, datagramArgs(cfg)...)
	return c.StartOn(c.nodeName(id), cfg.Layout.CPUsOf(c.nodeRole(id)), append(args, c.keyArgs...)...)
}

func (c *benchCluster) waitFor(ctx context.Context, what string, ok func() bool) error {
	err := Poll(ctx, benchStartTimeout, 20*time.Millisecond, ok)
	if errors.Is(err, ErrTimeout) {
		return fmt.Errorf("timed out after %v waiting for %s", benchStartTimeout, what)
	}
	return err
}

// load runs the load client to completion, then stops the nodes (which
// write their traces at exit) and merges.
func (c *benchCluster) load(ctx context.Context) (*BenchResult, error) {
	cfg := c.cfg
	total := cfg.Count + cfg.Warmup
	clientTrace := filepath.Join(c.Dir, "client.trace")
	clientJSON := filepath.Join(c.Dir, "client.json")
	args := []string{"client", "--primary", c.Nodes[1].String(), "--session", strconv.Itoa(BenchSession),
		"--count", strconv.Itoa(total), "--idle", cfg.Idle, "--drain", benchDrain.String(),
		"--trace-stages", strconv.Itoa(total), "--trace-window", stagetrace.WindowText(cfg.Warmup, cfg.Count),
		"--trace-file", clientTrace, "--json", clientJSON}
	args = append(args, LoadArgs(cfg)...)
	if err := c.StartOn("client", cfg.Layout.CPUsOf("client"), append(args, c.keyArgs...)...); err != nil {
		return nil, err
	}
	bound := benchDrain + time.Minute
	if cfg.Rate > 0 {
		bound += time.Duration(float64(total) / cfg.Rate * float64(time.Second))
	} else {
		bound += time.Duration(total) * 100 * time.Microsecond // flat out: far above 10k/s
	}
	states := map[string]*os.ProcessState{}
	var clientErr error
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.Exited("client"):
	case <-time.After(bound):
		clientErr = fmt.Errorf("the load client did not finish within %v", bound)
		c.Signal("client", syscall.SIGKILL)
	}
	st, _ := c.Wait("client", time.Second)
	states["client"] = st
	if clientErr == nil && (st == nil || !st.Success()) {
		clientErr = fmt.Errorf("the load client failed (%v): see %s", st, filepath.Join(c.Dir, "client.log"))
	}
	// Standbys first, so the primary's trace is complete when it exits.
	for id := uint32(1 + cfg.Standbys); id >= 1; id-- {
		st, err := c.Stop(c.nodeName(id), benchStopTimeout)
		if err != nil {
			return nil, err
		}
		states[c.nodeName(id)] = st
	}
	if st, err := c.Stop("witness", benchStopTimeout); err == nil {
		states["witness"] = st
	}
	if clientErr != nil {
		return nil, clientErr
	}
	return c.merge(states, clientTrace, clientJSON)
}

func (c *benchCluster) merge(states map[string]*os.ProcessState, clientTrace, clientJSON string) (*BenchResult, error) {
	cfg := c.cfg
	ct, err := stagetrace.ReadFile(clientTrace)
	if err != nil {
		return nil, err
	}
	traces := map[string]*stagetrace.Trace{"client": ct}
	var primary *stagetrace.Trace
	var standbys []*stagetrace.Trace
	for id := uint32(1); id <= uint32(1+cfg.Standbys); id++ {
		t, err := stagetrace.ReadFile(filepath.Join(c.Dir, c.nodeName(id), "stages.trace"))
		if err != nil {
			return nil, err
		}
		traces[c.nodeName(id)] = t
		if t.Role == stagetrace.RolePrimary {
			primary = t
		} else {
			standbys = append(standbys, t)
		}
	}
	if primary == nil {
		return nil, errors.New("no node was primary at exit (a failover during the run?)")
	}
	m, err := stagetrace.Merge(ct, primary, standbys, cfg.Warmup)
	if err != nil {
		return nil, err
	}
	res := &BenchResult{Merged: m}
	if b, err := os.ReadFile(clientJSON); err == nil {
		_ = json.Unmarshal(b, &res.Client)
	}
	if span := m.LastReceivedNs - m.FirstSentNs; span > 0 {
		res.AchievedPerSec = float64(m.Commands) / (float64(span) / 1e9)
	}
	res.ReplicatedPerSec = replicatedPerSec(primary, cfg.Warmup)
	commands := float64(cfg.Count + cfg.Warmup)
	add := func(name, role string) {
		st := states[name]
		if st == nil {
			return
		}
		p := ProcessInfo{Role: role, Pid: st.Pid(), CPUs: CPUText(cfg.Layout.CPUsOf(role))}
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			p.CPUSeconds = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
			p.CPUSPerMillion = p.CPUSeconds / commands * 1e6
		}
		if t := traces[name]; t != nil {
			p.MallocsPerCommand = float64(t.Mallocs) / commands
			p.SyscallsPerCommand = float64(t.Syscalls) / commands
			fillWindow(&p, t.Header, cfg.Count)
			p.GOMAXPROCS = int(t.GOMAXPROCS)
			if int(t.Pid) != p.Pid {
				p.Pid = int(t.Pid) // the trace is the process's own word
			}
		}
		if role != "client" {
			if st, err := ReadStatus(filepath.Join(c.Dir, name)); err == nil && st.Agent.Passes > 0 {
				p.Agent = &st.Agent
			}
		}
		res.Processes = append(res.Processes, p)
	}
	add("client", "client")
	for id := uint32(1); id <= uint32(1+cfg.Standbys); id++ {
		role := "standby"
		if traces[c.nodeName(id)] == primary {
			role = "primary"
		} else if cfg.Standbys > 1 {
			role = c.nodeRole(id)
		}
		add(c.nodeName(id), role)
	}
	add("witness", "witness")
	return res, nil
}

// fillWindow sets p's measured-window figures from a trace header: the
// window's allocations, socket calls and CPU time over its commands.
func fillWindow(p *ProcessInfo, h stagetrace.Header, count int) {
	if !h.WindowClosed || count <= 0 {
		return
	}
	p.Window = true
	p.WindowMallocsPerCommand = float64(h.WindowMallocs) / float64(count)
	p.WindowSyscallsPerCommand = float64(h.WindowSyscalls) / float64(count)
	p.WindowCPUUsPerCommand = float64(h.WindowCPUNs) / 1e3 / float64(count)
}

// replicatedPerSec is the rate at which the in-sync standbys acknowledged
// seqs past the warm-up: acked seqs over the time from the first
// sequenced to the last acknowledged.
func replicatedPerSec(primary *stagetrace.Trace, warmup int) float64 {
	seqd, acked := primary.Col(stagetrace.ColSequenced), primary.Col(stagetrace.ColAcked)
	var first, last int64
	n := 0
	for seq := warmup + 1; seq < len(acked) && seq < len(seqd); seq++ {
		if acked[seq] == 0 || seqd[seq] == 0 {
			continue
		}
		if first == 0 || seqd[seq] < first {
			first = seqd[seq]
		}
		last = max(last, acked[seq])
		n++
	}
	if n == 0 || last <= first {
		return 0
	}
	return float64(n) / (float64(last-first) / 1e9)
}

// ClientSummary is what `seqbus client` prints (and writes with --json).
type ClientSummary struct {
	Sent, Answered, Acks, Rejects, Duplicates, Resent, Unanswered uint64
	Executions, Failovers                                         uint64
	// StaleRefused: frames of a deposed primary the client's epoch
	// fence refused (client.Stats.StaleEpoch).
	StaleRefused           uint64
	ElapsedSec, RatePerSec float64
	LatencyUs              map[string]float64
	// The generator's own lateness: commands sent > 10 µs after their
	// intended time, and the intended->sent percentiles.
	SentLate10us     uint64
	IntendedToSentUs map[string]float64
}

// LoadArgs are the load client's flags for a run's rate and size: the
// part of the harness that depends on what `seqbus client` offers.
func LoadArgs(cfg BenchConfig) []string {
	rate := cfg.Rate
	if rate <= 0 {
		// Flat out: a schedule far faster than the bus, so the client
		// sends whenever its in-flight window has room.
		rate = 5_000_000
	}
	args := []string{"--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--size", strconv.Itoa(cfg.Size)}
	if cfg.GeneratorNice != 0 {
		args = append(args, "--nice", strconv.Itoa(cfg.GeneratorNice))
	}
	if cfg.GeneratorPark {
		args = append(args, "--park")
	}
	if cfg.GeneratorCoalesceNs > 0 {
		args = append(args, "--coalesce", time.Duration(cfg.GeneratorCoalesceNs).String())
	}
	if cfg.MaxInFlight > 0 {
		args = append(args, "--max-in-flight", strconv.Itoa(cfg.MaxInFlight))
	}
	return append(args, datagramArgs(cfg)...)
}

// datagramArgs is --datagram-bytes for every node and the load client
// of a run: all of them must use the same size.
func datagramArgs(cfg BenchConfig) []string {
	if cfg.DatagramBytes == 0 {
		return nil
	}
	return []string{"--datagram-bytes", strconv.Itoa(cfg.DatagramBytes)}
}
