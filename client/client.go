package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/seqbus/seqbus/auth"
	"net/netip"
	"sync"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
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
	// answered command.
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
	// QueryEvery and, on a new holder, sends there and resends everything
	// in flight (same ids).
	Witness    netip.AddrPort
	Nodes      map[uint32]netip.AddrPort
	QueryEvery time.Duration
	// Key, when set, seals every command and witness query with the
	// stream's client key and drops (counting BadMAC) every answer that
	// does not carry a good MAC. Stream selects the key (0: 1).
	Key    *auth.MasterKey
	Stream uint16
}

// DefaultQueryEvery: ask the witness who leads every 100 ms, a tenth of a
// lease, so a failover costs at most that on top of the lease.
const DefaultQueryEvery = 100 * time.Millisecond

// Conn is the client's socket.
type Conn interface {
	bus.Conn
	LocalAddr() netip.AddrPort
}

// Client sends commands over UDP and matches the answers.
type Client struct {
	opts  Options
	start time.Time
	uc    Conn
	loop  *bus.Loop

	mu      sync.Mutex
	core    *Core
	primary netip.AddrPort
	leader  uint32
	epoch   uint64
	batch   *wire.Batch
	sendBuf [1][]byte
	lastQ   int64
	qbuf    []byte
	qid     uint64
	// Failovers counts primary changes seen through the witness.
	failovers uint64
	mac       *auth.MAC // nil without Options.Key
	sealBuf   []byte
}

// Dial opens the client's socket and starts its receive loop.
func Dial(opts Options) (*Client, error) {
	if opts.Core.Session == 0 {
		return nil, errors.New("client: session 0 is reserved for market data")
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
		u, err := bus.ListenUnicast(bus.UnicastConfig{Addr: local, Tuning: bus.Tuning{RecvBufferBytes: 4 << 20}})
		if err != nil {
			return nil, err
		}
		uc = u
	}
	var err error
	if opts.QueryEvery <= 0 {
		opts.QueryEvery = DefaultQueryEvery
	}
	if opts.Stream == 0 {
		opts.Stream = 1
	}
	batchLen := 0
	c := &Client{opts: opts, start: time.Now(), uc: uc, core: NewCore(opts.Core), primary: opts.Primary}
	if opts.Key != nil {
		c.mac = auth.NewMAC(auth.ClientKey(opts.Key, opts.Stream))
		c.sealBuf = make([]byte, 0, wire.MaxFrameLen+wire.TagLen)
		batchLen = wire.DefaultDatagramLen - wire.TagLen // the tag fits the datagram
	}
	c.batch = wire.NewBatch(batchLen)
	c.batch.Reset(wire.TypeCommand, c.origin(), 1)
	c.loop, err = bus.StartLoop(uc, bus.LoopConfig{Idle: opts.Idle}, c.onBatch)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) nowNs() int64 { return int64(time.Since(c.start)) }

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
	c.uc.Close()
	c.loop.Stop()
	return nil
}

// SetPrimary points the client at a new primary and resends everything in
// flight there (same ids: the engine's dedup table answers those already
// applied with their original result).
func (c *Client) SetPrimary(addr netip.AddrPort) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.primary = addr
	n := c.core.ResendAll(c.nowNs(), c.queue)
	c.flushLocked()
	return n
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

func (c *Client) flushLocked() {
	if c.batch.Count() == 0 {
		return
	}
	c.sendBuf[0] = c.seal(c.batch.Bytes())
	if err := c.uc.Send(c.sendBuf[:], c.primary); err != nil {
		c.core.stats.SendErrors++
	}
	c.sendBuf[0] = nil
	c.batch.Reset(wire.TypeCommand, c.origin(), 1)
}

// Poll resends overdue commands and asks the witness who leads; call it
// regularly (every few ms).
func (c *Client) Poll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pollLocked(c.nowNs())
}

func (c *Client) pollLocked(now int64) int {
	n := c.core.Poll(now, c.queue)
	c.flushLocked()
	if c.opts.Witness.IsValid() && now-c.lastQ >= int64(c.opts.QueryEvery) {
		c.lastQ = now
		c.qid++
		c.qbuf = witness.AppendQuery(c.qbuf[:0], arbiter.NodeID(uint32(c.opts.Core.Session)), c.opts.Stream, c.qid)
		c.sendBuf[0] = c.seal(c.qbuf)
		_ = c.uc.Send(c.sendBuf[:], c.opts.Witness)
		c.sendBuf[0] = nil
	}
	return n
}

// onInfo follows the lease holder the witness reports.
func (c *Client) onInfo(f *wire.Frame) {
	r, err := witness.DecodeReply(f)
	if err != nil || r.Type != wire.TypeLeaseInfo || r.Holder == arbiter.NodeNone {
		return
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
	c.core.ResendAll(c.nowNs(), c.queue)
	c.flushLocked()
}

// Primary is the address commands go to now.
func (c *Client) Primary() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary
}

