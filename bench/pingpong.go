package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/pace"
)

// PingPong limits and defaults.
const (
	// MessageBytesMin: the first 8 bytes carry the round trip's sequence
	// number, so a late reply to an earlier (timed out) ping is never taken
	// for the current one.
	MessageBytesMin     = 8
	MessageBytesDefault = 32
	// MessageBytesMax keeps a ping inside one unfragmented datagram on a
	// jumbo-frame LAN; loopback carries more, but a floor measurement for
	// bigger messages measures fragmentation, not the bus.
	MessageBytesMax = 8192
	// PingPongCountMax bounds a run (warm-up included): at the slowest
	// expected round trip (~100 µs) 10^8 trips is already hours.
	PingPongCountMax = 100_000_000
	// RatePerSecondMax bounds the target rate: a 2-hop loopback round trip
	// takes ≥ 6 µs here, so one outstanding ping cannot go faster than
	// ~170k/s; 10^7 leaves room for faster machines.
	RatePerSecondMax = 10_000_000
	// ReplyTimeoutDefault: a ping with no reply by then is counted lost.
	// Loopback drops only on a full socket buffer, so a loss is rare and a
	// second is long enough to ride out a descheduled echo thread.
	ReplyTimeoutDefault = time.Second
	// PingPongTimeoutDefault bounds the whole run when the config gives no
	// Timeout (the context may end it sooner).
	PingPongTimeoutDefault = 5 * time.Minute
	// IntervalLogIntervalDefault is the interval log's slice length.
	IntervalLogIntervalDefault = time.Second
	// HistogramHighestNs is the largest latency a PingPong histogram
	// tracks; larger values (only possible past ReplyTimeout, which loses
	// the ping) are recorded as this value.
	HistogramHighestNs = int64(60 * time.Second)
	// HistogramSignificantDigits: 3 digits is 0.1% resolution, ~7 ns at a
	// 7 µs round trip.
	HistogramSignificantDigits = 3

	// echoBatch: datagrams an echo reads per call; with one ping in flight
	// it never sees more than one.
	echoBatch = 8
)

// PingPongConfig configures PingPong. Zero values take the defaults.
type PingPongConfig struct {
	// MessageBytes is each ping's size (MessageBytesMin..MessageBytesMax;
	// 0 means MessageBytesDefault).
	MessageBytes int
	// Count is how many round trips are recorded (1..PingPongCountMax).
	Count int
	// Warmup round trips run first and are not recorded.
	Warmup int
	// RatePerSecond is the target send rate. At 0 pings go back to back
	// and latency counts from each actual send. Above 0 ping i is due at
	// start + i/rate and latency counts from that intended time (wrk2's
	// coordinated-omission correction): a slow round trip delays the next
	// sends, and their latency includes the wait.
	RatePerSecond float64
	// Hops is 2 (client → echo → client) or 4 (client → A → B → A →
	// client: A relays to B, B echoes, A relays back). 0 means 2.
	Hops int
	// Idle is how every receiver waits: the client and each hop's loop.
	// Spinning kinds lock their goroutines to OS threads. On 2 cores, a
	// 4-hop run with a spinning Idle has three spinners and starves.
	Idle bus.Idle
	// Tuning is applied to every socket (buffer sizes, SO_BUSY_POLL —
	// which loopback has no NAPI queue for; Result.Report shows what the
	// kernel granted).
	Tuning bus.Tuning
	// ReplyTimeout is how long the client waits for each reply before it
	// counts the ping lost (0 means ReplyTimeoutDefault).
	ReplyTimeout time.Duration
	// Timeout bounds the whole run (0 means PingPongTimeoutDefault).
	Timeout time.Duration
	// IntervalLog, if set, receives an HdrHistogram interval log of the
	// recorded latencies (ns), one interval per IntervalLogInterval (0
	// means IntervalLogIntervalDefault). Intervals are written inline by
	// the client, so the round trip after each write pays for it.
	IntervalLog         io.Writer
	IntervalLogInterval time.Duration
}

