package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/monotime"
	"github.com/seqbus/seqbus/internal/pace"
	"github.com/seqbus/seqbus/wire"
	"github.com/seqbus/seqbus/witness"
)

// Options configure a Client.
type Options struct {
	Core    Config
	Primary netip.AddrPort // where commands go
	Local   netip.AddrPort // zero: 127.0.0.1, ephemeral port
	Idle    bus.Idle
	// OnResult, if set, is called (under the client's lock) for every
	// answered command, on the receive goroutine (without Poll). It may
	// hand the result to another goroutine over a channel: the receive
	// loop gives its P to the goroutine that wakes right after the batch
	// (bus.Loop), so the hand-off costs microseconds, not a steal.
	OnResult func(Result)
	// OnOutput, if set, sees every output of this session (executions too).
	OnOutput func(o *engine.Output)
	// Recorder, if set, gets a copy of every output received (answers,
	// duplicates, executions, unmatched), without blocking the receive
	// path; the caller closes it after closing the client.
	Recorder *Recorder
	// Conn, if set, is used instead of a new UDP socket (tests use an
	// in-memory one); the client closes it.
	Conn Conn
	// Witness and Nodes, when set, let the client find the primary after a
	// failover: it asks the witness who holds the lease every
	// QueryEvery (a tenth of it while commands have waited a fifth of it
	// with no answer) and, on a new holder, sends there and resends
	// everything in flight (same ids).
	Witness    netip.AddrPort
	Nodes      map[uint32]netip.AddrPort
	QueryEvery time.Duration
	// Key, when set, seals every command and witness query with the
	// stream's client key and drops (counting BadMAC) every answer that
	// does not carry a good MAC. Stream selects the key (0: 1).
	Key    *auth.MasterKey
	Stream uint16
	// DatagramBytes is the largest datagram the client sends (a batch of
	// commands, the MAC tag included with Key) and the size of its
	// receive buffers (never below bus.DatagramBytesDefault): 0 is
	// wire.DefaultDatagramLen, else wire.MinDatagramLen..wire.MaxFrameLen.
	// It must be the nodes' (nodeconfig.Config.DatagramBytes): a primary drops
	// and counts a larger datagram than its own size.
	DatagramBytes int
	// GRO turns UDP_GRO on for the client's socket (bus.Tuning.GRO): the
	// answers of a pass that the primary sent as one segmented run are
	// read whole. Off by default; it saved nothing measurable on loopback.
	GRO bool
	// Poll, when set, starts no receive goroutine: the socket is read only
	// by PollIO, on the caller's thread, without blocking. Load then reads
	// answers between sends from its generator loop (one locked OS thread
	// does everything, no hand-off between threads). A caller that uses
	// Submit in poll mode must call PollIO itself, from one goroutine.
	Poll bool
	// clock replaces monotime.Now for the package's own tests of timer
	// rules that compare what the client reads from its clock.
	clock func() int64
}

// DefaultQueryEvery: ask the witness who leads every 100 ms, a tenth of a
// lease; while commands wait 20 ms unanswered, every 10 ms, so a failover
// costs ~10 ms at most on top of the lease.
const DefaultQueryEvery = 100 * time.Millisecond

// Conn is the client's socket.
type Conn interface {
	bus.Conn
	LocalAddr() netip.AddrPort
}

// Client sends commands over UDP and matches the answers.
type Client struct {
	opts Options
	uc   Conn
	loop *bus.Loop // nil in poll mode

	// Poll mode's receive buffers, reused by every PollIO, and (on a UDP
	// socket) its epoll park for Load's waits over 2 ms.
	rxBufs  [][]byte
	rxSizes []int
	rxFrom  []netip.AddrPort
	parker  *bus.Parker
	rx      bus.ReadGate // parked waits' read gate (agent.go)

	mu      sync.Mutex
	core    *Core
	primary netip.AddrPort
	leader  uint32
	epoch   uint64
	batch   *wire.Batch
	// resendBatch carries the overdue resends in default-sized datagrams
	// when DatagramBytes is larger (nil otherwise): a resend still gets
	// through to a primary configured smaller, or across a path that
	// drops jumbo frames, at the resend delay instead of never.
	resendBatch *wire.Batch
	resendFn    func(cmd []byte) // c.queueResend, made once
	sendBuf     [1][]byte
	lastQ       int64
	// rejoinLeft: quick resends left after a switch to a new primary
	// (switchedLocked), rejoinNs the last one and rejoinEvery their
	// spacing.
	rejoinLeft  int
	rejoinNs    int64
	rejoinEvery int64
	// hurryUntil: until then the client asks the arbiter every
	// timersEveryNs (its primary said NOT_LEADING: onNotLeading).
	hurryUntil int64
	qbuf       []byte
	rbuf       []byte // the replay request
	qid        uint64
	// Failovers counts primary changes seen through the witness, or
	// given by SetPrimary (an etcd follower).
	failovers uint64
	mac       *auth.MAC // nil without Options.Key
	sealBuf   []byte
	// out is the one decoded output onBatch hands to the callbacks: a
	// field, so decoding an answer allocates nothing.
	out engine.Output
	// lastTimersNs is when PollIO last ran the timers; ioErr the receive
	// error that stopped PollIO reading (poll mode).
	lastTimersNs int64
	ioErr        error
	// closed is set first thing in Close: PollIO then stops Load and
	// drain with ErrClosed (a closed socket's read gate may never say
	// "readable" again, so the receive error alone would not).
	closed atomic.Bool
}

