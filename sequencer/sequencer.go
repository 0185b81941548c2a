package sequencer

import (
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/wire"
)

// Defaults, each a configuration value.
const (
	// DefaultRingFrames keeps the last 4096 frames (about 6 MB of 1472-byte
	// frames, ~170k 32-byte commands, ~15 ms at 10M commands/s or seconds at
	// typical venue rates) in memory for NAKs; older ranges come from the
	// journal. With a larger Config.DatagramLen the default is the same
	// bytes (DefaultRingBytes) in fewer, fuller frames: about as many
	// commands, not six or forty times the memory.
	DefaultRingFrames = 4096
	// DefaultRingBytes is the default ring's memory.
	DefaultRingBytes = DefaultRingFrames * wire.DefaultDatagramLen
	// minDefaultRingFrames is the fewest frames the default ring keeps
	// (the largest datagram: 92 frames).
	minDefaultRingFrames = 64
	// DefaultHeartbeatIntervalNs is 10 ms: a standby sees a tail gap within
	// one interval after traffic stops (DESIGN.md).
	DefaultHeartbeatIntervalNs = 10_000_000
	// DefaultMaxFramesPerNak bounds what one NAK can make the primary send:
	// 64 frames of 1472 bytes is ~94 KB. A standby with more missing NAKs
	// again after its back-off, so repair continues at a bounded pace.
	DefaultMaxFramesPerNak = 64
	// DefaultRetransmitBytesPerSec is the retransmit bandwidth budget of the
	// whole primary, shared by all standbys: 100 MB/s, under a 1 GbE link,
	// so NAK storms cannot starve the live stream.
	DefaultRetransmitBytesPerSec = 100_000_000
	// DefaultRetransmitBurstBytes is the token-bucket depth: one full NAK
	// of default-sized datagrams. With another Config.DatagramLen the
	// default depth is DefaultMaxFramesPerNak of those, so a NAK's worth
	// of jumbo frames is still one burst.
	DefaultRetransmitBurstBytes = DefaultMaxFramesPerNak * wire.DefaultDatagramLen
)

// ErrTooLarge is returned by Submit for a command that cannot fit one
// datagram. Nothing is sequenced.
var ErrTooLarge = errors.New("sequencer: command larger than one datagram can carry")

// Out is one frame the sequencer decided to send, and where to: the
// replication group, or one standby.
type Out struct {
	// Group: a DATA, HEARTBEAT, HASH or NEW_EPOCH frame for the
	// replication group (Node is 0).
	Group bool
	// Node is the standby a RETRANSMIT or NEED_SNAPSHOT frame goes to.
	Node uint32
	// Frame is the frame's bytes, owned by the sequencer: valid until
	// ClearOutbox.
	Frame []byte
}

// History is the read side of the journal, used for NAKed ranges older
// than the ring. It is the one place the core reaches storage, as raft's
// core reads its Storage.
type History interface {
	// ReadFrom calls fn for each record with seq >= from, in order, until
	// fn returns false or the log ends. It returns an error when from is
	// below the first record it holds (compacted away).
	ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error
}

// Config configures a Sequencer. Zero fields take the defaults above.
type Config struct {
	Stream                uint16
	Node                  uint32
	DatagramLen           int
	RingFrames            int
	HeartbeatIntervalNs   int64
	MaxFramesPerNak       int
	RetransmitBytesPerSec int64
	RetransmitBurstBytes  int64
	// MaxCommandBytes bounds one command (0: whatever one DATA frame of
	// DatagramLen holds). A node caps it apart from the datagram size, so
	// that jumbo frames batch more commands without growing the largest
	// command, and with it every standby's window slots.
	MaxCommandBytes int
	// History is the history id this primary leads (0: none), stamped
	// into its HEARTBEAT and NEW_EPOCH frames (wire.Heartbeat.History,
	// replica.Identity).
	History uint64
}

