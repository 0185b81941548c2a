// Package gated measures the full gated path of seqbus on loopback: a
// fixed-rate client sends commands to a primary, which sequences,
// journals, applies and multicasts them; a standby applies, journals and
// acknowledges; the primary releases each answer only past
// min(applied, standby ack, durable); the client receives it.
//
// Both nodes run in this process on real UDP sockets (unicast and
// multicast pinned to lo) with one shared monotonic clock, so the time of
// every stage of every command is known: sent (intended) → sequenced at the
// primary → applied at the standby → acknowledged to the primary →
// durable at the primary → released → received by the client. Latency is
// recorded from each command's intended send time (wrk2 style), so a stall
// counts against every command it delayed: no coordinated omission.
//
// Commands are opaque payloads of the configured size that the matching
// engine answers with a reject after they were sequenced, journaled,
// replicated and applied: the bus's cost is what is measured, not the
// engine's. Size 0 sends real new orders (39 bytes) that trade.
package gated

import (
	"context"
	"errors"
	"fmt"
	"github.com/seqbus/seqbus/auth"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/node"
	"github.com/seqbus/seqbus/wire"
)

// Stage names, in path order. Each is a histogram of nanoseconds.
const (
	StageSequenced = "sent->sequenced"      // client intended send -> primary sequenced and applied
	StageStandby   = "sequenced->standby"   // -> applied (journaled) at the standby
	StageAcked     = "sequenced->acked"     // -> the standby's ack covering it reached the primary
	StageDurable   = "sequenced->durable"   // -> durable in the primary's journal
	StageReleased  = "sequenced->released"  // -> released through the gate
	StageReceived  = "released->received"   // released -> received by the client
	StageEndToEnd  = "end-to-end"           // client intended send -> received
	StageFloor2Hop = "floor-2hop (raw UDP)" // filled in by the caller
	StageFloor4Hop = "floor-4hop (raw UDP)" // filled in by the caller
	stageCount     = 7
	maxLatencyNs   = int64(60 * time.Second) // histograms' upper bound
)

// Stages lists the stage names Run fills, in path order.
var Stages = []string{StageSequenced, StageStandby, StageAcked, StageDurable, StageReleased, StageReceived, StageEndToEnd}

// Config is one run.
type Config struct {
	// Size is each command's bytes (16-byte header included; >= 17); 0
	// sends real new orders.
	Size int
	// Fsync is the journal policy of both nodes.
	Fsync journal.SyncPolicy
	// Rate is commands per second. 0 with Window > 0 runs flat out
	// (throughput mode): as fast as Window allows.
	Rate float64
	// Count is how many commands to send.
	Count int
	// Warmup: the first Warmup commands are sent at the same rate but not
	// recorded (segment creation, first wake-ups); it must be < Count.
	Warmup int
	// Window bounds the commands sent but not yet answered (0: 4096).
	// At the bound the sender waits: in latency mode that wait counts
	// against the commands it delayed.
	Window int
	// Idle is the receive strategy of every loop (nodes and client).
	Idle bus.Idle
	// Tuning is applied to every socket (busy-poll, buffers).
	Tuning bus.Tuning
	// Dir holds the two journals; "" makes a temporary one, removed after.
	Dir string
	// Key, when set, authenticates every frame (nodes and client), so a
	// run with and one without give the MAC's end-to-end cost.
	Key *auth.MasterKey
}

// Result is what a run measured.
type Result struct {
	Config   Config
	Hist     map[string]*hdrhistogram.Histogram // by stage name, ns
	Sent     int
	Answered int
	Elapsed  time.Duration
	// RatePerSec is answered commands per second over the run.
	RatePerSec float64
	// MallocsPerCmd is runtime.MemStats.Mallocs over the run divided by
	// the commands answered: every goroutine of the process counts (both
	// nodes, the client, the harness).
	MallocsPerCmd float64
	// ReleasedPerSec is the primary's released watermark over the run.
	ReleasedPerSec float64
	// Intervals are the end-to-end latencies by second of intended send
	// time (for an HdrHistogram interval log): Intervals[i] holds the
	// measured commands meant to be sent in second i after StartUnixMs
	// (empty during the warm-up).
	Intervals []*hdrhistogram.Histogram
	// StartUnixMs is the wall-clock time of the run's start (for the log).
	StartUnixMs int64
}

// NewHist is the histogram every stage uses: 1 ns to a minute, 3 digits.
func NewHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, maxLatencyNs, 3) }

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clock is the monotonic clock both nodes and the harness share.
type clock struct{ base time.Time }