// Dial opens the client's socket and, unless opts.Poll, starts its receive
// loop.
func Dial(opts Options) (*Client, error) {
	if opts.Core.Session == 0 {
		return nil, errors.New("client: session 0 is reserved for market data")
	}
	if opts.Core.MaxInFlight < 0 || opts.Core.MaxInFlight > MaxInFlightMax {
		return nil, ErrBadMaxInFlight
	}
	var err error
	if opts.DatagramBytes, err = datagramBytes(opts.DatagramBytes); err != nil {
		return nil, err
	}
	// 4 MB of receive buffer: answers arrive in bursts when a batch of
	// commands is released at once.
	var uc Conn = opts.Conn
	if uc == nil {
		local := opts.Local
		if !local.IsValid() && opts.Primary.IsValid() && !opts.Primary.Addr().IsLoopback() {
			// A loopback socket cannot reach another host: bind the
			// wildcard and let the route choose the source.
			local = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
		}
		u, err := bus.ListenUnicast(bus.UnicastConfig{Addr: local, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20, GRO: opts.GRO}})
		if err != nil {
			return nil, err
		}
		uc = u
	}
	if opts.QueryEvery <= 0 {
		opts.QueryEvery = DefaultQueryEvery
	}
	if opts.Stream == 0 {
		opts.Stream = 1
	}
	batchLen := opts.DatagramBytes
	c := &Client{opts: opts, uc: uc, core: NewCore(opts.Core), primary: opts.Primary}
	if opts.Key != nil {
		c.mac = auth.NewMAC(auth.ClientKey(opts.Key, opts.Stream))
		c.sealBuf = make([]byte, 0, wire.MaxFrameLen+wire.TagLen)
		batchLen -= wire.TagLen // the tag fits the datagram
	}
	c.batch = wire.NewBatch(batchLen)
	c.batch.Reset(wire.TypeCommand, c.origin(), 1)
	if opts.DatagramBytes > wire.DefaultDatagramLen {
		c.resendBatch = wire.NewBatch(wire.DefaultDatagramLen - (opts.DatagramBytes - batchLen))
		c.resendBatch.Reset(wire.TypeCommand, c.origin(), 1)
	}
	c.resendFn = c.queueResend
	rxBytes := bus.RecvBufferBytes(opts.DatagramBytes)
	if opts.Poll {
		arena := make([]byte, pollBatch*rxBytes)
		c.rxBufs = make([][]byte, pollBatch)
		for i := range c.rxBufs {
			c.rxBufs[i] = arena[i*rxBytes : (i+1)*rxBytes : (i+1)*rxBytes]
		}
		c.rxSizes = make([]int, pollBatch)
		c.rxFrom = make([]netip.AddrPort, pollBatch)
		if u, ok := uc.(*bus.UDP); ok {
			if c.parker, err = bus.NewParker(u); err != nil {
				uc.Close()
				return nil, err
			}
			c.rx.P = c.parker // parked waits (agent.go) and awaitWindow
		}
		return c, nil
	}
	c.loop, err = bus.StartLoop(uc, bus.LoopConfig{Idle: opts.Idle, DatagramBytes: rxBytes}, c.onBatch)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

// datagramBytes defaults and bounds a configured datagram size
// (Options.DatagramBytes, MDOptions.DatagramBytes).
func datagramBytes(n int) (int, error) {
	if n == 0 {
		return wire.DefaultDatagramLen, nil
	}
	if n < wire.MinDatagramLen || n > wire.MaxFrameLen {
		return 0, fmt.Errorf("client: datagram size %d bytes not in %d..%d", n, wire.MinDatagramLen, wire.MaxFrameLen)
	}
	return n, nil
}

// nowNs is CLOCK_MONOTONIC: every time the client stamps (Result's stage
// times) is absolute and comparable with the nodes' on the same host.
func (c *Client) nowNs() int64 {
	if c.opts.clock != nil {
		return c.opts.clock()
	}
	return monotime.Now()
}

func (c *Client) origin() wire.Origin {
	return wire.Origin{Stream: c.opts.Stream, Node: uint32(c.opts.Core.Session)}
}

// seal returns frame sealed with the client key, or frame without a key.
func (c *Client) seal(frame []byte) []byte {
	if c.mac == nil {
		return frame
	}
	b := wire.Seal(c.sealBuf[:0], frame)
	c.sealBuf = c.mac.Sign(b, b)
	return c.sealBuf
}

// verify reports whether f may be used: always without a key; with one,
// only with a good MAC under the client key.
func (c *Client) verify(f *wire.Frame) bool {
	return verifyClientFrame(c.mac, f)
}

func verifyClientFrame(mac *auth.MAC, f *wire.Frame) bool {
	return mac == nil || (f.Tag != nil && mac.Verify(f.Signed, f.Tag) == nil)
}

// LocalAddr is the client's address (where answers come back).
func (c *Client) LocalAddr() netip.AddrPort { return c.uc.LocalAddr() }

// Close stops the receive loop and closes the socket.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.uc.Close()
	if c.loop != nil {
		c.loop.Stop()
	}
	if c.parker != nil {
		c.parker.Close()
	}
	return nil
}

// SetPrimary points the client at a new primary and resends everything in
// flight there (same ids: the engine's dedup table answers those already
// applied with their original result). A move from one primary to
// another counts as a failover (Failovers), as one the witness reports.
func (c *Client) SetPrimary(addr netip.AddrPort) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.primary.IsValid() && addr != c.primary {
		c.failovers++
	}
	c.primary = addr
	return c.switchedLocked(c.nowNs())
}

