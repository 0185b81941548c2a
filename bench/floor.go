package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/internal/pace"
)

// RunFloor limits and defaults.
const (
	// FloorReplyTimeout: after the last send, wait this long for the last
	// replies; a ping with no reply by then is lost.
	FloorReplyTimeout = time.Second
	// floorStartTimeout bounds how long an echo process may take to say
	// where it listens.
	floorStartTimeout = 10 * time.Second
	// floorLeadNs: the schedule starts this long after setup, so the first
	// send is not late by the setup itself.
	floorLeadNs = int64(time.Millisecond)
)

// FloorConfig configures RunFloor.
type FloorConfig struct {
	// Binary is the seqbus binary to exec for the hop processes
	// (`Binary bench-echo ...`). A test binary whose TestMain runs EchoMain
	// for that argument works too.
	Binary string
	Hops   int    // 2 (client → echo → client) or 4 (client → A → B → A → client)
	Idle   string // every hop process's idle strategy: block, yield, spin, backoff
	Size   int    // message bytes (MessageBytesMin..MessageBytesMax; 0 means 32)
	// Rate is pings per second on the pace schedule (open loop: a slow
	// reply does not hold back the next send, wrk2 style). 0 means closed
	// loop: one ping in flight, each sent when the last reply arrives.
	Rate          float64
	Count, Warmup int
	// SpinNs is the generator's spin window (as client.LoadConfig.SpinNs;
	// 0 means pace.SpinNsDefault).
	SpinNs int64
	// Nice, when not 0, is the generator thread's nice value for the run,
	// as client.LoadConfig.Nice (the gated run's generator gets the same).
	Nice int
	// Park: the client parks on its socket between sends, as
	// client.LoadConfig.Park (pass the same to both).
	Park bool
	// CPUs pins roles to CPU lists ("0", "1", "0-1"): "client" (the calling
	// thread), "echo" (the far end) and, for 4 hops, "relay" (A). Hop
	// processes are pinned from their first instruction (internal/cluster,
	// as taskset would); empty means no pinning.
	CPUs map[string]string
	// BusyPollUs, when > 0, sets SO_BUSY_POLL on every socket of the run:
	// the client's and each hop's (bus.Tuning.BusyPollUs; raising it
	// needs CAP_NET_ADMIN, and loopback has no NAPI queue to poll).
	BusyPollUs int
}

// ProcessInfo is one process (or, for the client, the thread) of a run.
type ProcessInfo struct {
	Role       string  `json:"role"`
	Pid        int     `json:"pid"`
	CPUs       string  `json:"cpus"`
	CPUSeconds float64 `json:"cpu_seconds"` // user + system; the client's is its thread's
}

// FloorResult is what RunFloor measured.
type FloorResult struct {
	// Hist is the end-to-end round trip in ns from each ping's intended
	// send time (Rate > 0) or its actual send (closed loop).
	Hist *hdrhistogram.Histogram
	// IntendedToSent is the generator's own lateness in ns (pace).
	IntendedToSent *hdrhistogram.Histogram
	Pace           pace.Stats
	Sent, Received int // recorded phase
	Elapsed        time.Duration
	Processes      []ProcessInfo
}

func (c FloorConfig) withDefaults() (FloorConfig, error) {
	if c.Size == 0 {
		c.Size = MessageBytesDefault
	}
	switch {
	case c.Binary == "":
		return c, fmt.Errorf("%w: no binary for the hop processes", ErrConfig)
	case c.Hops != 2 && c.Hops != 4:
		return c, fmt.Errorf("%w: hops %d, want 2 or 4", ErrConfig, c.Hops)
	case !validIdle(c.Idle):
		return c, fmt.Errorf("%w: idle %q, want one of %s", ErrConfig, c.Idle, strings.Join(FloorIdles, ", "))
	case c.Size < MessageBytesMin || c.Size > MessageBytesMax:
		return c, fmt.Errorf("%w: message bytes %d not in %d..%d", ErrConfig, c.Size, MessageBytesMin, MessageBytesMax)
	case c.Count < 1 || c.Warmup < 0 || c.Warmup >= PingPongCountMax || c.Count > PingPongCountMax-c.Warmup:
		return c, fmt.Errorf("%w: count %d + warmup %d not in 1..%d", ErrConfig, c.Count, c.Warmup, PingPongCountMax)
	case !(c.Rate >= 0 && c.Rate <= RatePerSecondMax):
		return c, fmt.Errorf("%w: rate %v/s not in 0..%d", ErrConfig, c.Rate, RatePerSecondMax)
	case c.BusyPollUs < 0:
		return c, fmt.Errorf("%w: busy poll %d µs, want 0 or more", ErrConfig, c.BusyPollUs)
	}
	for role, list := range c.CPUs {
		if role != "client" && role != "echo" && role != "relay" {
			return c, fmt.Errorf("%w: CPU layout role %q, want client, echo or relay", ErrConfig, role)
		}
		if _, err := parseCPUList(list); list != "" && err != nil {
			return c, err
		}
	}
	return c, nil
}