// Failovers counts primary changes learnt from the witness.
func (c *Client) Failovers() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failovers
}

func (c *Client) onBatch(bufs [][]byte, sizes []int, _ []netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowNs()
	for i := range sizes {
		f, _, err := wire.Parse(bufs[i][:sizes[i]])
		if err == nil && !c.verify(&f) {
			c.core.stats.BadMAC++
			continue
		}
		if err == nil && f.Type == wire.TypeLeaseInfo {
			c.onInfo(&f)
			continue
		}
		if err != nil || f.Type != wire.TypeOutput {
			c.core.stats.BadOutputs++
			continue
		}
		c.core.stats.BadOutputs += eachOutput(&f, func(idx int, o *engine.Output, payload []byte) {
			if c.opts.OnOutput != nil {
				c.opts.OnOutput(o)
			}
			res, ok := c.core.OnOutput(o, now)
			if ok {
				res.Epoch, res.Seq = f.Epoch, f.Seq
			}
			if c.opts.Recorder != nil {
				c.opts.Recorder.add(&f, idx, c.opts.Core.Session, o, payload, ok)
			}
			if ok && c.opts.OnResult != nil {
				c.opts.OnResult(res)
			}
		})
	}
}

// eachOutput decodes every engine output of an OUTPUT frame, calling fn
// for each with its index in the frame and its payload; it returns how
// many did not decode.
func eachOutput(f *wire.Frame, fn func(idx int, o *engine.Output, payload []byte)) (bad uint64) {
	it := f.Messages()
	for idx := 0; ; idx++ {
		_, msg, ok := it.Next()
		if !ok {
			return bad
		}
		o, err := engine.ParseOutput(msg)
		if err != nil {
			bad++
			continue
		}
		fn(idx, &o, msg)
	}
}

// ErrUnanswered is returned by Load when commands are still unanswered at
// the end of its drain time.
var ErrUnanswered = errors.New("client: commands unanswered")

// LoadConfig is a fixed-rate load (wrk2 style): command i is meant to be
// sent at start + i/Rate, and its latency is measured from that intended
// time, so a stall counts against every command it delayed.
type LoadConfig struct {
	Rate        float64 // commands per second
	Count       uint64
	Instruments uint32
	Seed        uint64
	// Drain bounds the wait for the last answers after the last send.
	Drain time.Duration
}

// LoadReport is what a Load run saw.
type LoadReport struct {
	Sent, Answered uint64
	Elapsed        time.Duration
	Stats          Stats
}

// Load runs a fixed-rate load of limit and market orders around a mid
// price (so that they trade and the book stays bounded), calling rec with
// every answer. It returns when every command is answered, or with
// ErrUnanswered after Drain.
func (c *Client) Load(ctx context.Context, cfg LoadConfig, rec func(Result)) (LoadReport, error) {
	if cfg.Rate <= 0 || cfg.Count == 0 {
		return LoadReport{}, fmt.Errorf("client: load needs a rate and a count")
	}
	if cfg.Instruments == 0 {
		cfg.Instruments = 1
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 10 * time.Second
	}
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
	defer func() {
		c.mu.Lock()
		c.opts.OnResult = prev
		c.mu.Unlock()
	}()
	gen := orderGen{state: cfg.Seed | 1, instruments: cfg.Instruments}
	begin := c.nowNs()
	intervalNs := 1e9 / cfg.Rate
	var sent uint64
	lastPoll := begin
	for sent < cfg.Count {
		if err := ctx.Err(); err != nil {
			return LoadReport{Sent: sent}, err
		}
		now := c.nowNs()
		due := min(uint64(float64(now-begin)/intervalNs)+1, cfg.Count)
		c.mu.Lock()
		for sent < due {
			r := gen.next()
			intended := begin + int64(float64(sent)*intervalNs)
			_, cmd, err := c.core.Next(&r, intended, now)
			if err != nil {
				break // window full: back-pressure; retry on the next pass
			}
			c.queue(cmd)
			sent++
		}
		c.flushLocked()
		if now-lastPoll > 2_000_000 {
			c.pollLocked(now)
			lastPoll = now
		}
		c.mu.Unlock()
		next := begin + int64(float64(sent)*intervalNs)
		if wait := time.Duration(next - c.nowNs()); wait > 0 {
			time.Sleep(min(wait, 2*time.Millisecond))
		}
	}
	deadline := time.Now().Add(cfg.Drain)
	for c.InFlight() > 0 && time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
		c.Poll()
	}
	st := c.Stats()
	rep := LoadReport{Sent: sent, Answered: st.Answered, Elapsed: time.Duration(c.nowNs() - begin), Stats: st}
	if c.InFlight() > 0 {
		return rep, fmt.Errorf("%w: %d of %d", ErrUnanswered, c.InFlight(), sent)
	}
	return rep, nil
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