// switchedLocked resends everything in flight to the new primary and asks
// it for the session's outputs after the last one delivered (it holds
// those the old one may never have released). The witness names a holder
// as it grants the lease; the node promotes a few ms later and drops the
// commands that reach it before: until an answer arrives, Poll resends
// again every tenth of QueryEvery, rejoinResends times. After a
// NOT_LEADING (a planned handover: the client learns the new holder the
// moment it is granted, before it has promoted) it resends every
// timersEveryNs over the same span instead, so the new primary's first
// answer follows its promotion by at most that.
func (c *Client) switchedLocked(now int64) int {
	n := c.core.ResendAll(now, c.queue)
	c.flushLocked()
	c.rejoinLeft, c.rejoinNs, c.rejoinEvery = rejoinResends, now, max(int64(c.opts.QueryEvery)/10, timersEveryNs)
	if now < c.hurryUntil {
		c.rejoinLeft = int(int64(rejoinResends) * c.rejoinEvery / timersEveryNs)
		c.rejoinEvery = timersEveryNs
	}
	c.hurryUntil = 0 // a holder is named: the usual cadence from here
	c.core.Reconnected()
	c.core.PollReplay(now, c.sendReplayRequest)
	return n
}

// rejoinResends bounds the quick resends after a switch (then the
// ResendAfterNs schedule): at the default QueryEvery, 50 ms of them.
const rejoinResends = 5

// pollRejoin resends everything in flight again when the new primary has
// not answered since the last resend (pollLocked's rejoin step).
func (c *Client) pollRejoin(now int64) int {
	if c.rejoinLeft == 0 {
		return 0
	}
	if c.core.UnansweredNs(now) < now-c.rejoinNs {
		c.rejoinLeft = 0 // an answer since, or nothing in flight
		return 0
	}
	if now-c.rejoinNs < c.rejoinEvery {
		return 0
	}
	c.rejoinLeft--
	c.rejoinNs = now
	// In default-sized frames, as Poll's overdue resends (pollLocked sends
	// the last one).
	return c.core.ResendAll(now, c.resendFn)
}

// SessionStats returns the session-sequence counters (gaps, replays).
func (c *Client) SessionStats() SessionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.SessionStats()
}

// sendReplayRequest asks the primary for this session's outputs from
// output seq from on (a REPLAY_REQUEST, sealed like commands).
func (c *Client) sendReplayRequest(from uint64) {
	r := wire.ReplayRequest{Origin: c.origin(), Session: c.opts.Core.Session, From: from}
	c.rbuf = r.Append(c.rbuf[:0])
	c.sendBuf[0] = c.seal(c.rbuf)
	if err := c.uc.Send(c.sendBuf[:], c.primary); err != nil {
		c.core.stats.SendErrors++
	}
	c.sendBuf[0] = nil
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Stats()
}

// InFlight is the number of unanswered commands.
func (c *Client) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.InFlight()
}

// Submit sends one command now and returns its client order id.
func (c *Client) Submit(r *engine.Request) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowNs()
	id, cmd, err := c.core.Next(r, now, now)
	if err != nil {
		return 0, err
	}
	c.queue(cmd)
	c.flushLocked()
	return id, nil
}

// queue adds a command to the outgoing COMMAND frame, sending the frame
// first if it is full.
func (c *Client) queue(cmd []byte) {
	if !c.batch.Add(cmd) {
		c.flushLocked()
		c.batch.Add(cmd)
	}
}

func (c *Client) flushLocked() { c.sendBatch(c.batch) }

// queueResend adds an overdue resend to its own default-sized frame
// (resendBatch), or to the outgoing frame when there is none.
func (c *Client) queueResend(cmd []byte) {
	b := c.resendBatch
	if b == nil {
		c.queue(cmd)
		return
	}
	if !b.Add(cmd) {
		c.sendBatch(b)
		b.Add(cmd)
	}
}

// sendBatch sends b's COMMAND frame to the primary, if it holds any.
func (c *Client) sendBatch(b *wire.Batch) {
	if b == nil || b.Count() == 0 {
		return
	}
	c.sendBuf[0] = c.seal(b.Bytes())
	if err := c.uc.Send(c.sendBuf[:], c.primary); err != nil {
		c.core.stats.SendErrors++
	}
	c.sendBuf[0] = nil
	b.Reset(wire.TypeCommand, c.origin(), 1)
}

// Poll resends overdue commands and asks the witness who leads; call it
// regularly (every few ms).
func (c *Client) Poll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pollLocked(c.nowNs())
}

func (c *Client) pollLocked(now int64) int {
	n := c.core.Poll(now, c.resendFn) + c.pollRejoin(now)
	c.flushLocked()
	c.sendBatch(c.resendBatch)
	c.core.PollReplay(now, c.sendReplayRequest)
	if c.queryDue(now) {
		c.queryLocked(now)
	}
	return n
}

// queryLocked asks the witness who holds the lease (nothing without a
// witness: a caller that asks another arbiter paces itself by
// QueryEvery).
func (c *Client) queryLocked(now int64) {
	if !c.opts.Witness.IsValid() {
		return
	}
	c.lastQ = now
	c.qid++
	c.qbuf = witness.AppendQuery(c.qbuf[:0], arbiter.NodeID(uint32(c.opts.Core.Session)), c.opts.Stream, c.qid)
	c.sendBuf[0] = c.seal(c.qbuf)
	_ = c.uc.Send(c.sendBuf[:], c.opts.Witness)
	c.sendBuf[0] = nil
}