func (c *Config) withDefaults() {
	if c.DatagramLen == 0 {
		c.DatagramLen = wire.DefaultDatagramLen
	}
	if c.RingFrames == 0 {
		c.RingFrames = max(minDefaultRingFrames, min(DefaultRingFrames, DefaultRingBytes/c.DatagramLen))
	}
	if c.HeartbeatIntervalNs == 0 {
		c.HeartbeatIntervalNs = DefaultHeartbeatIntervalNs
	}
	if c.MaxFramesPerNak == 0 {
		c.MaxFramesPerNak = DefaultMaxFramesPerNak
	}
	if c.RetransmitBytesPerSec == 0 {
		c.RetransmitBytesPerSec = DefaultRetransmitBytesPerSec
	}
	if c.RetransmitBurstBytes == 0 {
		c.RetransmitBurstBytes = DefaultMaxFramesPerNak * int64(c.DatagramLen)
	}
}

// Stats are the sequencer's counters.
type Stats struct {
	Commands          uint64 // commands sequenced
	Frames            uint64 // DATA frames multicast
	Heartbeats        uint64
	NaksReceived      uint64
	RetransmitFrames  uint64 // RETRANSMIT frames sent (ring and journal)
	JournalFallbacks  uint64 // NAK ranges served from the journal
	NeedSnapshots     uint64 // NAKs answered with NEED_SNAPSHOT
	NakFramesClamped  uint64 // NAKs cut short by MaxFramesPerNak
	NakBudgetExceeded uint64 // NAKs cut short by the bandwidth budget
	NaksAboveHighest  uint64 // ranges above anything sent, ignored
}

// outbox holds the frames produced since the last ClearOutbox, in order.
// Each entry has its own buffer of DatagramLen bytes, allocated once and
// reused: no frame or call allocates in steady state. It is sized for the
// largest single call (a NAK: MaxFramesPerNak frames and a NEED_SNAPSHOT,
// preallocated up to DefaultMaxFramesPerNak of them) and grows once past
// that only if the runtime lets more calls' frames pile up before
// draining.
type outbox struct {
	outs []Out
	bufs [][]byte
}

func newOutbox(frames, datagramLen int) outbox {
	o := outbox{outs: make([]Out, 0, frames), bufs: make([][]byte, frames)}
	for i := range o.bufs {
		o.bufs[i] = make([]byte, 0, datagramLen)
	}
	return o
}

// buf is the empty buffer the next frame is built in.
func (o *outbox) buf() []byte {
	if len(o.outs) == len(o.bufs) {
		o.bufs = append(o.bufs, make([]byte, 0, cap(o.bufs[0])))
	}
	return o.bufs[len(o.outs)][:0]
}

// push appends frame, built in buf(), to go to the group or to node.
func (o *outbox) push(group bool, node uint32, frame []byte) {
	o.bufs[len(o.outs)] = frame
	o.outs = append(o.outs, Out{Group: group, Node: node, Frame: frame})
}

func (o *outbox) clear() {
	clear(o.outs) // drop the references; the buffers stay in bufs
	o.outs = o.outs[:0]
}

type slot struct {
	frame []byte
	first uint64
	last  uint64
}

// Sequencer is the primary's replication core. Not safe for concurrent
// use: one runtime goroutine owns it.
type Sequencer struct {
	cfg    Config
	origin wire.Origin
	out    outbox
	hist   History

	next    uint64 // seq the next command gets
	sent    uint64 // highest seq multicast
	batch   *wire.Batch
	scratch *wire.Batch // for journal retransmits

	ring  []slot
	head  int // index of the oldest slot
	count int // slots in use

	snapshotSeq uint64

	lastSendNs   int64
	tokens       int64
	lastRefillNs int64
	started      bool

	stats Stats

	// released, mdReleased: what HEARTBEAT carries (SetReleased).
	released, mdReleased uint64
}

// Buffers is a sequencer's memory: the retransmit ring (RingFrames
// frames of DatagramLen bytes, 6 MB at the defaults), the outbox and the
// batches. A runtime makes them once (NewBuffers) and hands them from
// term to term (NewWith, then Buffers when the term is over), so a
// promotion allocates and zeroes none of it on the failover's path.
type Buffers struct {
	ring           []slot
	out            outbox
	batch, scratch *wire.Batch
	datagramLen    int
}