func (c PingPongConfig) withDefaults() (PingPongConfig, error) {
	if c.MessageBytes == 0 {
		c.MessageBytes = MessageBytesDefault
	}
	if c.Hops == 0 {
		c.Hops = 2
	}
	if c.ReplyTimeout == 0 {
		c.ReplyTimeout = ReplyTimeoutDefault
	}
	if c.Timeout == 0 {
		c.Timeout = PingPongTimeoutDefault
	}
	if c.IntervalLogInterval == 0 {
		c.IntervalLogInterval = IntervalLogIntervalDefault
	}
	switch {
	case c.MessageBytes < MessageBytesMin || c.MessageBytes > MessageBytesMax:
		return c, fmt.Errorf("%w: message bytes %d not in %d..%d", ErrConfig, c.MessageBytes, MessageBytesMin, MessageBytesMax)
	case c.Count < 1 || c.Warmup < 0 || c.Warmup >= PingPongCountMax || c.Count > PingPongCountMax-c.Warmup:
		return c, fmt.Errorf("%w: count %d + warmup %d not in 1..%d", ErrConfig, c.Count, c.Warmup, PingPongCountMax)
	case !(c.RatePerSecond >= 0 && c.RatePerSecond <= RatePerSecondMax):
		return c, fmt.Errorf("%w: rate %v/s not in 0..%d", ErrConfig, c.RatePerSecond, RatePerSecondMax)
	case c.Hops != 2 && c.Hops != 4:
		return c, fmt.Errorf("%w: hops %d, want 2 or 4", ErrConfig, c.Hops)
	case c.ReplyTimeout < 0 || c.Timeout < 0 || c.IntervalLogInterval < 0:
		return c, fmt.Errorf("%w: negative duration", ErrConfig)
	}
	return c, nil
}

// Describe gives the config as strings, for Summary.Config.
func (c PingPongConfig) Describe() map[string]string {
	c, _ = c.withDefaults()
	return map[string]string{
		"transport":     "udp-loopback",
		"hops":          strconv.Itoa(c.Hops),
		"message_bytes": strconv.Itoa(c.MessageBytes),
		"count":         strconv.Itoa(c.Count),
		"warmup":        strconv.Itoa(c.Warmup),
		"rate":          strconv.FormatFloat(c.RatePerSecond, 'f', -1, 64),
		"idle":          c.Idle.Kind.String(),
		"busy_poll_us":  strconv.Itoa(c.Tuning.BusyPollUs),
	}
}

// PingPongResult is what PingPong measured.
type PingPongResult struct {
	// Histogram holds one value per recorded round trip that got its
	// reply, in nanoseconds (1 ns .. HistogramHighestNs, 3 digits).
	Histogram *hdrhistogram.Histogram
	// Sent counts the pings of the recorded phase that were sent; Received
	// those that came back in time (== Histogram.TotalCount()); Lost the
	// rest. A run cut short by its context or Timeout has Sent < Count.
	Sent, Received, Lost int
	// Elapsed is the recorded phase's duration.
	Elapsed time.Duration
	// Late counts recorded pings sent more than a millisecond after their
	// intended time (rate mode only): the client itself could not keep
	// up, so the correction charged its own delay as latency.
	Late int
	// Report is what the kernel granted the client socket.
	Report bus.Report
}

// AchievedRatePerSecond is the recorded phase's round trips per second.
func (r *PingPongResult) AchievedRatePerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Elapsed.Seconds()
}

// PingPong measures the raw UDP round trip on loopback with bus sockets
// and no seqbus framing: the floor the replicated path is compared with.
// Every socket binds 127.0.0.1. The client runs on the calling goroutine
// with one ping in flight; the hops run bus loops with cfg.Idle.
//
// It stops after Count recorded round trips, when ctx ends or when
// cfg.Timeout passes, and always returns what it measured. The error is
// nil, ErrConfig (nothing ran), ErrLost (some pings got no reply; the
// result is still valid), the context's error, or a socket error.
func PingPong(ctx context.Context, cfg PingPongConfig) (*PingPongResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	net, err := startHops(cfg)
	if err != nil {
		return nil, err
	}
	defer net.close()

	locked := lockClientThread(cfg.Idle)
	if locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	c := newPingClient(cfg, net.client, net.first, locked)
	res := &PingPongResult{
		Histogram: newLatencyHistogram(),
		Report:    net.client.Report(),
	}
	var log *intervalRecorder
	for i := 0; i < cfg.Warmup+cfg.Count; i++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		recorded := i >= cfg.Warmup
		if i == cfg.Warmup {
			// The schedule and the clock restart for the recorded phase, so
			// a slow warm-up is not charged to it.
			c.scheduleStartNs = c.nowNs()
			c.scheduled = 0
			if cfg.IntervalLog != nil {
				log, err = newIntervalRecorder(cfg.IntervalLog, time.Now().UnixMilli(), cfg.IntervalLogInterval, cfg.Describe())
				if err != nil {
					return res, err
				}
			}
		}
		latencyNs, late, err := c.roundTrip(ctx, uint64(i))
		if !recorded {
			if err != nil && err != errNoReply {
				return res, err
			}
			continue
		}
		res.Sent++
		res.Elapsed = time.Duration(c.nowNs() - c.scheduleStartNs)
		if late {
			res.Late++
		}
		if err == errNoReply {
			res.Lost++
			continue
		}
		if err != nil {
			return res, err
		}
		res.Received++
		recordClamped(res.Histogram, latencyNs)
		if log != nil {
			if err := log.record(latencyNs, c.nowNs()-c.scheduleStartNs); err != nil {
				return res, err
			}
		}
	}
	if log != nil {
		if err := log.flush(c.nowNs() - c.scheduleStartNs); err != nil {
			return res, err
		}
	}
	if res.Lost > 0 {
		return res, fmt.Errorf("%w: %d of %d got no reply within %v", ErrLost, res.Lost, res.Sent, cfg.ReplyTimeout)
	}
	return res, nil
}