// onNotLeading takes a NOT_LEADING from the node the client sends to (from
// its address; with a key, only a frame with a good MAC gets here): it
// leads the client's epoch, or a newer one, no more. The client asks the
// arbiter at once and then every timersEveryNs, for up to QueryEvery or
// until a holder is named (switchedLocked), rather than wait for its
// commands to go unanswered a fifth of QueryEvery. From anyone else, or of
// an older epoch than the holder the arbiter last named, it is ignored.
func (c *Client) onNotLeading(f *wire.Frame, src netip.AddrPort, now int64) {
	if !src.IsValid() || unmapped(src) != c.primary || f.Epoch < c.epoch {
		return
	}
	c.core.stats.NotLeading++
	c.hurryUntil = now + int64(c.opts.QueryEvery)
	c.queryLocked(now)
}

// queryDue: ask the witness every QueryEvery, and every tenth of it
// (at least timersEveryNs) while commands have waited a fifth of it with
// no answer: the primary may be gone, and learning the new one is the
// failover's last step (at the default, ~5 ms after the promotion
// instead of ~50). In steady state the witness sees one query per
// QueryEvery; during an outage ten.
func (c *Client) queryDue(now int64) bool { return now-c.lastQ >= c.queryEvery(now) }

func (c *Client) queryEvery(now int64) int64 {
	if now < c.hurryUntil {
		return timersEveryNs
	}
	every := int64(c.opts.QueryEvery)
	if c.core.UnansweredNs(now) >= every/5 {
		every = max(every/10, timersEveryNs)
	}
	return every
}

// QueryEveryMin is the shortest QueryEvery says: the client's timer
// cadence, used after a NOT_LEADING. A caller that asks another arbiter
// itself checks QueryEvery this often.
const QueryEveryMin = time.Duration(timersEveryNs)

// QueryEvery is how often to ask who leads now: Options.QueryEvery, or a
// tenth of it while commands wait unanswered, or QueryEveryMin after a
// NOT_LEADING (for a caller that asks another arbiter itself, e.g. etcd).
func (c *Client) QueryEvery() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.queryEvery(c.nowNs()))
}

// onInfo follows the lease holder the witness reports, and raises the
// epoch fence to its epoch (Core.LearnEpoch) when the reply comes from
// the witness's address or carried a good MAC.
func (c *Client) onInfo(f *wire.Frame, from netip.AddrPort) {
	r, err := witness.DecodeReply(f)
	if err != nil || r.Kind != arbiter.ReplyInfo || r.Holder == arbiter.NodeNone {
		return
	}
	if c.mac != nil || (from.IsValid() && unmapped(from) == c.opts.Witness) {
		c.core.LearnEpoch(r.Epoch)
	}
	addr, ok := c.opts.Nodes[uint32(r.Holder)]
	if !ok || r.Epoch < c.epoch || (uint32(r.Holder) == c.leader && addr == c.primary) {
		return
	}
	c.leader, c.epoch = uint32(r.Holder), r.Epoch
	if addr == c.primary {
		return
	}
	c.primary = addr
	c.failovers++
	c.switchedLocked(c.nowNs())
}

// fromNode reports whether a frame from addr may raise the epoch fence
// (Core.Fence): it carried a good MAC (with a key, every frame that got
// this far did), or it comes from the primary or a node the client was
// given.
func (c *Client) fromNode(addr netip.AddrPort) bool {
	if c.mac != nil {
		return true
	}
	if !addr.IsValid() {
		return false
	}
	addr = unmapped(addr)
	if addr == c.primary {
		return true
	}
	for _, a := range c.opts.Nodes {
		if a == addr {
			return true
		}
	}
	return false
}

// unmapped is addr with an IPv4-mapped IPv6 address as plain IPv4 (how
// addresses are configured).
func unmapped(addr netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
}

// LearnEpoch raises the client's epoch fence (Core.LearnEpoch) to an
// epoch another arbiter says is held (e.g. etcd, for a caller that asks
// it itself and calls SetPrimary): nothing of an older epoch is
// delivered from now on.
func (c *Client) LearnEpoch(epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.core.LearnEpoch(epoch)
}

// Primary is the address commands go to now.
func (c *Client) Primary() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary
}

// Failovers counts primary changes learnt from the witness or given by
// SetPrimary (a caller that follows another arbiter, e.g. etcd).
func (c *Client) Failovers() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failovers
}