// NewBuffers makes the memory a sequencer of cfg needs, every page of it
// written once (a promotion then takes no page fault in it either).
func NewBuffers(cfg Config) *Buffers {
	cfg.withDefaults()
	b := &Buffers{
		ring:        make([]slot, cfg.RingFrames),
		out:         newOutbox(max(min(cfg.MaxFramesPerNak, DefaultMaxFramesPerNak), 0)+1, cfg.DatagramLen),
		batch:       wire.NewBatch(cfg.DatagramLen),
		scratch:     wire.NewBatch(cfg.DatagramLen),
		datagramLen: cfg.DatagramLen,
	}
	for i := range b.ring {
		f := make([]byte, cfg.DatagramLen)
		for j := 0; j < len(f); j += 4096 {
			f[j] = 1 // fault the page in
		}
		b.ring[i].frame = f[:0]
	}
	return b
}

// fits reports whether b is the memory a sequencer of cfg (defaults
// applied) needs.
func (b *Buffers) fits(cfg *Config) bool {
	return b != nil && len(b.ring) == cfg.RingFrames && b.datagramLen == cfg.DatagramLen &&
		len(b.out.bufs) >= max(min(cfg.MaxFramesPerNak, DefaultMaxFramesPerNak), 0)+1
}

// New returns a sequencer that leads under epoch and continues after
// lastSeq (0 for a fresh stream; applied for a promoted standby). hist may
// be nil, in which case ranges older than the ring are answered with
// NEED_SNAPSHOT.
func New(cfg Config, epoch, lastSeq uint64, hist History) *Sequencer {
	return NewWith(cfg, epoch, lastSeq, hist, nil)
}

// NewWith is New in the memory b (NewBuffers, or an earlier sequencer's
// Buffers, which must not be used by it any more); a nil b, or one made
// for another configuration, is replaced by new memory.
func NewWith(cfg Config, epoch, lastSeq uint64, hist History, b *Buffers) *Sequencer {
	cfg.withDefaults()
	if !b.fits(&cfg) {
		b = NewBuffers(cfg)
	}
	for i := range b.ring {
		b.ring[i] = slot{frame: b.ring[i].frame[:0]}
	}
	b.out.clear()
	s := &Sequencer{
		cfg:     cfg,
		origin:  wire.Origin{Stream: cfg.Stream, Node: cfg.Node, Epoch: epoch},
		out:     b.out,
		hist:    hist,
		next:    lastSeq + 1,
		sent:    lastSeq,
		batch:   b.batch,
		scratch: b.scratch,
		ring:    b.ring,
		tokens:  cfg.RetransmitBurstBytes,
	}
	s.batch.Reset(wire.TypeData, s.origin, s.next)
	return s
}

// Buffers is the sequencer's memory, for the next term's NewWith; the
// sequencer must not be used after.
func (s *Sequencer) Buffers() *Buffers {
	return &Buffers{ring: s.ring, out: s.out, batch: s.batch, scratch: s.scratch, datagramLen: s.cfg.DatagramLen}
}

// Epoch is the epoch this sequencer leads under.
func (s *Sequencer) Epoch() uint64 { return s.origin.Epoch }

// LastAssigned is the highest seq assigned so far.
func (s *Sequencer) LastAssigned() uint64 { return s.next - 1 }

// HighestSent is the highest seq multicast so far.
func (s *Sequencer) HighestSent() uint64 { return s.sent }

// SetSnapshotSeq records the seq of the latest snapshot, named in
// NEED_SNAPSHOT answers so the standby knows what it will get.
func (s *Sequencer) SetSnapshotSeq(seq uint64) { s.snapshotSeq = seq }