func (c *clock) NowNs() int64 { return int64(time.Since(c.base)) }

// tracer records per-seq stage times from the nodes' observer hooks. The
// arrays are sized for the run, so recording never allocates.
type tracer struct {
	clk       *clock
	primary   uint32
	mu        sync.Mutex
	seqOfID   []uint64 // client order id -> seq
	seqAt     []int64  // seq -> sequenced
	standbyAt []int64
	ackedAt   []int64
	durableAt []int64
	relAt     []int64
	acked     uint64 // cursors: highest seq stamped
	durable   uint64
	released  uint64
	applied   uint64 // highest standby-applied
}

func newTracer(clk *clock, primary uint32, count int) *tracer {
	n := count + 2
	return &tracer{clk: clk, primary: primary, seqOfID: make([]uint64, n), seqAt: make([]int64, n), standbyAt: make([]int64, n),
		ackedAt: make([]int64, n), durableAt: make([]int64, n), relAt: make([]int64, n)}
}

func (t *tracer) Applied(id uint32, _ uint64, seq uint64, cmd []byte) {
	now := t.clk.NowNs()
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq >= uint64(len(t.seqAt)) {
		return
	}
	if id == t.primary {
		t.seqAt[seq] = now
		if h, err := engine.ParseCommand(cmd); err == nil && h.ClientOrderID < uint64(len(t.seqOfID)) {
			t.seqOfID[h.ClientOrderID] = seq
		}
		return
	}
	t.standbyAt[seq] = now
}

func (t *tracer) Rebuilt(uint32, uint64)   {}
func (t *tracer) Installed(uint32, uint64) {}

// stamp sets at[s] = now for every s in (*cursor, upTo], bounded by the
// arrays.
func stamp(at []int64, cursor *uint64, upTo uint64, now int64) {
	upTo = min(upTo, uint64(len(at)-1))
	for s := *cursor + 1; s <= upTo; s++ {
		at[s] = now
	}
	*cursor = max(*cursor, upTo)
}

func (t *tracer) Released(r node.ReleaseEvent) {
	now := t.clk.NowNs()
	t.mu.Lock()
	stamp(t.relAt, &t.released, r.Released, now)
	t.mu.Unlock()
}

func (t *tracer) Acked(_, _ uint32, ackSeq uint64, nowNs int64) {
	t.mu.Lock()
	stamp(t.ackedAt, &t.acked, ackSeq, nowNs)
	t.mu.Unlock()
}

func (t *tracer) Durable(_ uint32, durable uint64, nowNs int64) {
	t.mu.Lock()
	stamp(t.durableAt, &t.durable, durable, nowNs)
	t.mu.Unlock()
}

var (
	_ node.Observer      = (*tracer)(nil)
	_ node.StageObserver = (*tracer)(nil)
)

// Run runs one measurement. It returns when every command is answered, or
// with an error after a bounded drain.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Count <= 0 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Count {
		return nil, errors.New("gated: count must be > 0 and warmup in [0, count)")
	}
	if cfg.Size != 0 && cfg.Size < engine.CommandHeaderLen+1 {
		return nil, fmt.Errorf("gated: size %d below the %d-byte command header + 1", cfg.Size, engine.CommandHeaderLen)
	}
	if cfg.Size > wire.DefaultDatagramLen-wire.HeaderLen-8 {
		return nil, fmt.Errorf("gated: size %d does not fit a datagram", cfg.Size)
	}
	if cfg.Window <= 0 {
		cfg.Window = 4096
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "seqbus-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	clk := &clock{base: time.Now()}
	tr := newTracer(clk, 1, cfg.Count)
	c, err := startCluster(cfg, dir, clk, tr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return c.load(ctx, cfg, tr)
}

type cluster struct {
	nodes   []*node.Node
	primary netip.AddrPort
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		n.Close()
	}
}

func freePort() (uint16, error) {
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return uint16(l.LocalAddr().(*net.UDPAddr).Port), nil
}