func (c *Client) onBatch(bufs [][]byte, sizes []int, from []netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowNs()
	for i := range sizes {
		f, _, err := wire.Parse(bufs[i][:sizes[i]])
		if err == nil && !c.verify(&f) {
			c.core.stats.BadMAC++
			continue
		}
		var src netip.AddrPort
		if i < len(from) {
			src = from[i]
		}
		if err == nil && f.Type == wire.TypeLeaseInfo {
			c.onInfo(&f, src)
			continue
		}
		if err == nil && f.Type == wire.TypeNotLeading {
			c.onNotLeading(&f, src, now)
			continue
		}
		if err == nil && f.Type == wire.TypeReplayEnd {
			// A refusal passes the fence: it carries nothing to deliver,
			// and the node the client switched to refuses with the epoch
			// it still follows until it has promoted (Core.OnReplayEnd).
			if e, err := wire.DecodeReplayEnd(&f); err == nil && e.Session == c.opts.Core.Session &&
				(c.core.Fence(f.Epoch, c.fromNode(src)) || e.Status == wire.ReplayRefused) {
				c.core.OnReplayEnd(ReplayAnswer{From: e.From, Next: e.Next, Highest: e.Highest,
					TooOld: e.Status == wire.ReplayTooOld, Refused: e.Status == wire.ReplayRefused})
			}
			continue
		}
		if err != nil || f.Type != wire.TypeOutput {
			c.core.stats.BadOutputs++
			continue
		}
		replay := f.Flags&wire.FlagReplay != 0
		fresh := c.core.Fence(f.Epoch, c.fromNode(src))
		c.core.stats.BadOutputs += eachOutput(&f, &c.out, func(idx int, o *engine.Output, payload []byte) {
			// Exactly once, in order, and never from a deposed primary
			// (fence.go): a repeat, an output beyond a gap or one of an
			// epoch older than the fence is not delivered (a gap asks for
			// a replay, which delivers it); the record still has it,
			// marked dropped.
			if !fresh {
				c.core.stats.StaleOutputs++
			}
			if !fresh || !c.core.Admit(o, replay) {
				if c.opts.Recorder != nil {
					c.opts.Recorder.add(&f, idx, c.opts.Core.Session, o, payload, false, true)
				}
				return
			}
			if c.opts.OnOutput != nil {
				c.opts.OnOutput(o)
			}
			res, ok := c.core.OnOutput(o, now)
			if ok {
				res.Epoch, res.Seq = f.Epoch, f.Seq
			}
			if c.opts.Recorder != nil {
				c.opts.Recorder.add(&f, idx, c.opts.Core.Session, o, payload, ok, false)
			}
			if ok && c.opts.OnResult != nil {
				c.opts.OnResult(res)
			}
		})
	}
	// A gap seen in this batch asks for its replay at once (paced).
	c.core.PollReplay(now, c.sendReplayRequest)
}

// Poll-mode bounds.
const (
	// timersEveryNs: PollIO runs the resend and witness-query timers at
	// most every 2 ms (resends wait 250 ms and queries 100 ms, so 2 ms is
	// precise enough, and the scan of the in-flight window stays off most
	// passes).
	timersEveryNs = 2_000_000
	// pollBatch bounds the datagrams one PollIO reads and handles (~1–2 µs
	// each), so a burst of answers delays the generator's next send by tens
	// of microseconds at most: the Waiter calls PollIO again at once after
	// a pass that did work, re-checking the clock in between.
	pollBatch = 16
)

// PollIO reads one batch (up to 16) of the answers waiting on the socket
// without blocking (poll mode; in goroutine mode the receive loop reads
// them and PollIO only runs the timers), handles them (OnResult and
// OnOutput run on the caller's goroutine), and at most every 2 ms resends
// overdue commands and asks the witness who leads. nowNs is monotime.Now().
// It returns the datagrams read plus the commands resent; it does not
// allocate on the receive path. In poll mode call it from one goroutine
// only. After a receive error (the socket closed) or Close it reads no
// more; Load returns that error (ErrClosed after Close).
func (c *Client) PollIO(nowNs int64) int {
	if c.closed.Load() {
		c.mu.Lock()
		if c.ioErr == nil {
			c.ioErr = ErrClosed
		}
		c.mu.Unlock()
		return 0
	}
	work := 0
	if c.loop == nil && c.ioErr == nil && c.rx.ReadNow() {
		n, err := c.uc.Receive(c.rxBufs, c.rxSizes, c.rxFrom, 0)
		if err != nil {
			c.mu.Lock()
			c.ioErr = err
			c.mu.Unlock()
		} else if n > 0 {
			c.onBatch(c.rxBufs[:n], c.rxSizes[:n], c.rxFrom[:n])
			work += n
		}
	}
	c.mu.Lock()
	if nowNs-c.lastTimersNs >= timersEveryNs {
		c.lastTimersNs = nowNs
		work += c.pollLocked(nowNs)
	}
	c.mu.Unlock()
	return work
}

// eachOutput decodes every engine output of an OUTPUT frame into *scratch,
// calling fn for each with its index in the frame and its payload (fn must
// not keep the pointer); it returns how many did not decode. The caller
// owns scratch, so nothing escapes per output: a local passed to fn would
// be moved to the heap once per answer.
func eachOutput(f *wire.Frame, scratch *engine.Output, fn func(idx int, o *engine.Output, payload []byte)) (bad uint64) {
	it := f.Messages()
	for idx := 0; ; idx++ {
		_, msg, ok := it.Next()
		if !ok {
			return bad
		}
		if err := scratch.Parse(msg); err != nil {
			bad++
			continue
		}
		fn(idx, scratch, msg)
	}
}

// ErrUnanswered is returned by Load when commands are still unanswered at
// the end of its drain time.
var ErrUnanswered = errors.New("client: commands unanswered")

// ErrClosed: the client was closed while Load ran.
var ErrClosed = errors.New("client: closed")

// ErrNoAnswer is returned by Load (wrapped, with the address and the
// counts) when not one command was answered: nothing serves at the
// primary's address, or it drops every frame (another key, another
// stream).
var ErrNoAnswer = errors.New("client: the primary never answered")