// lockClientThread says whether the client end locks its goroutine to its
// OS thread: only for the strategies that poll in a loop and yield with
// sched_yield (busy-spin, yield). Back-off's yield phase is
// runtime.Gosched and its last phase parks on the netpoller; a locked
// goroutine pays a thread hand-off for each (the P goes to another M and
// back). With three back-off loops on 2 cores that made the 4-hop floor
// fall behind its schedule: p50 443–704 ms at 10k/s, p50 169 µs unlocked.
func lockClientThread(idle bus.Idle) bool {
	return idle.Kind == bus.IdleBusySpin || idle.Kind == bus.IdleYield
}

func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, HistogramHighestNs, HistogramSignificantDigits)
}

func recordClamped(h *hdrhistogram.Histogram, latencyNs int64) {
	if err := h.RecordValue(min(max(latencyNs, 1), HistogramHighestNs)); err != nil {
		// The value was clamped into the histogram's range.
		panic("bench: clamped latency not recordable: " + err.Error())
	}
}

// hops is the sockets and loops of one run.
type hops struct {
	client  *bus.UDP
	first   netip.AddrPort // where the client sends
	sockets []*bus.UDP
	loops   []*bus.Loop
}

func (h *hops) close() {
	// Closing first makes a parked loop return at once instead of after
	// its park.
	for _, s := range h.sockets {
		s.Close()
	}
	for _, l := range h.loops {
		l.Stop()
	}
}

func startHops(cfg PingPongConfig) (*hops, error) {
	h := &hops{}
	listen := func() (*bus.UDP, error) {
		s, err := bus.ListenUnicast(bus.UnicastConfig{Tuning: cfg.Tuning}) // 127.0.0.1, ephemeral port
		if err == nil {
			h.sockets = append(h.sockets, s)
		}
		return s, err
	}
	var err error
	if h.client, err = listen(); err != nil {
		h.close()
		return nil, err
	}
	loopCfg := bus.LoopConfig{Idle: cfg.Idle, BatchSize: echoBatch, DatagramBytes: cfg.MessageBytes}
	echo, err := listen()
	if err != nil {
		h.close()
		return nil, err
	}
	h.first = echo.LocalAddr()
	if cfg.Hops == 4 {
		relay := echo                         // A
		if echo, err = listen(); err != nil { // B
			h.close()
			return nil, err
		}
		l, err := bus.StartLoop(relay, loopCfg, relayHandler(relay, h.client.LocalAddr(), echo.LocalAddr()))
		if err != nil {
			h.close()
			return nil, err
		}
		h.loops = append(h.loops, l)
	}
	l, err := bus.StartLoop(echo, loopCfg, echoHandler(echo))
	if err != nil {
		h.close()
		return nil, err
	}
	h.loops = append(h.loops, l)
	return h, nil
}

// echoHandler sends every datagram back to its sender. Send errors show in
// the socket's counters and, to the client, as a lost ping.
func echoHandler(s *bus.UDP) bus.Handler {
	out := make([][]byte, 1) // reused: no allocation per datagram
	return func(bufs [][]byte, sizes []int, from []netip.AddrPort) {
		for i := range sizes {
			out[0] = bufs[i][:sizes[i]]
			_ = s.Send(out, from[i])
		}
	}
}

// relayHandler forwards the client's datagrams to far and far's back to
// the client; anything from a third address is dropped (nothing else knows
// the port, but a relay must not amplify strays).
func relayHandler(s *bus.UDP, client, far netip.AddrPort) bus.Handler {
	out := make([][]byte, 1)
	return func(bufs [][]byte, sizes []int, from []netip.AddrPort) {
		for i := range sizes {
			out[0] = bufs[i][:sizes[i]]
			switch from[i] {
			case client:
				_ = s.Send(out, far)
			case far:
				_ = s.Send(out, client)
			}
		}
	}
}

// errNoReply: a ping's reply did not come within ReplyTimeout.
var errNoReply = fmt.Errorf("no reply")

// pingClient is the client end; every buffer is preallocated, so a round
// trip does not allocate (TestRoundTripAllocs).
type pingClient struct {
	conn         *bus.UDP
	to           netip.AddrPort
	idle         bus.Idle
	replyTimeout int64
	intervalNs   int64 // 0: back to back

	base            time.Time
	waiter          *pace.Waiter
	scheduleStartNs int64
	scheduled       int64 // pings scheduled since scheduleStartNs

	ping  [][]byte
	bufs  [][]byte
	sizes []int
	from  []netip.AddrPort
}

