package sim

import (
	"cmp"
	"net/netip"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
	"github.com/seqbus/seqbus/witness"
)

// simClient is a trading client around the real client core: it sends new
// orders while the faults run, resends after its timeout, follows the
// lease holder the witness reports (resending everything in flight to the
// new primary), and hands every output it receives to the checker.
type simClient struct {
	s       *sim
	host    int
	session uint64
	addr    netip.AddrPort
	nodes   map[uint32]netip.AddrPort
	core    *client.Core
	batch   *wire.Batch
	primary netip.AddrPort
	leader  uint32
	epoch   uint64
	lastQNs int64
	qid     uint64
	// mac signs what the client sends with the stream's client key
	// (Options.Keyed; nil without a key), into sealBuf.
	mac     *auth.MAC
	sealBuf []byte
	qbuf    []byte
	rbuf    []byte
	// progressNs: the last answer, or the last tick with nothing in
	// flight (for Result.MaxAnswerGapNs).
	progressNs int64
}

const (
	clientResendNs = 100_000_000 // a third of the lease
	clientQueryNs  = 30_000_000
	clientInFlight = 32 // under the engine's dedup window of 64
	clientReplayNs = 20_000_000
	clientProbeNs  = 200_000_000
)

func newSimClient(s *sim, host int, session uint64, addr netip.AddrPort, nodes map[uint32]netip.AddrPort) *simClient {
	batchLen := cmp.Or(s.opts.DatagramBytes, wire.DefaultDatagramLen)
	var mac *auth.MAC
	if s.key != nil {
		mac = auth.NewMAC(auth.ClientKey(s.key, simStream))
		batchLen -= wire.TagLen // the tag fits the datagram, as client.Client does
	}
	c := &simClient{
		s: s, host: host, session: session, addr: addr, nodes: nodes,
		core: client.NewCore(client.Config{Session: session, MaxInFlight: clientInFlight, ResendAfterNs: clientResendNs,
			ReplayEveryNs: clientReplayNs, ProbeEveryNs: clientProbeNs}),
		batch: wire.NewBatch(batchLen),
		// Until the witness says otherwise, guess node 1.
		primary: nodes[1], leader: 1,
		mac: mac,
	}
	c.batch.Reset(wire.TypeCommand, c.origin(), 1)
	return c
}

func (c *simClient) origin() wire.Origin { return wire.Origin{Node: uint32(c.session)} }

func (c *simClient) tick() {
	s := c.s
	now := s.now
	if !s.quiet && s.now > 200_000_000 && s.rng.Uint64N(1_000_000) < s.params.sendPpm {
		r := c.request()
		if id, cmd, err := c.core.Next(&r, now, now); err == nil {
			s.logf("client %d sends order %d", c.session, id)
			c.queue(cmd)
		}
	}
	c.core.Poll(now, c.queue)
	c.flush()
	c.core.PollReplay(now, c.sendReplayRequest)
	c.noteGap(now)
	if now-c.lastQNs >= clientQueryNs {
		c.query()
	}
}

// query asks the witness who leads.
func (c *simClient) query() {
	c.lastQNs = c.s.now
	c.qid++
	c.qbuf = witness.AppendQuery(c.qbuf[:0], arbiter.NodeID(uint32(c.session)), 0, c.qid)
	c.send(c.s.witnessAddr, c.qbuf)
}

// request draws an order around a mid price of 1000, so they trade; one
// in ten is a market order, one in twenty a cancel of a recent order id.
func (c *simClient) request() engine.Request {
	r := c.s.rng
	if r.IntN(20) == 0 {
		return engine.Request{Op: engine.OpCancel, OrderID: 1 + r.Uint64N(64)}
	}
	req := engine.Request{
		Op: engine.OpNewOrder, Instrument: uint32(r.IntN(2)), Side: engine.Buy, Type: engine.Limit,
		Price: 995 + int64(r.IntN(11)), Qty: 1 + r.Uint64N(50),
	}
	if r.IntN(2) == 0 {
		req.Side = engine.Sell
	}
	if r.IntN(10) == 0 {
		req.Type, req.Price = engine.Market, 0
	}
	return req
}

func (c *simClient) queue(cmd []byte) {
	if !c.batch.Add(cmd) {
		c.flush()
		c.batch.Add(cmd)
	}
}

func (c *simClient) flush() {
	if c.batch.Count() == 0 {
		return
	}
	c.send(c.primary, c.batch.Bytes())
	c.batch.Reset(wire.TypeCommand, c.origin(), 1)
}

// send sends pkt from the client's address to to, sealed with the
// client key when the run is keyed.
func (c *simClient) send(to netip.AddrPort, pkt []byte) {
	if c.mac != nil {
		b := wire.Seal(c.sealBuf[:0], pkt)
		c.sealBuf = c.mac.Sign(b, b)
		pkt = c.sealBuf
	}
	c.s.send(c.host, c.addr, to, pkt)
}