// LoadConfig is a fixed-rate load (wrk2 style): command i is meant to be
// sent at start + i/Rate, and its latency is measured from that intended
// time, so a stall counts against every command it delayed.
type LoadConfig struct {
	Rate        float64 // commands per second
	Count       uint64
	Instruments uint32
	Seed        uint64
	// Size, when > 0, sends opaque commands of Size bytes (header
	// included, CommandHeaderLen+1..MaxCommandLen) that the matching
	// engine rejects after sequencing, journaling and replicating them:
	// the bus's cost at a given size. 0 sends real orders (39 bytes).
	Size int
	// Drain bounds the wait for the last answers after the last send.
	Drain time.Duration
	// SpinNs is the generator's spin window before each send
	// (pace.WaiterConfig.SpinNs; 0 means pace.ParkSpinNsDefault, 10 µs,
	// in poll mode on UDP, where the generator parks on its socket
	// outside it, and pace.SpinNsDefault, 20 µs, elsewhere, where it
	// yields the CPU). Under CPU contention a
	// sched_yield can cost a scheduler slice; spinning the whole interval
	// (SpinNs ≥ 1e9/Rate) keeps time better and never gives the CPU away.
	SpinNs int64
	// Nice, when not 0, is the nice value of the generator's thread for
	// the run (poll mode only; restored afterwards; below 0 needs
	// CAP_SYS_NICE): where the nodes share the generator's cores, their
	// wake-ups preempt it at its send times, and that lateness is charged
	// to the bus. LoadReport.NiceErr says when it could not be set; the
	// run goes on at the thread's own priority.
	Nice int
	// Park makes the poll-mode generator park on its socket between sends
	// (epoll_pwait2 until SpinNs before each send, woken by an answer): a
	// few syscalls per command instead of tens, and no CPU burnt while it
	// waits, at the price of a wake-up per answer and per send (on a VM
	// whose idle vCPUs halt, ~20 µs at p50: docs/tuning.md). Off, the
	// generator spins then yields, and reads answers as they arrive.
	Park bool
	// CoalesceNs, when > 0, makes the generator send in bursts: it waits
	// until the oldest unsent command is CoalesceNs past its intended
	// time, then sends every command due (in as few datagrams as they
	// fill), as an application that hands its client a burst per event
	// would. Without it, at rates whose interval is under the spin window
	// the generator never waits long enough to yield or park and takes a
	// whole core: on a machine the nodes share, that core is taken from
	// them. The added wait is not hidden: latency still runs from each
	// command's intended time, so a burst's first command is charged up to
	// CoalesceNs (plus the wake-up) more. The generator parks until about
	// then (pace.Waiter.UntilLoose: its learnt wake-up lateness early, never
	// before the oldest is due) and does not spin to hit the time: it takes
	// no CPU between bursts. 0: send each command at its time. At most
	// CoalesceNsMax.
	CoalesceNs int64
}

// RateMax bounds LoadConfig.Rate, per second: a command every 100 ns,
// beyond what one client's loop paces; past it the schedule's interval
// rounds to nothing and a fixed rate means nothing.
const RateMax = 10_000_000

// CoalesceNsMax bounds LoadConfig.CoalesceNs: 10 ms.
const CoalesceNsMax = int64(10_000_000)

// SpinNsMax bounds LoadConfig.SpinNs: 1 s. A window at least the
// interval already spins throughout; a longer one would spin a core
// through a slow load's every gap.
const SpinNsMax = int64(1_000_000_000)

// LoadReport is what a Load run saw.
type LoadReport struct {
	Sent, Answered uint64
	Elapsed        time.Duration
	Stats          Stats
	// Pace is the generator's own lateness (commands sent more than 10 µs
	// after their intended time) and IntendedToSent its distribution (ns).
	Pace           pace.Stats
	IntendedToSent *hdrhistogram.Histogram
	// NiceErr is why LoadConfig.Nice was not applied (nil when it was, or
	// was not asked for).
	NiceErr error
}

// Load timing.
const (
	// loadLeadNs: the schedule starts 1 ms after Load is called, so the
	// first command is not late by Load's own setup.
	loadLeadNs = int64(time.Millisecond)
	// backPressureWaitNs: with the in-flight window full, poll for answers
	// this long before trying again.
	backPressureWaitNs = int64(10 * time.Microsecond)
	// backPressureParkNs bounds one park of awaitWindow (the timers and
	// ctx are checked between parks).
	backPressureParkNs = int64(time.Millisecond)
	// drainPassNs: one drain pass polls this long.
	drainPassNs = int64(100 * time.Microsecond)
)