// Outbox is every frame the sequencer decided to send since the last
// ClearOutbox, in the order it produced them; the runtime sends them in
// that order after the call that produced them (Submit, Flush, Tick,
// Heartbeat, AnnounceEpoch, SendHash, OnNak) and then clears the outbox.
// Ordering rule: a DATA frame in the outbox after Submit carries only
// earlier commands, which the runtime journaled as each Submit returned, so
// sending it before journaling the command just submitted keeps "journaled
// before multicast". The slice and the frames are valid until ClearOutbox.
func (s *Sequencer) Outbox() []Out { return s.out.outs }

// ClearOutbox says the runtime sent (or dropped) every frame of Outbox; the
// buffers are reused for the next frames.
func (s *Sequencer) ClearOutbox() { s.out.clear() }

// Stats returns a copy of the counters.
func (s *Sequencer) Stats() Stats { return s.stats }

// MaxCommand is the largest command Submit accepts.
func (s *Sequencer) MaxCommand() int {
	if m := s.cfg.MaxCommandBytes; m > 0 {
		return min(m, s.batch.MaxMessage())
	}
	return s.batch.MaxMessage()
}

// Submit assigns the next seq to cmd and packs it into the open batch,
// sealing the batch into the outbox first if cmd does not fit. cmd is
// copied.
func (s *Sequencer) Submit(cmd []byte, nowNs int64) (uint64, error) {
	if m := s.MaxCommand(); len(cmd) > m {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(cmd), m)
	}
	if !s.batch.Add(cmd) {
		s.seal(nowNs)
		if !s.batch.Add(cmd) {
			panic("sequencer: command refused by an empty batch")
		}
	}
	seq := s.next
	s.next++
	s.stats.Commands++
	return seq, nil
}

// Flush seals the open batch into the outbox, if it holds anything.
func (s *Sequencer) Flush(nowNs int64) {
	if s.batch.Count() > 0 {
		s.seal(nowNs)
	}
}

// seal puts the open batch in the outbox for the group, keeps it in the
// ring and opens the next.
func (s *Sequencer) seal(nowNs int64) {
	frame := s.batch.Bytes()
	first, last := s.batch.FirstSeq(), s.batch.NextSeq()-1
	var sl *slot
	if s.count == len(s.ring) {
		sl = &s.ring[s.head]
		s.head = (s.head + 1) % len(s.ring)
	} else {
		sl = &s.ring[(s.head+s.count)%len(s.ring)]
		s.count++
	}
	sl.frame = append(sl.frame[:0], frame...)
	sl.first, sl.last = first, last
	s.out.push(true, 0, append(s.out.buf(), frame...))
	s.stats.Frames++
	s.sent = last
	s.lastSendNs = nowNs
	s.started = true
	s.batch.Reset(wire.TypeData, s.origin, s.next)
}

// Tick sends a HEARTBEAT when nothing was multicast for
// HeartbeatIntervalNs. It reports whether it sent one.
func (s *Sequencer) Tick(nowNs int64) bool {
	if s.started && nowNs-s.lastSendNs < s.cfg.HeartbeatIntervalNs {
		return false
	}
	s.Heartbeat(nowNs)
	return true
}

// SetReleased records the runtime's released watermark and the MD seq of
// the last market-data update it released; every later HEARTBEAT carries
// them, so a standby promoted after this primary dies knows which market
// data it must publish again.
func (s *Sequencer) SetReleased(released, mdSeq uint64) {
	s.released, s.mdReleased = released, mdSeq
}

// Heartbeat puts a HEARTBEAT for the group in the outbox now.
func (s *Sequencer) Heartbeat(nowNs int64) { s.heartbeat(nowNs, false) }

// LeaseReleased puts a HEARTBEAT marked FlagLeaseReleased in the outbox
// now: the runtime gave the lease up, and the standbys ask for it at once.
func (s *Sequencer) LeaseReleased(nowNs int64) { s.heartbeat(nowNs, true) }