func newPingClient(cfg PingPongConfig, conn *bus.UDP, to netip.AddrPort, locked bool) *pingClient {
	c := &pingClient{
		conn:         conn,
		to:           to,
		idle:         cfg.Idle,
		replyTimeout: int64(cfg.ReplyTimeout),
		ping:         [][]byte{make([]byte, cfg.MessageBytes)},
		bufs:         make([][]byte, echoBatch),
		sizes:        make([]int, echoBatch),
		from:         make([]netip.AddrPort, echoBatch),
		base:         time.Now(),
	}
	if cfg.RatePerSecond > 0 {
		c.intervalNs = max(1, int64(float64(time.Second)/cfg.RatePerSecond))
	}
	for i := range c.bufs {
		c.bufs[i] = make([]byte, cfg.MessageBytes)
	}
	// The same generator as RunFloor and client.Load, on this process's
	// clock. Unlocked, it yields with Gosched so the hops' goroutines get
	// the P.
	wcfg := pace.WaiterConfig{Now: c.nowNs}
	if !locked {
		wcfg.Yield = runtime.Gosched
	}
	c.waiter = pace.NewWaiter(wcfg)
	return c
}

// nowNs is monotonic nanoseconds since the client's base.
func (c *pingClient) nowNs() int64 { return int64(time.Since(c.base)) }

// lateSendNs: a send this far behind its intended time counts as Late.
const lateSendNs = int64(time.Millisecond)

// roundTrip sends ping seq at its intended time and waits for its reply.
// It returns the latency from the intended send time (the actual one when
// pings go back to back), whether the send was late, and errNoReply, a
// context error or a socket error.
func (c *pingClient) roundTrip(ctx context.Context, seq uint64) (latencyNs int64, late bool, err error) {
	var intendedNs int64
	if c.intervalNs > 0 {
		intendedNs = c.scheduleStartNs + c.scheduled*c.intervalNs
		c.scheduled++
		c.waiter.Until(intendedNs, nil)
	}
	binary.LittleEndian.PutUint64(c.ping[0], seq)
	sentNs := c.nowNs()
	if c.intervalNs == 0 {
		intendedNs = sentNs
	}
	late = sentNs-intendedNs > lateSendNs
	if err := c.conn.Send(c.ping, c.to); err != nil {
		return 0, late, err
	}
	deadlineNs := sentNs + c.replyTimeout
	for {
		n, err := c.idle.Receive(c.conn, c.bufs, c.sizes, c.from)
		if err != nil {
			return 0, late, err
		}
		for i := 0; i < n; i++ {
			if c.sizes[i] >= MessageBytesMin && binary.LittleEndian.Uint64(c.bufs[i]) == seq {
				return c.nowNs() - intendedNs, late, nil
			}
			// A reply to an earlier ping that timed out: skip it.
		}
		if c.nowNs() > deadlineNs {
			return 0, late, errNoReply
		}
		if err := ctx.Err(); err != nil {
			return 0, late, err
		}
	}
}

// intervalRecorder slices the recorded latencies into an interval log.
type intervalRecorder struct {
	log      *IntervalLog
	h        *hdrhistogram.Histogram
	lengthNs int64
	startNs  int64 // current interval's start, from the recorded phase's start
	nextNs   int64
}

func newIntervalRecorder(w io.Writer, startUnixMs int64, length time.Duration, describe map[string]string) (*intervalRecorder, error) {
	comment := "seqbus bench pingpong"
	for _, k := range []string{"hops", "message_bytes", "rate", "idle"} {
		comment += " " + k + "=" + describe[k]
	}
	log, err := NewIntervalLog(w, startUnixMs, comment)
	if err != nil {
		return nil, err
	}
	return &intervalRecorder{log: log, h: newLatencyHistogram(), lengthNs: int64(length), nextNs: int64(length)}, nil
}

// record adds one latency and, once the interval has passed, writes it out
// and starts the next.
func (r *intervalRecorder) record(latencyNs, offsetNs int64) error {
	recordClamped(r.h, latencyNs)
	if offsetNs < r.nextNs {
		return nil
	}
	return r.flush(offsetNs)
}

func (r *intervalRecorder) flush(offsetNs int64) error {
	if r.h.TotalCount() == 0 {
		return nil
	}
	if err := r.log.Write(r.h, r.startNs, offsetNs); err != nil {
		return err
	}
	r.h.Reset()
	r.startNs = offsetNs
	r.nextNs = offsetNs + r.lengthNs
	return nil
}