// Load runs a fixed-rate load of limit and market orders around a mid
// price (so that they trade and the book stays bounded), calling rec with
// every answer. It returns when every command is answered, or with
// ErrUnanswered after Drain.
//
// The generator is internal/pace on the calling goroutine: it waits for
// each intended send time by polling the clock and, in poll mode
// (Options.Poll), the socket through PollIO (parked on the socket until
// SpinNs before the next send, see agent.go), never with a Go timer, which would round
// sub-millisecond waits up to ~1 ms. In poll mode the goroutine is locked
// to its OS thread for the run and yields with sched_yield; in goroutine
// mode it yields with runtime.Gosched, so the receive goroutine gets a P.
// Commands due by the time it wakes go out in one frame; each Result's
// IntendedNs is its slot in the schedule and SentNs the time read just
// before the send. The drain polls the same way, bounded by cfg.Drain.
// The waits under 2 ms cost a CPU for the run (see internal/pace).
func (c *Client) Load(ctx context.Context, cfg LoadConfig, rec func(Result)) (LoadReport, error) {
	body, err := cfg.defaults()
	if err != nil {
		return LoadReport{}, err
	}
	defer c.hookResults(rec)()
	wcfg, release, niceErr := c.generatorThread(cfg)
	defer release()
	w := pace.NewWaiter(wcfg)
	poll := c.PollIO // one method value for the run: no allocation per wait
	gen := orderGen{state: cfg.Seed | 1, instruments: cfg.Instruments}
	sched := pace.NewSchedule(c.nowNs()+loadLeadNs, cfg.Rate)
	var sent uint64
	var r engine.Request
	pending := false // r was generated but not yet accepted (window full)
	report := func() LoadReport {
		st := c.Stats()
		return LoadReport{Sent: sent, Answered: st.Answered, Elapsed: time.Duration(c.nowNs() - sched.StartNs), Stats: st,
			Pace: w.Stats(), IntendedToSent: w.Histogram(), NiceErr: niceErr}
	}
	for sent < cfg.Count {
		if sent&255 == 0 {
			if err := ctx.Err(); err != nil {
				return report(), err
			}
		}
		now := untilSend(w, sched.Due(sent), cfg.CoalesceNs, poll)
		queued := 0
		c.mu.Lock()
		for sent < cfg.Count && sched.Due(sent) <= now {
			if !pending && body == nil {
				r, pending = gen.next(), true
			}
			intended := sched.Due(sent)
			var cmd []byte
			var err error
			if body != nil {
				_, cmd, err = c.core.NextPayload(body, intended, now)
			} else {
				_, cmd, err = c.core.Next(&r, intended, now)
			}
			if err != nil {
				break // window full: back-pressure, below
			}
			pending = false
			c.queue(cmd)
			w.Sent(intended, now)
			sent++
			queued++
		}
		c.flushLocked()
		ioErr := c.ioErr
		c.mu.Unlock()
		if ioErr != nil {
			return report(), ioErr
		}
		// Read answers after every send too: a generator behind its
		// schedule never waits, and Until polls only while waiting.
		if queued == 0 || !w.Parks(now, sched.Due(sent)+cfg.CoalesceNs) {
			poll(now) // else the next wait parks on the socket
		}
		if queued == 0 {
			if err := ctx.Err(); err != nil {
				return report(), err
			}
			c.awaitWindow(w, poll)
		}
	}
	if err := c.drain(ctx, w, poll, cfg.Drain); err != nil {
		return report(), err
	}
	rep := report()
	if err := ctx.Err(); err != nil {
		return rep, err // interrupted while draining: not a failure to answer
	}
	return rep, c.unanswered(rep, sent)
}

// untilSend waits for the next send: the oldest unsent command's time
// dueNs, or with coalescing a burst's, which is loose: not before dueNs,
// about coalesceNs after it, with no spin to hit it
// (pace.Waiter.UntilLoose).
func untilSend(w *pace.Waiter, dueNs, coalesceNs int64, poll func(nowNs int64) int) int64 {
	if coalesceNs > 0 {
		return w.UntilLoose(dueNs+coalesceNs, coalesceNs, poll)
	}
	return w.Until(dueNs, poll)
}

// awaitWindow waits, with the in-flight window full, for an answer to
// free a slot. Nothing can be sent before one arrives, so a generator
// that spun here would only take the CPU the nodes need to answer it (a
// flat-out run on two cores measured its load client at a whole core,
// 35 % of all CPU time, in recvmmsg calls that found nothing). A poll-mode
// client on a UDP socket parks in epoll_pwait2 until the socket is
// readable, at most backPressureParkNs, then polls (one park and at most
// one receive per answer or per millisecond); in goroutine mode (or
// without a socket to park on) it polls for backPressureWaitNs.
func (c *Client) awaitWindow(w *pace.Waiter, poll func(nowNs int64) int) {
	if c.loop != nil || c.parker == nil {
		w.Until(c.nowNs()+backPressureWaitNs, poll)
		return
	}
	// Through the read gate: a park that timed out leaves the socket
	// unread by the poll after it (which still runs the timers).
	c.rx.ParkNs(backPressureParkNs)
	poll(c.nowNs())
}

// defaults checks cfg, fills in its defaults and returns the opaque
// command body (nil for real orders).
func (cfg *LoadConfig) defaults() ([]byte, error) {
	if cfg.Count == 0 {
		return nil, fmt.Errorf("client: load needs a count")
	}
	if !(cfg.Rate > 0 && cfg.Rate <= RateMax) { // NaN fails both
		return nil, fmt.Errorf("client: load rate %v/s not in (0, %d]", cfg.Rate, RateMax)
	}
	if cfg.SpinNs < 0 || cfg.SpinNs > SpinNsMax {
		return nil, fmt.Errorf("client: load spin window %v not in 0..%v", time.Duration(cfg.SpinNs), time.Duration(SpinNsMax))
	}
	if cfg.CoalesceNs < 0 || cfg.CoalesceNs > CoalesceNsMax {
		return nil, fmt.Errorf("client: load coalesce window %v not in 0..%v", time.Duration(cfg.CoalesceNs), time.Duration(CoalesceNsMax))
	}
	if cfg.Instruments == 0 {
		cfg.Instruments = 1
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
	return loadBody(cfg.Size)
}

// CheckLoadSize says whether a load can send commands of size bytes
// (LoadConfig.Size): 0 (real new orders), or an opaque command longer
// than the engine's header and at most MaxCommandLen.
func CheckLoadSize(size int) error {
	if size != 0 && (size <= engine.CommandHeaderLen || size > MaxCommandLen) {
		return fmt.Errorf("want 0 (real new orders) or %d..%d bytes, got %d", engine.CommandHeaderLen+1, MaxCommandLen, size)
	}
	return nil
}

// loadBody is the opaque command body of a load of size-byte commands
// (nil for real orders: size 0).
func loadBody(size int) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	if err := CheckLoadSize(size); err != nil {
		return nil, fmt.Errorf("client: load size: %w", err)
	}
	body := make([]byte, size-engine.CommandHeaderLen)
	body[0] = 0xEE // no op the engine knows: a reject after apply
	return body, nil
}

