// Package client is the seqbus client: it sends commands with their
// identity (session, client order id), matches the gated results that come
// back, resends what was not answered in time (after a timeout or a
// failover, with the same ids, so the engine's replicated dedup table
// applies each command once), and reports a duplicate as the original
// result.
//
// Core is the pure part (no clock, no socket); Client wraps it with a UDP
// socket and either a receive goroutine or, with Options.Poll, nothing: the
// caller's thread reads the socket through PollIO (Load does, paced by
// internal/pace).
//
// Thread budget: a client in poll mode adds one thread, its caller's, and
// no goroutine. Load locks the calling goroutine to its OS thread and does
// everything there: it parks in epoll_pwait2 on the client's socket until
// a few µs before each send (woken at once by an answer, which it handles
// and parks again), spins that margin, sends, and runs the resend and
// witness timers between. Measured 4–8 syscalls per command at one
// command per datagram (one send, one receive, the parks and the spin
// margin's readiness checks; docs/tuning.md), against 40–70 before; no
// empty receive, no sched_yield. In goroutine mode (the default) the client runs one receive
// goroutine on the netpoller. A market-data consumer (OpenMarketData)
// adds one agent thread (bus.AgentRunner) over the feed and its recovery
// socket, its recovery timers checked every pass: no ticker goroutine.
package client

import (
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/engine"
)

// Defaults.
const (
	// DefaultMaxInFlight bounds unanswered commands; it must not exceed the
	// engine's dedup window, or a resend could be too old to dedupe.
	DefaultMaxInFlight = 1024
	// MaxInFlightMax bounds Config.MaxInFlight: a slot each, about 1 KB
	// (64 MB at the bound), and the matching engine's largest dedup
	// window.
	MaxInFlightMax = 1 << 16
	// DefaultResendAfterNs: resend a command unanswered for 250 ms, a
	// quarter of the lease: within a failover the new primary answers the
	// resend (from its dedup table if the original was applied).
	DefaultResendAfterNs = 250_000_000
	// MaxResendsPerPoll bounds one Poll's resends.
	MaxResendsPerPoll = 256
)

// ErrWindowFull is returned by Next when MaxInFlight commands are unanswered.
var ErrWindowFull = errors.New("client: too many commands in flight")

// ErrBadMaxInFlight is returned by Dial for a Config.MaxInFlight above
// MaxInFlightMax (or below 0).
var ErrBadMaxInFlight = fmt.Errorf("client: max in flight not in 0..%d (0: %d)", MaxInFlightMax, DefaultMaxInFlight)

// Config configures a Core.
type Config struct {
	Session uint64
	// MaxInFlight bounds the commands sent and not yet answered (0:
	// DefaultMaxInFlight; at most MaxInFlightMax). It must not exceed
	// the nodes' dedup window (the matching engine's: 1024 in seqbus
	// node), or a command resent after a failover can be refused as too
	// old although it was applied; a state machine without one (seqbus
	// node --engine none) bounds it only by memory and the sockets'
	// buffers. A larger window carries more commands per datagram and
	// per pass flat out: docs/tuning.md.
	MaxInFlight   int
	ResendAfterNs int64
	// FirstID is the first client order id (ids increase by one); a client
	// restarting a session must continue above its previous ids.
	FirstID uint64
	// LastOutSeq is the output seq of the last output of the session the
	// application has (a restarted client: from its own records; 0: it
	// has none, so a replay delivers the session's history from 1).
	LastOutSeq uint64
	// ReplayEveryNs paces replay requests (0: DefaultReplayEveryNs).
	ReplayEveryNs int64
	// ProbeEveryNs paces the probes for lost tail outputs (0:
	// DefaultProbeEveryNs; < 0: none).
	ProbeEveryNs int64
}

type pending struct {
	id          uint64
	intendedNs  int64 // when it should have been sent (fixed-rate load)
	firstSentNs int64 // when it was first sent
	sentNs      int64 // when it was last sent (resend timer)
	attempts    uint32
	used        bool
	n           uint16
	cmd         [MaxCommandLen]byte
}