func (s *Sequencer) heartbeat(nowNs int64, leaseReleased bool) {
	hb := wire.Heartbeat{Origin: s.origin, HighestSeq: s.sent, Released: s.released, MDSeq: s.mdReleased, LeaseReleased: leaseReleased, History: s.cfg.History}
	s.out.push(true, 0, hb.Append(s.out.buf()))
	s.stats.Heartbeats++
	s.lastSendNs = nowNs
	s.started = true
}

// ProbeFrame appends to dst the HEARTBEAT the group's next one would be
// (the highest seq sent, released, the MD seq), for a probe of one
// standby (replica.Ready.Probe): the runtime sends it to that standby
// alone, and nothing here changes. A live standby takes it as any
// heartbeat, so one that missed the tail asks for it.
func (s *Sequencer) ProbeFrame(dst []byte) []byte {
	hb := wire.Heartbeat{Origin: s.origin, HighestSeq: s.sent, Released: s.released, MDSeq: s.mdReleased, History: s.cfg.History}
	return hb.Append(dst)
}

// AnnounceEpoch puts NEW_EPOCH for the group in the outbox: this primary leads from its epoch on;
// lastSeq is the last seq of the earlier history it holds and prevEpoch the
// epoch of its record at lastSeq, so a receiver can tell a failover from a
// gap and find where its own history forks. The runtime repeats it, so a
// node that missed it (or was paused) still learns the fork point.
func (s *Sequencer) AnnounceEpoch(prevEpoch, lastSeq uint64, nowNs int64) {
	ne := wire.NewEpoch{Origin: s.origin, PrevEpoch: prevEpoch, LastSeq: lastSeq, History: s.cfg.History}
	s.out.push(true, 0, ne.Append(s.out.buf()))
	s.lastSendNs = nowNs
	s.started = true
}

// SendHash puts the state hash after seq in the outbox for the group, for standbys to compare.
func (s *Sequencer) SendHash(seq, hash uint64, nowNs int64) {
	h := wire.Hash{Origin: s.origin, Seq: seq, Hash: hash}
	s.out.push(true, 0, h.Append(s.out.buf()))
	s.lastSendNs = nowNs
	s.started = true
}

// refill adds retransmit tokens for the time since the last refill.
func (s *Sequencer) refill(nowNs int64) {
	if nowNs <= s.lastRefillNs {
		return
	}
	elapsed := nowNs - s.lastRefillNs
	s.lastRefillNs = nowNs
	// Cap elapsed first so the product cannot overflow.
	if elapsed > 10_000_000_000 {
		elapsed = 10_000_000_000
	}
	s.tokens += elapsed * s.cfg.RetransmitBytesPerSec / 1_000_000_000
	if s.tokens > s.cfg.RetransmitBurstBytes {
		s.tokens = s.cfg.RetransmitBurstBytes
	}
}

// OnNak answers a NAK from a standby: every range, in order, is resent as
// RETRANSMIT frames from the ring, or from the journal for seqs older than
// the ring, or answered with NEED_SNAPSHOT when neither holds it. One NAK
// sends at most MaxFramesPerNak frames and only while the bandwidth budget
// has tokens; the standby NAKs again for the rest after its back-off.
func (s *Sequencer) OnNak(nak *wire.Nak, nowNs int64) {
	s.stats.NaksReceived++
	s.refill(nowNs)
	budget := s.cfg.MaxFramesPerNak
	for _, r := range nak.Ranges[:nak.N] {
		if r.From > s.sent {
			s.stats.NaksAboveHighest++
			continue
		}
		r.To = min(r.To, s.sent)
		var stop bool
		budget, stop = s.resend(nak.Node, r, budget)
		if stop {
			return
		}
	}
}