// RunFloor measures the raw UDP floor with the hops in separate processes
// (children of cfg.Binary started by internal/cluster, killed by pid on
// return) and the client end on
// the calling goroutine, locked to its OS thread, paced by the same
// generator as the gated run (internal/pace) and polling its socket
// without blocking (bus recvmmsg, no allocation). It is bounded in time by
// the schedule plus FloorReplyTimeout and by ctx. The error is ErrConfig,
// ErrLost (the result is still valid), a context error, or a process or
// socket error.
func RunFloor(ctx context.Context, cfg FloorConfig) (*FloorResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	total := cfg.Count + cfg.Warmup
	bound := 30*time.Second + FloorReplyTimeout
	if cfg.Rate > 0 {
		bound += time.Duration(float64(total) / cfg.Rate * float64(time.Second))
	} else {
		bound += time.Duration(total) * FloorReplyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()

	procs := &hopProcs{}
	defer procs.stop()
	echoRole := "echo"
	echo, err := procs.start(ctx, cfg, echoRole, netip.AddrPort{}, bound)
	if err != nil {
		return nil, err
	}
	first := echo
	if cfg.Hops == 4 {
		if first, err = procs.start(ctx, cfg, "relay", echo, bound); err != nil {
			return nil, err
		}
	}
	u, err := listenFloorClient(cfg.BusyPollUs)
	if err != nil {
		return nil, err
	}
	defer u.Close()

	// The client runs on its own goroutine locked to a thread that is
	// discarded afterwards when pinned, so the pin never leaks.
	type out struct {
		res *FloorResult
		err error
	}
	ch := make(chan out, 1)
	go func() {
		runtime.LockOSThread()
		pinned := cfg.CPUs["client"] != ""
		if !pinned {
			defer runtime.UnlockOSThread()
		} else if err := pinThread(cfg.CPUs["client"]); err != nil {
			ch <- out{nil, err}
			return
		}
		if cfg.Nice != 0 {
			if prev, err := pace.SetThreadNice(cfg.Nice); err != nil {
				ch <- out{nil, fmt.Errorf("%w: generator thread nice %d: %v", ErrConfig, cfg.Nice, err)}
				return
			} else if !pinned {
				// Restored before the thread is unlocked (a pinned
				// thread is discarded instead).
				defer func() { _, _ = pace.SetThreadNice(prev) }()
			}
		}
		startCPU := threadCPUSeconds()
		res, err := newFloorClient(cfg, u, first).run(ctx)
		if res != nil {
			res.Processes = append(res.Processes, ProcessInfo{Role: "client", Pid: os.Getpid(), CPUs: cfg.CPUs["client"], CPUSeconds: threadCPUSeconds() - startCPU})
		}
		ch <- out{res, err}
	}()
	o := <-ch
	infos := procs.stop()
	if o.res != nil {
		o.res.Processes = append(o.res.Processes, infos...)
	}
	return o.res, o.err
}

// floorClient is the client end: every buffer preallocated, so a poll or
// a send does not allocate.
type floorClient struct {
	cfg   FloorConfig
	u     *bus.UDP
	to    netip.AddrPort
	w     *pace.Waiter
	sched pace.Schedule
	total uint64

	ping  [][]byte
	bufs  [][]byte
	sizes []int
	from  []netip.AddrPort
	seen  []uint64 // bit per seq: a duplicate reply is not recorded twice

	// Closed loop: the one ping in flight.
	inFlight     bool
	inFlightSeq  uint64
	inFlightSent int64

	hist     *hdrhistogram.Histogram
	received int
	err      error
	pollFn   func(int64) int
	rx       bus.ReadGate // parked waits (floorpark.go)
}

func newFloorClient(cfg FloorConfig, u *bus.UDP, to netip.AddrPort) *floorClient {
	total := uint64(cfg.Count + cfg.Warmup)
	c := &floorClient{cfg: cfg, u: u, to: to, total: total,
		w:     pace.NewWaiter(pace.WaiterConfig{Histogram: true, SpinNs: cfg.SpinNs}),
		ping:  [][]byte{make([]byte, cfg.Size)},
		bufs:  make([][]byte, echoBatch),
		sizes: make([]int, echoBatch),
		from:  make([]netip.AddrPort, echoBatch),
		seen:  make([]uint64, (total+63)/64),
		hist:  newLatencyHistogram(),
	}
	for i := range c.bufs {
		c.bufs[i] = make([]byte, cfg.Size+64)
	}
	c.pollFn = c.poll
	return c
}

// poll reads every reply waiting, without blocking, and records each.
func (c *floorClient) poll(int64) int {
	if !c.rx.ReadNow() {
		return 0
	}
	n, err := c.u.Receive(c.bufs, c.sizes, c.from, 0)
	if err != nil {
		c.err = err
		return 0
	}
	if n == 0 {
		return 0
	}
	nowNs := monotime.Now()
	for i := 0; i < n; i++ {
		if c.sizes[i] < MessageBytesMin || c.from[i] != c.to {
			continue
		}
		seq := binary.LittleEndian.Uint64(c.bufs[i])
		if seq >= c.total || c.seen[seq/64]&(1<<(seq%64)) != 0 {
			continue
		}
		c.seen[seq/64] |= 1 << (seq % 64)
		var startNs int64
		if c.cfg.Rate > 0 {
			startNs = c.sched.Due(seq)
		} else {
			if !c.inFlight || seq != c.inFlightSeq {
				continue // a reply to a ping already counted lost
			}
			c.inFlight = false
			startNs = c.inFlightSent
		}
		if seq >= uint64(c.cfg.Warmup) {
			c.received++
			recordClamped(c.hist, nowNs-startNs)
		}
	}
	return n
}

// floorClientRecvBufferBytes is the floor client's socket receive
// buffer: room for every reply of a run at the largest message (a few
// thousand datagrams of a few kilobytes of kernel memory each), so a
// client thread descheduled for a while on a loaded machine finds its
// replies queued rather than dropped by the kernel. The default buffer
// (about 200 KB) holds only a couple of hundred small datagrams, 50 ms at
// 5,000/s.
const floorClientRecvBufferBytes = 4 << 20

// listenFloorClient opens the floor client's socket on 127.0.0.1 (an
// ephemeral port) with its receive buffer and SO_BUSY_POLL (0: off). The floor and its tests use it,
// so a test measures the socket the floor runs.
func listenFloorClient(busyPollUs int) (*bus.UDP, error) {
	return bus.ListenUnicast(bus.UnicastConfig{Tuning: bus.Tuning{RecvBufferBytes: floorClientRecvBufferBytes, BusyPollUs: busyPollUs}})
}

func (c *floorClient) send(seq uint64) error {
	binary.LittleEndian.PutUint64(c.ping[0], seq)
	return c.u.Send(c.ping, c.to)
}

func (c *floorClient) run(ctx context.Context) (*FloorResult, error) {
	if c.cfg.Park {
		stopParking, err := c.startParking()
		if err != nil {
			return nil, err
		}
		defer stopParking()
	}
	c.sched = pace.NewSchedule(monotime.Now()+floorLeadNs, c.cfg.Rate)
	var recordStartNs int64
	for seq := uint64(0); seq < c.total; seq++ {
		if seq&255 == 0 {
			if err := ctx.Err(); err != nil {
				return c.result(recordStartNs, seq), err
			}
		}
		if seq == uint64(c.cfg.Warmup) {
			c.w.Reset()
			recordStartNs = monotime.Now()
		}
		var dueNs, nowNs int64
		if c.cfg.Rate > 0 {
			dueNs = c.sched.Due(seq)
			nowNs = c.w.Until(dueNs, c.pollFn)
		} else {
			nowNs = c.waitReply(ctx)
			dueNs = nowNs
		}
		if err := c.send(seq); err != nil {
			return c.result(recordStartNs, seq), err
		}
		c.w.Sent(dueNs, nowNs)
		if c.cfg.Rate == 0 {
			c.inFlight, c.inFlightSeq, c.inFlightSent = true, seq, nowNs
		}
		if c.cfg.Rate == 0 || !c.w.Parks(nowNs, c.sched.Due(seq+1)) {
			c.poll(nowNs) // else the next wait parks on the socket
		}
		if c.err != nil {
			return c.result(recordStartNs, seq+1), c.err
		}
	}
	// Drain: poll until every recorded ping is back or the reply timeout.
	endNs := monotime.Now() + int64(FloorReplyTimeout)
	for now := monotime.Now(); c.received < c.cfg.Count && now < endNs && c.err == nil && ctx.Err() == nil; {
		now = c.w.Until(now+int64(50*time.Microsecond), c.pollFn)
	}
	res := c.result(recordStartNs, c.total)
	if c.err != nil {
		return res, c.err
	}
	if res.Received < res.Sent {
		return res, fmt.Errorf("%w: %d of %d got no reply within %v", ErrLost, res.Sent-res.Received, res.Sent, FloorReplyTimeout)
	}
	return res, nil
}

// waitReply (closed loop) polls until the ping in flight is answered or
// times out, and returns the time.
func (c *floorClient) waitReply(ctx context.Context) int64 {
	now := monotime.Now()
	deadline := now + int64(FloorReplyTimeout)
	for c.inFlight && now < deadline && c.err == nil && ctx.Err() == nil {
		c.poll(now)
		now = monotime.Now()
	}
	c.inFlight = false
	return now
}

func (c *floorClient) result(recordStartNs int64, sentTotal uint64) *FloorResult {
	sent := max(int(sentTotal)-c.cfg.Warmup, 0)
	var elapsed time.Duration
	if recordStartNs > 0 {
		elapsed = time.Duration(monotime.Now() - recordStartNs)
	}
	return &FloorResult{Hist: c.hist, IntendedToSent: c.w.Histogram(), Pace: c.w.Stats(),
		Sent: sent, Received: c.received, Elapsed: elapsed}
}

// hopProcs are the running hop processes: children of cfg.Binary under
// a cluster.Procs, each logging to <role>.log in a temporary directory
// (removed by stop).
type hopProcs struct {
	sup   *cluster.Procs
	procs []*hopProc
}

type hopProc struct {
	role string
	cpus string
	proc *cluster.Proc
	info *ProcessInfo
}

func (p *hopProcs) start(ctx context.Context, cfg FloorConfig, role string, relayTo netip.AddrPort, bound time.Duration) (netip.AddrPort, error) {
	args := []string{"bench-echo", "--listen", "127.0.0.1:0", "--idle", cfg.Idle, "--max-duration", bound.String(), "--busy-poll-us", strconv.Itoa(cfg.BusyPollUs)}
	if relayTo.IsValid() {
		args = append(args, "--relay-to", relayTo.String())
	}
	cpus := cfg.CPUs[role]
	pin, err := cpuSlice(cpus)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if p.sup == nil {
		dir, err := os.MkdirTemp("", "seqbus-floor-")
		if err != nil {
			return netip.AddrPort{}, err
		}
		p.sup = &cluster.Procs{Bin: cfg.Binary, Dir: dir}
	}
	// Pinned from the first instruction (the fork inherits the forking
	// thread's affinity), as taskset does; stdin held open: the hop stops
	// at EOF. No death signal: it fires when the forking thread exits,
	// and the pinned client thread is discarded at its end.
	if err := p.sup.StartSpec(cluster.Spec{Name: role, Args: args, CPUs: pin, Stdin: true}); err != nil {
		return netip.AddrPort{}, fmt.Errorf("bench: start %s: %w", role, err)
	}
	proc := p.sup.Get(role)
	p.procs = append(p.procs, &hopProc{role: role, cpus: cpus, proc: proc})
	var addr netip.AddrPort
	var lerr error
	err = cluster.Poll(ctx, floorStartTimeout, time.Millisecond, func() bool {
		var ok bool
		addr, ok, lerr = listeningIn(proc.Log())
		return ok || lerr != nil || proc.Exited()
	})
	switch {
	case errors.Is(err, cluster.ErrTimeout):
		return netip.AddrPort{}, fmt.Errorf("bench: %s did not start within %v", role, floorStartTimeout)
	case err != nil:
		return netip.AddrPort{}, err
	case lerr != nil:
		return netip.AddrPort{}, fmt.Errorf("%s: %w", role, lerr)
	case !addr.IsValid():
		// Exited before it said where it listens.
		return netip.AddrPort{}, fmt.Errorf("%s: bench: echo process exited (%v): %s", role, proc.Err(), proc.LogTail(8))
	}
	return addr, nil
}

// listeningIn finds the "listening ADDR" line in an echo process's log
// (ok false while there is none yet). Only whole lines count: the text
// after the last newline may be a write still under way.
func listeningIn(log string) (netip.AddrPort, bool, error) {
	lines := strings.Split(log, "\n")
	for _, line := range lines[:len(lines)-1] {
		if strings.HasPrefix(line, "listening ") {
			addr, err := readListening(bufio.NewReader(strings.NewReader(line + "\n")))
			return addr, err == nil, err
		}
	}
	return netip.AddrPort{}, false, nil
}

// cpuSlice is a CPU list ("0", "1,3", "0-1") as CPU numbers (nil for "").
func cpuSlice(list string) ([]int, error) {
	if list == "" {
		return nil, nil
	}
	set, err := parseCPUList(list)
	if err != nil {
		return nil, err
	}
	var cpus []int
	for cpu := 0; cpu < runtime.NumCPU(); cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// stop ends every hop process (stdin closed, then SIGKILL by pid after a
// second), waits for each, removes the logs and returns what they used.
// Safe to call twice.
func (p *hopProcs) stop() []ProcessInfo {
	var infos []ProcessInfo
	for _, hp := range p.procs {
		if hp.info == nil {
			hp.proc.CloseStdin()
			if _, err := hp.proc.Wait(time.Second); err != nil {
				hp.proc.Kill()
			}
			info := ProcessInfo{Role: hp.role, Pid: hp.proc.Pid(), CPUs: hp.cpus}
			if st := hp.proc.State(); st != nil {
				info.CPUSeconds = (st.UserTime() + st.SystemTime()).Seconds()
			}
			hp.info = &info
		}
		infos = append(infos, *hp.info)
	}
	if p.sup != nil {
		os.RemoveAll(p.sup.Dir)
		p.sup = nil
	}
	return infos
}

// pinThread pins the calling (locked) thread to a CPU list such as
// "0", "1,3" or "0-1".
func pinThread(list string) error {
	set, err := parseCPUList(list)
	if err != nil {
		return err
	}
	return unix.SchedSetaffinity(0, &set)
}

func parseCPUList(list string) (unix.CPUSet, error) {
	var set unix.CPUSet
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= runtime.NumCPU() {
			return set, fmt.Errorf("%w: CPU list %q (CPUs 0..%d)", ErrConfig, list, runtime.NumCPU()-1)
		}
		for cpu := a; cpu <= b; cpu++ {
			set.Set(cpu)
		}
	}
	return set, nil
}

// threadCPUSeconds is the calling thread's user + system time.
func threadCPUSeconds() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// FloorStage names a floor result: "floor-2hop-block", "floor-4hop-spin".
func FloorStage(hops int, idle string) string {
	return "floor-" + strconv.Itoa(hops) + "hop-" + idle
}

// FloorAll runs RunFloor for 2 and 4 hops with every idle strategy in
// idles (cfg.Hops and cfg.Idle are ignored). The map is keyed by
// FloorStage; best2 and best4 are the keys with the lowest p50 at each hop
// count (the floor: the best the raw sockets do in that layout), reported
// as stages "floor-2hop" and "floor-4hop". It stops at the first error
// other than ErrLost (a lossy run is kept and reported).
func FloorAll(ctx context.Context, cfg FloorConfig, idles []string) (runs map[string]*FloorResult, best2, best4 string, err error) {
	if len(idles) == 0 {
		return nil, "", "", fmt.Errorf("%w: no idle strategies", ErrConfig)
	}
	runs = map[string]*FloorResult{}
	var lost error
	for _, hops := range []int{2, 4} {
		best := ""
		for _, idle := range idles {
			c := cfg
			c.Hops, c.Idle = hops, idle
			res, err := RunFloor(ctx, c)
			if err != nil && !errors.Is(err, ErrLost) {
				return runs, best2, best4, fmt.Errorf("%s: %w", FloorStage(hops, idle), err)
			}
			if err != nil {
				lost = fmt.Errorf("%s: %w", FloorStage(hops, idle), err)
			}
			name := FloorStage(hops, idle)
			runs[name] = res
			if res.Hist.TotalCount() > 0 && (best == "" || res.Hist.ValueAtQuantile(50) < runs[best].Hist.ValueAtQuantile(50)) {
				best = name
			}
		}
		if hops == 2 {
			best2 = best
		} else {
			best4 = best
		}
	}
	return runs, best2, best4, lost
}