// Result is the answer to one command.
type Result struct {
	ClientOrderID uint64
	Kind          engine.OutputKind // Ack, Reject or Cancelled (the original's, for a duplicate)
	Duplicate     bool              // answered from the dedup table: it was applied before
	LatencyNs     int64             // from the intended send time to the answer
	Attempts      uint32
	// Stage times, in the clock the caller passes to Next and OnOutput
	// (Client: monotime, CLOCK_MONOTONIC ns, absolute and the same in every
	// process on the host, so they merge with the nodes' per-seq times).
	// SentNs is the first send, not a resend.
	IntendedNs, SentNs, ReceivedNs int64
	Session                        uint64
	// Seq and Epoch are the header fields of the OUTPUT frame that carried
	// the answer (Client fills them): Seq is the seq of the frame's first
	// output, so it is this command's seq when the frame carried only its
	// outputs, and a lower bound when a release packed several commands'
	// outputs into one frame. Zero from Core.OnOutput itself.
	Seq, Epoch uint64
}

// Stats counts the client's work.
type Stats struct {
	Sent, Resent, Answered, Acks, Rejects, Cancels, Duplicates uint64
	Executions, MarketData, Unmatched, BadOutputs              uint64
	BadMAC                                                     uint64
	SendErrors                                                 uint64
	// StaleEpoch counts frames (OUTPUT, REPLAY_END) refused because
	// their epoch is older than the client's fence (fence.go): a deposed
	// primary's, received after its successor's. StaleOutputs counts the
	// outputs in the refused OUTPUT frames (a REPLAY_END carries none).
	StaleEpoch, StaleOutputs uint64
	// NotLeading counts NOT_LEADING notices taken from the node the
	// client sends to: it gave its lease up, lost it or stepped down, and
	// the client asked the arbiter who leads at once.
	NotLeading uint64
}

// Core tracks commands in flight for one session.
type Core struct {
	cfg    Config
	nextID uint64
	slots  []pending
	live   int
	oldest uint64 // lowest id that may still be in flight
	// quietSince: since when commands have been in flight with no output
	// of this session arriving (valid while live > 0).
	quietSince int64
	stats      Stats
	rs         replayState
	// fence: the highest epoch seen from a known node or learnt from
	// the arbiter (fence.go).
	fence uint64
}

// NewCore returns a Core.
func NewCore(cfg Config) *Core {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.ResendAfterNs <= 0 {
		cfg.ResendAfterNs = DefaultResendAfterNs
	}
	if cfg.FirstID == 0 {
		cfg.FirstID = 1
	}
	if cfg.ReplayEveryNs <= 0 {
		cfg.ReplayEveryNs = DefaultReplayEveryNs
	}
	if cfg.ProbeEveryNs == 0 {
		cfg.ProbeEveryNs = DefaultProbeEveryNs
	}
	return &Core{cfg: cfg, nextID: cfg.FirstID, oldest: cfg.FirstID, slots: make([]pending, cfg.MaxInFlight),
		rs: replayState{lastOut: cfg.LastOutSeq, every: cfg.ReplayEveryNs, probeEvery: cfg.ProbeEveryNs}}
}

// Session is the core's session id.
func (c *Core) Session() uint64 { return c.cfg.Session }

// InFlight is the number of unanswered commands.
func (c *Core) InFlight() int { return c.live }

// UnansweredNs is how long commands have been in flight with no output
// of the session arriving (0 when none is in flight): long enough, and
// the primary may be gone.
func (c *Core) UnansweredNs(nowNs int64) int64 {
	if c.live == 0 {
		return 0
	}
	return nowNs - c.quietSince
}

// NextID is the id the next command gets.
func (c *Core) NextID() uint64 { return c.nextID }

// Stats returns the counters.
func (c *Core) Stats() Stats { return c.stats }

func (c *Core) slot(id uint64) *pending { return &c.slots[id%uint64(len(c.slots))] }

// Next assigns the next client order id to r and returns the encoded
// command to send (valid until the next call). intendedNs is when the load
// meant to send it (for coordinated-omission-free latency); nowNs is now.
func (c *Core) Next(r *engine.Request, intendedNs, nowNs int64) (uint64, []byte, error) {
	return c.next(r, nil, intendedNs, nowNs)
}

// MaxCommandLen bounds a command the core holds (header included): a
// new order, or an opaque payload of NextPayload.
const MaxCommandLen = 1024

// ErrTooLong is returned by NextPayload for a body over MaxCommandLen.
var ErrTooLong = errors.New("client: command longer than MaxCommandLen")

// NextPayload is Next for an opaque command body (the engine rejects a
// body it does not know after sequencing it: `seqbus bench` sizes its
// commands so).
func (c *Core) NextPayload(body []byte, intendedNs, nowNs int64) (uint64, []byte, error) {
	if engine.CommandHeaderLen+len(body) > MaxCommandLen {
		return 0, nil, ErrTooLong
	}
	return c.next(nil, body, intendedNs, nowNs)
}