// sendReplayRequest asks the primary for the session's outputs from
// output seq from on, as client.Client does.
func (c *simClient) sendReplayRequest(from uint64) {
	r := wire.ReplayRequest{Origin: c.origin(), Session: c.session, From: from}
	c.rbuf = r.Append(c.rbuf[:0])
	c.s.logf("client %d asks for a replay from output %d", c.session, from)
	c.send(c.primary, c.rbuf)
}

// onPacket handles a datagram from addr as client.Client.onBatch does,
// with its epoch fence (client.Core.Fence): a frame of an older epoch
// than the fence is not delivered.
func (c *simClient) onPacket(pkt []byte, from netip.AddrPort) {
	f, _, err := wire.Parse(pkt)
	if err != nil {
		return
	}
	switch f.Type {
	case wire.TypeLeaseInfo:
		c.onInfo(&f)
	case wire.TypeNotLeading:
		// Its primary leads no more (client.Client.onNotLeading): ask now.
		if from == c.primary && f.Epoch >= c.epoch {
			c.s.logf("client %d hears NOT_LEADING of epoch %d from node %d", c.session, f.Epoch, f.Node)
			c.query()
		}
	case wire.TypeReplayEnd:
		if e, err := wire.DecodeReplayEnd(&f); err == nil && e.Session == c.session &&
			(c.core.Fence(f.Epoch, c.fromNode(from)) || e.Status == wire.ReplayRefused) {
			c.s.logf("client %d replay from %d ends: status %d next %d highest %d", c.session, e.From, e.Status, e.Next, e.Highest)
			c.core.OnReplayEnd(client.ReplayAnswer{From: e.From, Next: e.Next, Highest: e.Highest,
				TooOld: e.Status == wire.ReplayTooOld, Refused: e.Status == wire.ReplayRefused})
		}
	case wire.TypeOutput:
		if !c.core.Fence(f.Epoch, c.fromNode(from)) {
			c.s.logf("client %d refuses an OUTPUT of epoch %d from node %d: its fence is at epoch %d", c.session, f.Epoch, f.Node, c.core.FenceEpoch())
			return
		}
		replay := f.Flags&wire.FlagReplay != 0
		it := f.Messages()
		for {
			_, msg, ok := it.Next()
			if !ok {
				break
			}
			o, err := engine.ParseOutput(msg)
			if err != nil {
				c.s.chk.onClientOutput(c.session, msg)
				continue
			}
			// What the application is handed: once, in order.
			if !c.core.Admit(&o, replay) {
				continue
			}
			c.s.chk.onClientOutput(c.session, msg)
			if res, ok := c.core.OnOutput(&o, c.s.now); ok {
				c.noteGap(c.s.now)
				c.progressNs = c.s.now
				c.s.logf("client %d answered order %d (%d attempts, dup %v)", c.session, res.ClientOrderID, res.Attempts, res.Duplicate)
			}
		}
	}
}

// noteGap records how long this client has waited with commands in
// flight and no answer, while the faults run.
func (c *simClient) noteGap(now int64) {
	s := c.s
	if c.core.InFlight() == 0 {
		c.progressNs = now
		return
	}
	if gap := now - c.progressNs; !s.quiet && gap > s.maxGapNs {
		s.maxGapNs, s.maxGapAt = gap, now
	}
}

// fromNode reports whether a frame from addr comes from a node (it may
// raise the epoch fence), as client.Client.fromNode does.
func (c *simClient) fromNode(addr netip.AddrPort) bool {
	for _, a := range c.nodes {
		if a == addr {
			return true
		}
	}
	return false
}

// onInfo follows the holder the witness reports, as client.Client does.
func (c *simClient) onInfo(f *wire.Frame) {
	r, err := witness.DecodeReply(f)
	if err != nil || r.Holder == arbiter.NodeNone {
		return
	}
	c.core.LearnEpoch(r.Epoch)
	addr, ok := c.nodes[uint32(r.Holder)]
	if !ok || r.Epoch < c.epoch || (uint32(r.Holder) == c.leader && addr == c.primary) {
		return
	}
	c.leader, c.epoch = uint32(r.Holder), r.Epoch
	if addr == c.primary {
		return
	}
	c.primary = addr
	c.s.logf("client %d follows node %d (epoch %d) and resends %d in flight", c.session, r.Holder, r.Epoch, c.core.InFlight())
	c.core.ResendAll(c.s.now, c.queue)
	c.flush()
	c.core.Reconnected()
	c.core.PollReplay(c.s.now, c.sendReplayRequest)
}