// resend sends range r to node; stop reports a bound was hit.
func (s *Sequencer) resend(node uint32, r wire.Range, budget int) (int, bool) {
	oldest := s.ringOldest()
	if r.From < oldest {
		// The part below the ring comes from the journal.
		to := min(r.To, oldest-1)
		var stop bool
		budget, stop = s.resendFromHistory(node, wire.Range{From: r.From, To: to}, budget)
		if stop || r.To < oldest {
			return budget, stop
		}
		r.From = oldest
	}
	for i := s.ringIndex(r.From); i < s.count; i++ {
		sl := &s.ring[(s.head+i)%len(s.ring)]
		if sl.first > r.To {
			break
		}
		if !s.spend(len(sl.frame), &budget) {
			return budget, true
		}
		frame := append(s.out.buf(), sl.frame...)
		if err := wire.Retype(frame, wire.TypeRetransmit); err != nil {
			panic("sequencer: ring holds a bad frame: " + err.Error())
		}
		s.out.push(false, node, frame)
		s.stats.RetransmitFrames++
	}
	return budget, false
}

// spend takes one frame of n bytes from the per-NAK budget and the
// bandwidth bucket; false means a bound was hit (and is counted).
func (s *Sequencer) spend(n int, budget *int) bool {
	if *budget == 0 {
		s.stats.NakFramesClamped++
		return false
	}
	if s.tokens < int64(n) {
		s.stats.NakBudgetExceeded++
		return false
	}
	*budget--
	s.tokens -= int64(n)
	return true
}

// resendFromHistory re-packs journal records of r into RETRANSMIT frames.
func (s *Sequencer) resendFromHistory(node uint32, r wire.Range, budget int) (int, bool) {
	if s.hist == nil {
		s.needSnapshot(node)
		return budget, true
	}
	s.stats.JournalFallbacks++
	stop := false
	// Each RETRANSMIT frame carries the epoch its records were sequenced
	// under (as the original DATA frame did), so a standby journals the
	// true epoch of every record and later fork checks compare like with
	// like; a batch is cut where the epoch changes.
	batchEpoch := s.origin.Epoch
	s.scratch.Reset(wire.TypeRetransmit, s.origin, r.From)
	reset := func(epoch, seq uint64) {
		o := s.origin
		o.Epoch = epoch
		s.scratch.Reset(wire.TypeRetransmit, o, seq)
		batchEpoch = epoch
	}
	expect := r.From
	flush := func() bool {
		if s.scratch.Count() == 0 {
			return true
		}
		frame := s.scratch.Bytes()
		if !s.spend(len(frame), &budget) {
			stop = true
			return false
		}
		s.out.push(false, node, append(s.out.buf(), frame...))
		s.stats.RetransmitFrames++
		return true
	}
	err := s.hist.ReadFrom(r.From, func(epoch, seq uint64, payload []byte) bool {
		if seq != expect || seq > r.To {
			return false
		}
		if s.scratch.Count() == 0 {
			reset(epoch, seq)
		} else if epoch != batchEpoch || !s.scratch.Add(payload) {
			if !flush() {
				return false
			}
			reset(epoch, seq)
		} else {
			expect++
			return expect <= r.To
		}
		if !s.scratch.Add(payload) {
			return false
		}
		expect++
		return expect <= r.To
	})
	if stop {
		return budget, true
	}
	if err != nil || expect == r.From {
		s.needSnapshot(node)
		return budget, true
	}
	if !flush() {
		return budget, true
	}
	return budget, false
}

func (s *Sequencer) needSnapshot(node uint32) {
	ns := wire.NeedSnapshot{Origin: s.origin, FirstAvailable: s.ringOldest(), SnapshotSeq: s.snapshotSeq}
	s.out.push(false, node, ns.Append(s.out.buf()))
	s.stats.NeedSnapshots++
}

// ringOldest is the first seq the ring holds (HighestSent+1 when empty).
func (s *Sequencer) ringOldest() uint64 {
	if s.count == 0 {
		return s.sent + 1
	}
	return s.ring[s.head].first
}

// ringIndex is the position (0 = oldest) of the slot holding seq, found by
// binary search over the ordered ring.
func (s *Sequencer) ringIndex(seq uint64) int {
	lo, hi := 0, s.count
	for lo < hi {
		mid := (lo + hi) / 2
		if s.ring[(s.head+mid)%len(s.ring)].last < seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