func startCluster(cfg Config, dir string, clk *clock, tr *tracer) (*cluster, error) {
	var ports [3]uint16
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	lo := netip.MustParseAddr("127.0.0.1")
	addrs := map[uint32]netip.AddrPort{1: netip.AddrPortFrom(lo, ports[0]), 2: netip.AddrPortFrom(lo, ports[1])}
	group := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 76, byte(rand.IntN(250)), byte(1 + rand.IntN(250))}), ports[2])
	c := &cluster{primary: addrs[1]}
	tuning := cfg.Tuning
	if tuning.RecvBufferBytes == 0 {
		tuning.RecvBufferBytes = node.DefaultRecvBufferBytes
	}
	for id := uint32(1); id <= 2; id++ {
		other := 3 - id
		ncfg := node.Config{
			ID: id, Stream: 5, Dir: fmt.Sprintf("%s/node%d", dir, id), Listen: addrs[id], Group: group, Interface: "lo",
			Peers:   map[uint32]netip.AddrPort{other: addrs[other]},
			Journal: journal.Options{Policy: cfg.Fsync, SegmentBytes: 256 << 20},
			NewStateMachine: func() (engine.StateMachine, error) {
				ec := engine.DefaultConfig()
				ec.MaxSessions, ec.DedupWindow = 64, 8192
				return engine.New(ec)
			},
			Idle: cfg.Idle, Tuning: tuning, Clock: clk, Observer: tr, Key: cfg.Key,
			// Snapshots would stall the primary inline: none during a run.
			SnapshotEvery: 1 << 62,
			Log:           discardLogger(),
		}
		if id == 1 {
			ncfg.Role, ncfg.Epoch = node.RolePrimary, 1
		}
		n, err := node.New(ncfg)
		if err != nil {
			c.close()
			return nil, err
		}
		if err := n.Start(); err != nil {
			n.Close()
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// load runs the client: a sender goroutine at the fixed rate (or flat out
// within the window) and a receiver loop matching answers by client order
// id.
func (c *cluster) load(ctx context.Context, cfg Config, tr *tracer) (*Result, error) {
	conn, err := bus.ListenUnicast(bus.UnicastConfig{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0), Tuning: bus.Tuning{RecvBufferBytes: 8 << 20}})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	const session = 77
	n := cfg.Count
	intended := make([]int64, n+2)
	received := make([]int64, n+2)
	var answered, sentCount atomic.Int64
	clk := tr.clk

	// Receiver.
	recvDone := make(chan struct{})
	stopRecv := make(chan struct{})
	// One MAC per goroutine: a MAC reuses its hash state.
	var mac, recvMAC *auth.MAC
	var sealBuf []byte
	if cfg.Key != nil {
		mac, recvMAC = auth.NewMAC(auth.ClientKey(cfg.Key, 5)), auth.NewMAC(auth.ClientKey(cfg.Key, 5))
		sealBuf = make([]byte, 0, wire.MaxFrameLen+wire.TagLen)
	}
	wait := 5 * time.Millisecond
	if cfg.Idle.Kind == bus.IdleBusySpin {
		wait = 0 // spin, like the nodes
	}
	go func() {
		defer close(recvDone)
		bufs := make([][]byte, 64)
		for i := range bufs {
			bufs[i] = make([]byte, wire.MaxFrameLen)
		}
		sizes := make([]int, len(bufs))
		from := make([]netip.AddrPort, len(bufs))
		for {
			select {
			case <-stopRecv:
				return
			default:
			}
			k, err := conn.Receive(bufs, sizes, from, wait)
			if err != nil {
				return
			}
			now := clk.NowNs()
			for i := range k {
				f, _, err := wire.Parse(bufs[i][:sizes[i]])
				if err != nil || f.Type != wire.TypeOutput {
					continue
				}
				if recvMAC != nil && (f.Tag == nil || recvMAC.Verify(f.Signed, f.Tag) != nil) {
					continue
				}
				it := f.Messages()
				for {
					_, m, ok := it.Next()
					if !ok {
						break
					}
					o, err := engine.ParseOutput(m)
					if err != nil || o.ClientOrderID == 0 || o.ClientOrderID > uint64(n) {
						continue
					}
					if o.Kind != engine.KindAck && o.Kind != engine.KindReject {
						continue
					}
					if received[o.ClientOrderID] == 0 {
						received[o.ClientOrderID] = now
						answered.Add(1)
					}
				}
			}
		}
	}()

	// Sender (this goroutine).
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	begin := clk.NowNs()
	released0 := c.nodes[0].Released()
	var intervalNs float64
	if cfg.Rate > 0 {
		intervalNs = 1e9 / cfg.Rate
	}
	batchLen := wire.DefaultDatagramLen
	if mac != nil {
		batchLen -= wire.TagLen
	}
	batch := wire.NewBatch(batchLen)
	frames := [][]byte{nil}
	var cmd []byte
	body := make([]byte, max(cfg.Size-engine.CommandHeaderLen, 0))
	if len(body) > 0 {
		body[0] = 0xEE // not an op the engine knows: a reject after apply
	}
	order := engine.Request{Op: engine.OpNewOrder, Instrument: 1, Type: engine.Limit, Qty: 1}
	sent := 0
	var sendErr error
	for sent < n && sendErr == nil {
		if err := ctx.Err(); err != nil {
			sendErr = err
			break
		}
		now := clk.NowNs()
		due := n
		if intervalNs > 0 {
			due = min(int(float64(now-begin)/intervalNs)+1, n)
		}
		batch.Reset(wire.TypeCommand, wire.Origin{Stream: 5, Node: 1000}, 1)
		for sent < due && sent-int(answered.Load()) < cfg.Window {
			id := uint64(sent + 1)
			if cfg.Size == 0 {
				order.Side = engine.Side(1 + id%2)
				order.Price = 1000 + int64(id%3)
				cmd = engine.AppendRequest(cmd[:0], session, id, &order)
			} else {
				cmd = engine.AppendCommand(cmd[:0], session, id, body)
			}
			if !batch.Add(cmd) {
				break
			}
			if intervalNs > 0 {
				intended[id] = begin + int64(float64(sent)*intervalNs)
			} else {
				intended[id] = now
			}
			sent++
		}
		if batch.Count() > 0 {
			frames[0] = batch.Bytes()
			if mac != nil {
				sealBuf = wire.Seal(sealBuf[:0], frames[0])
				sealBuf = mac.Sign(sealBuf, sealBuf)
				frames[0] = sealBuf
			}
			if err := conn.Send(frames, c.primary); err != nil {
				sendErr = err
			}
			continue
		}
		// Nothing due (or the window is full): wait a little.
		if sent-int(answered.Load()) >= cfg.Window {
			time.Sleep(50 * time.Microsecond) // let the nodes have the CPU
		} else if intervalNs > 0 {
			next := begin + int64(float64(sent)*intervalNs)
			// Sleep until just before the next send. (Spinning here
			// instead was measured worse on 2 cores: the sender takes the
			// CPU the nodes need. A late timer counts against the bus.)
			if wait := next - clk.NowNs(); wait > 20_000 {
				time.Sleep(time.Duration(min(wait-10_000, 1_000_000)))
			} else {
				runtime.Gosched()
			}
		} else {
			runtime.Gosched()
		}
	}
	sentCount.Store(int64(sent))
	// Drain: bounded.
	deadline := time.Now().Add(30 * time.Second)
	for answered.Load() < int64(sent) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	end := clk.NowNs()
	runtime.ReadMemStats(&ms1)
	releasedN := c.nodes[0].Released() - released0
	close(stopRecv)
	<-recvDone
	if sendErr != nil {
		return nil, fmt.Errorf("gated: send: %w", sendErr)
	}
	got := int(answered.Load())
	res := &Result{Config: cfg, Hist: map[string]*hdrhistogram.Histogram{}, Sent: sent, Answered: got,
		Elapsed: time.Duration(end - begin)}
	res.RatePerSec = float64(got) / res.Elapsed.Seconds()
	res.ReleasedPerSec = float64(releasedN) / res.Elapsed.Seconds()
	if got > 0 {
		res.MallocsPerCmd = float64(ms1.Mallocs-ms0.Mallocs) / float64(got)
	}
	for _, s := range Stages {
		res.Hist[s] = NewHist()
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	rec := func(stage string, from, to int64) {
		if from > 0 && to >= from {
			_ = res.Hist[stage].RecordValue(max(to-from, 1))
		}
	}
	res.StartUnixMs = clk.base.UnixMilli()
	for id := cfg.Warmup + 1; id <= sent; id++ {
		seq := tr.seqOfID[id]
		rec(StageEndToEnd, intended[id], received[id])
		if at, got := intended[id], received[id]; at > 0 && got >= at {
			sec := int(at / 1e9) // seconds since the run's start
			for len(res.Intervals) <= sec {
				res.Intervals = append(res.Intervals, NewHist())
			}
			_ = res.Intervals[sec].RecordValue(max(got-at, 1))
		}
		if seq == 0 || seq >= uint64(len(tr.seqAt)) {
			continue
		}
		sq := tr.seqAt[seq]
		rec(StageSequenced, intended[id], sq)
		rec(StageStandby, sq, tr.standbyAt[seq])
		rec(StageAcked, sq, tr.ackedAt[seq])
		rec(StageDurable, sq, tr.durableAt[seq])
		rec(StageReleased, sq, tr.relAt[seq])
		rec(StageReceived, tr.relAt[seq], received[id])
	}
	if got < sent {
		return res, fmt.Errorf("gated: %d of %d commands unanswered after a 30 s drain", sent-got, sent)
	}
	return res, nil
}