func (c *Core) next(r *engine.Request, body []byte, intendedNs, nowNs int64) (uint64, []byte, error) {
	p := c.slot(c.nextID)
	if p.used {
		return 0, nil, ErrWindowFull
	}
	id := c.nextID
	c.nextID++
	p.id, p.intendedNs, p.firstSentNs, p.sentNs, p.attempts, p.used = id, intendedNs, nowNs, nowNs, 1, true
	var b []byte
	if r != nil {
		b = engine.AppendRequest(p.cmd[:0], c.cfg.Session, id, r)
	} else {
		b = engine.AppendCommand(p.cmd[:0], c.cfg.Session, id, body)
	}
	p.n = uint16(len(b))
	if c.live == 0 {
		c.quietSince = nowNs
	}
	c.live++
	c.stats.Sent++
	return id, p.cmd[:p.n], nil
}

// OnOutput matches one output of this session. For a result (ack, reject,
// cancel, or a duplicate of one) of a command in flight it returns the
// Result and true. Pass it only the outputs Admit delivers.
func (c *Core) OnOutput(o *engine.Output, nowNs int64) (Result, bool) {
	c.quietSince = nowNs
	kind, dup := o.Kind, false
	switch o.Kind {
	case engine.KindExecution:
		c.stats.Executions++
		return Result{}, false
	case engine.KindMarketData:
		c.stats.MarketData++
		return Result{}, false
	case engine.KindDuplicate:
		kind, dup = o.Original, true
	case engine.KindAck, engine.KindReject, engine.KindCancelled:
	default:
		c.stats.BadOutputs++
		return Result{}, false
	}
	p := c.slot(o.ClientOrderID)
	if !p.used || p.id != o.ClientOrderID {
		// Already answered (a second answer after a resend) or not ours.
		c.stats.Unmatched++
		return Result{}, false
	}
	res := Result{ClientOrderID: p.id, Kind: kind, Duplicate: dup, LatencyNs: nowNs - p.intendedNs, Attempts: p.attempts,
		IntendedNs: p.intendedNs, SentNs: p.firstSentNs, ReceivedNs: nowNs, Session: c.cfg.Session}
	p.used = false
	c.live--
	c.stats.Answered++
	switch kind {
	case engine.KindAck:
		c.stats.Acks++
	case engine.KindReject:
		c.stats.Rejects++
	case engine.KindCancelled:
		c.stats.Cancels++
	}
	if dup {
		c.stats.Duplicates++
	}
	return res, true
}

// Poll calls resend for each command unanswered for ResendAfterNs (at most
// MaxResendsPerPoll per call), oldest first, with the same id and bytes.
func (c *Core) Poll(nowNs int64, resend func(cmd []byte)) int {
	return c.resendWhere(nowNs, c.cfg.ResendAfterNs, MaxResendsPerPoll, resend)
}

// ResendAll resends every command in flight now (after a failover: the new
// primary may never have seen them). Bounded by MaxInFlight.
func (c *Core) ResendAll(nowNs int64, resend func(cmd []byte)) int {
	return c.resendWhere(nowNs, 0, len(c.slots), resend)
}

// resendWhere resends, oldest first, up to limit commands sent at least
// ageNs ago.
//
// It stops at the first command never resent that is not due yet: every
// later command was sent after it (ids are given in send order) and, if
// resent, resent later still, so none of them is due either. Without the
// stop the timer's scan read every slot of a full window, each a
// kilobyte apart: 10 % of a flat-out load client's CPU with 8,192 in
// flight (BenchmarkPollFullWindow). It needs a clock that never goes
// back (Next, Poll and ResendAll are given monotonic times); a time read
// just before taking the client's lock, as Load's, can delay a resend by
// at most the time between the read and the lock.
func (c *Core) resendWhere(nowNs, ageNs int64, limit int, resend func(cmd []byte)) int {
	n := 0
	for id := c.oldest; id < c.nextID && n < limit; id++ {
		p := c.slot(id)
		if !p.used || p.id != id {
			if id == c.oldest {
				c.oldest++
			}
			continue
		}
		if nowNs-p.sentNs < ageNs {
			if p.attempts == 1 {
				break
			}
			continue
		}
		p.sentNs = nowNs
		p.attempts++
		resend(p.cmd[:p.n])
		c.stats.Resent++
		n++
	}
	return n
}