// hookResults calls rec, then the client's own OnResult, with every
// result until the returned function restores OnResult.
func (c *Client) hookResults(rec func(Result)) (restore func()) {
	c.mu.Lock()
	prev := c.opts.OnResult
	c.opts.OnResult = func(r Result) {
		if rec != nil {
			rec(r)
		}
		if prev != nil {
			prev(r)
		}
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.opts.OnResult = prev
		c.mu.Unlock()
	}
}

// generatorThread prepares the calling goroutine to run the generator:
// in poll mode locked to its OS thread (at cfg.Nice), parking in
// epoll_wait on long waits; in goroutine mode yielding its P. release
// undoes it (the nice value before the thread is unlocked, so no other
// goroutine inherits the priority).
func (c *Client) generatorThread(cfg LoadConfig) (wcfg pace.WaiterConfig, release func(), niceErr error) {
	wcfg = pace.WaiterConfig{Histogram: true, SpinNs: cfg.SpinNs}
	if c.loop != nil {
		// Goroutine mode: the receive loop (and, in tests, whole nodes)
		// need a P. A locked thread yielding with sched_yield keeps its P
		// and would leave them the rest; Gosched hands the P over.
		wcfg.Yield = runtime.Gosched
		return wcfg, func() {}, nil
	}
	bus.SpareP() // the locked generator keeps its P while it yields
	runtime.LockOSThread()
	restoreNice := func() {}
	if cfg.Nice != 0 {
		if prev, err := pace.SetThreadNice(cfg.Nice); err != nil {
			niceErr = fmt.Errorf("client: generator thread nice %d: %w", cfg.Nice, err)
		} else {
			restoreNice = func() { _, _ = pace.SetThreadNice(prev) }
		}
	}
	restorePark := func() {}
	if cfg.Park {
		restorePark = c.parkedWaits(&wcfg) // every wait parks on the socket
	}
	return wcfg, func() { restorePark(); restoreNice(); runtime.UnlockOSThread() }, niceErr
}

// drain polls for the last answers until none is in flight, ctx ends or
// the drain time has passed; it returns the client's I/O error if any.
func (c *Client) drain(ctx context.Context, w *pace.Waiter, poll func(nowNs int64) int, drain time.Duration) error {
	deadline := c.nowNs() + int64(drain)
	for c.InFlight() > 0 && ctx.Err() == nil {
		if w.Until(c.nowNs()+drainPassNs, poll) >= deadline {
			break
		}
		c.mu.Lock()
		ioErr := c.ioErr
		c.mu.Unlock()
		if ioErr != nil {
			return ioErr
		}
	}
	return nil
}

// unanswered is the error of a load that ended with commands in flight
// (nil when every command was answered).
func (c *Client) unanswered(rep LoadReport, sent uint64) error {
	st := rep.Stats
	if n := c.InFlight(); n > 0 && st.Answered == 0 {
		return fmt.Errorf("%w: %d commands sent to %s (%d resends), none answered in %v; %s",
			ErrNoAnswer, sent, c.Primary(), st.Resent, rep.Elapsed.Round(time.Millisecond), c.noAnswerHint(&st))
	}
	if n := c.InFlight(); n > 0 {
		return fmt.Errorf("%w: %d of %d", ErrUnanswered, n, sent)
	}
	return nil
}

// noAnswerHint says why a load may have gone unanswered, from what the
// client saw: answers under another key, a node that says it does not
// lead, or nothing at all.
func (c *Client) noAnswerHint(st *Stats) string {
	switch {
	case st.BadMAC > 0:
		return fmt.Sprintf("%d answers failed the MAC check: another --key?", st.BadMAC)
	case st.NotLeading > 0:
		return fmt.Sprintf("it said %d times that it does not lead (a standby, or a primary whose lease ran out): point --primary at the primary, or give --witness so the client finds it", st.NotLeading)
	case c.mac == nil:
		return "is a node running there? (a cluster run with --key drops commands sent without it, and the client cannot tell)"
	}
	return "is a node running there, with the same --key?"
}

// orderGen makes a deterministic stream of orders: limits on both sides
// within 5 ticks of a mid price of 1000, and 10% market orders.
type orderGen struct {
	state       uint64
	instruments uint32
}

func (g *orderGen) rand() uint64 {
	g.state ^= g.state >> 12
	g.state ^= g.state << 25
	g.state ^= g.state >> 27
	return g.state * 2685821657736338717
}

func (g *orderGen) next() engine.Request {
	x := g.rand()
	r := engine.Request{
		Op:         engine.OpNewOrder,
		Instrument: uint32(x % uint64(g.instruments)),
		Side:       engine.Buy,
		Type:       engine.Limit,
		Price:      995 + int64((x>>8)%11),
		Qty:        1 + (x>>16)%100,
	}
	if (x>>24)&1 == 1 {
		r.Side = engine.Sell
	}
	if (x>>32)%10 == 0 {
		r.Type = engine.Market
		r.Price = 0
	}
	return r
}
