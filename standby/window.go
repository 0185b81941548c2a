package standby

import (
	"errors"
	"fmt"
	"math/bits"
)

// Implementation limits (not protocol constants).
const (
	// DefaultMaxPending is the buffer bound used when Config.MaxPending is
	// zero. At 1M messages/s it covers 4 ms of reordering or loss, one
	// scheduler tick on the reference machines, before a snapshot is needed.
	DefaultMaxPending = 4096
	// DefaultMaxMessageBytes is the slot size used when
	// Config.MaxMessageBytes is zero. Matching-engine commands are well
	// under 256 bytes; 1 KiB slots keep the default buffer at 4 MiB.
	DefaultMaxMessageBytes = 1024
	// MaxPendingLimit bounds Config.MaxPending so that a typo cannot ask for
	// gigabytes of slots.
	MaxPendingLimit = 1 << 20
	// MaxMessageBytesLimit is the largest message a DATA frame can carry (a
	// 16-bit length prefix); a larger slot could never be filled.
	MaxMessageBytesLimit = 65535
	// MaxBufferBytes bounds the preallocated payload arena
	// (slots × MaxMessageBytes).
	MaxBufferBytes = 1 << 30

	// minSlots keeps the ring at least one bitmap word wide so that the
	// bit scans never deal with a partial word.
	minSlots = 64
)

// ApplyFunc receives each message exactly once, in sequence order, with no
// gap. payload is only valid during the call: it is either the caller's
// receive buffer (in-order delivery, no copy) or a buffer slot that is
// reused afterwards. The function must not call back into the Window's
// mutating methods (that panics); Applied is updated after it returns.
type ApplyFunc func(seq uint64, payload []byte)

// Range is an inclusive range of sequence numbers, From <= To.
type Range struct {
	From, To uint64
}

// Len is the number of sequence numbers in r (0 for the impossible
// From > To, and saturating at the uint64 maximum for the full range).
func (r Range) Len() uint64 {
	if r.From > r.To {
		return 0
	}
	n := r.To - r.From
	if n == ^uint64(0) {
		return n
	}
	return n + 1
}

// Config bounds a Window. The zero value is valid and means the defaults.
type Config struct {
	// MaxPending is how many out-of-order messages may be buffered: the
	// window accepts Applied+2 .. Applied+1+MaxPending for buffering, and a
	// message beyond that returns ErrNeedSnapshot. 0 means
	// DefaultMaxPending; at most MaxPendingLimit.
	MaxPending int
	// MaxMessageBytes is the largest payload accepted; larger ones return
	// ErrMessageTooLarge. Memory preallocated by New is
	// MaxMessageBytes × (MaxPending rounded up to a power of two, at least
	// 64). 0 means DefaultMaxMessageBytes; at most MaxMessageBytesLimit.
	MaxMessageBytes int
	// Start is the highest sequence number already applied (for example
	// recovered from the standby's journal); 0 means nothing applied.
	Start uint64
}

// Stats are cumulative counters for an operator. Only accepted input moves
// them: a call that returns an error changes no counter (see Rejects for
// counting those in the caller).
type Stats struct {
	// Applied counts messages passed to ApplyFunc (in order and drained).
	Applied uint64
	// Drained counts the subset of Applied that came out of the buffer.
	Drained uint64
	// Duplicates counts messages ignored because they were already applied
	// or already buffered.
	Duplicates uint64
	// Buffered counts messages copied into the buffer because they arrived
	// ahead of a gap.
	Buffered uint64
	// Dropped counts buffered messages discarded by ResetTo because the
	// snapshot already covered them (or, on a rewind, all of them).
	Dropped uint64
	// Resets counts ResetTo calls.
	Resets uint64
}

// Rejects counts the errors OnMessage returned. The Window does not count
// them itself because a rejected call must leave every observable of the
// Window unchanged; the runtime keeps a Rejects next to the Window and
// calls Count with every error.
type Rejects struct {
	NeedSnapshot    uint64
	MessageTooLarge uint64
	Other           uint64
}

// Count adds err to the matching counter; nil is ignored.
func (r *Rejects) Count(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrNeedSnapshot):
		r.NeedSnapshot++
	case errors.Is(err, ErrMessageTooLarge):
		r.MessageTooLarge++
	default:
		r.Other++
	}
}

// Window is the standby receive window: it applies messages by sequence
// number, ignores duplicates, buffers what arrives ahead of a gap in a
// bounded ring and reports the gaps to NAK. It does no I/O, reads no clock
// and is not safe for concurrent use.
type Window struct {
	apply ApplyFunc

	maxPending      uint64 // window width for buffering
	maxMessageBytes int    // slot size
	mask            uint64 // slots - 1; slots is a power of two

	applied     uint64 // highest contiguous applied seq
	highest     uint64 // highest seq known to exist; >= applied
	pending     uint64 // number of buffered messages
	lastPending uint64 // highest buffered seq; meaningful only when pending > 0

	// Slot i holds the buffered message whose seq&mask == i. Because the
	// buffered seqs all lie in Applied+2 .. Applied+1+maxPending and
	// maxPending <= slots, no two can share a slot.
	present []uint64 // bitmap: bit i set when slot i holds a message
	seqs    []uint64 // seq held by slot i, checked when draining
	lengths []uint32 // payload length in slot i
	arena   []byte   // slots × maxMessageBytes payload bytes

	stats    Stats
	applying bool // inside ApplyFunc; guards against reentrant mutation
}

// New returns a Window with every buffer preallocated. apply must not be
// nil. It returns an error wrapping ErrInvalidConfig when cfg is out of
// range (a configuration error is an operator's mistake, reported rather
// than panicked on).
func New(cfg Config, apply ApplyFunc) (*Window, error) {
	if apply == nil {
		panic("standby: New with a nil ApplyFunc")
	}
	return newWindow(cfg, apply)
}

// NewPull returns a Window that never calls back: Offer takes a message
// and says whether it is the next one in order, and Next hands out the
// buffered messages that have become contiguous (see Offer). Everything
// else (Gaps, ResetTo, the counters) is as for New.
func NewPull(cfg Config) (*Window, error) { return newWindow(cfg, nil) }

func newWindow(cfg Config, apply ApplyFunc) (*Window, error) {
	maxPending := cfg.MaxPending
	if maxPending == 0 {
		maxPending = DefaultMaxPending
	}
	maxMessageBytes := cfg.MaxMessageBytes
	if maxMessageBytes == 0 {
		maxMessageBytes = DefaultMaxMessageBytes
	}
	if maxPending < 0 || maxPending > MaxPendingLimit {
		return nil, fmt.Errorf("%w: MaxPending %d not in 1..%d", ErrInvalidConfig, maxPending, MaxPendingLimit)
	}
	if maxMessageBytes < 0 || maxMessageBytes > MaxMessageBytesLimit {
		return nil, fmt.Errorf("%w: MaxMessageBytes %d not in 1..%d", ErrInvalidConfig, maxMessageBytes, MaxMessageBytesLimit)
	}
	slots := uint64(minSlots)
	for slots < uint64(maxPending) {
		slots <<= 1
	}
	if slots*uint64(maxMessageBytes) > MaxBufferBytes {
		return nil, fmt.Errorf("%w: buffer of %d slots × %d bytes over %d bytes",
			ErrInvalidConfig, slots, maxMessageBytes, MaxBufferBytes)
	}
	return &Window{
		apply:           apply,
		maxPending:      uint64(maxPending),
		maxMessageBytes: maxMessageBytes,
		mask:            slots - 1,
		applied:         cfg.Start,
		highest:         cfg.Start,
		present:         make([]uint64, slots/64),
		seqs:            make([]uint64, slots),
		lengths:         make([]uint32, slots),
		arena:           make([]byte, slots*uint64(maxMessageBytes)),
	}, nil
}

// Applied is the highest sequence number applied with no gap before it.
func (w *Window) Applied() uint64 { return w.applied }

// Ack is the sequence number to acknowledge to the primary: the highest
// contiguous applied seq, never the highest received.
func (w *Window) Ack() uint64 { return w.applied }

// Highest is the highest sequence number known to exist: the maximum of
// Applied, every accepted message and every ObserveHighest.
func (w *Window) Highest() uint64 { return w.highest }

// Pending is the number of buffered (received, not yet applied) messages.
func (w *Window) Pending() int { return int(w.pending) }

// MaxPending is the effective buffer bound.
func (w *Window) MaxPending() int { return int(w.maxPending) }

// Stats returns the counters.
func (w *Window) Stats() Stats { return w.stats }

// OnMessage takes one message of the stream. The rules, in order:
//
//  1. len(payload) > MaxMessageBytes: return ErrMessageTooLarge, change
//     nothing.
//  2. seq <= Applied: a duplicate, ignored.
//  3. seq == Applied+1: applied, then every buffered message that is now
//     contiguous is applied in order.
//  4. seq > Applied+1+MaxPending (the buffer cannot hold it, which includes
//     the buffer being full): return ErrNeedSnapshot, change nothing.
//  5. otherwise seq is buffered (payload copied), unless it already is
//     (a duplicate, ignored).
//
// Unless an error was returned, if anything is still buffered the first gap
// is returned as the inclusive retransmit request (Applied+1,
// firstPending-1) with hasGap true. A tail gap (nothing buffered but
// Highest > Applied) is not reported here; see Gaps.
func (w *Window) OnMessage(seq uint64, payload []byte) (gap Range, hasGap bool, err error) {
	w.enter()
	defer w.leave()
	if len(payload) > w.maxMessageBytes {
		return Range{}, false, ErrMessageTooLarge
	}
	if seq <= w.applied {
		w.stats.Duplicates++
		gap, hasGap = w.firstGap()
		return gap, hasGap, nil
	}
	ahead := seq - w.applied // >= 1, cannot overflow
	if ahead == 1 {
		w.applyNext(payload)
		w.drain()
		gap, hasGap = w.firstGap()
		return gap, hasGap, nil
	}
	if ahead-1 > w.maxPending {
		return Range{}, false, ErrNeedSnapshot
	}
	w.store(seq, payload)
	gap, hasGap = w.firstGap()
	return gap, hasGap, nil
}

// Offer is OnMessage for a Window made by NewPull, which applies nothing
// itself: when seq is the next in order it moves Applied to seq and
// returns inOrder true, and the caller applies payload (its own buffer: no
// copy). Then, and after ResetTo, the caller takes every message that has
// become contiguous from Next before it offers another. The other rules,
// the errors and the counters are OnMessage's; a seq equal to Applied+1
// that is already buffered (it comes out of Next) is a duplicate.
func (w *Window) Offer(seq uint64, payload []byte) (inOrder bool, err error) {
	if len(payload) > w.maxMessageBytes {
		return false, ErrMessageTooLarge
	}
	if seq <= w.applied || (seq == w.applied+1 && w.buffered(seq)) {
		w.stats.Duplicates++
		return false, nil
	}
	ahead := seq - w.applied
	if ahead == 1 {
		w.applied = seq
		if w.highest < seq {
			w.highest = seq
		}
		w.stats.Applied++
		return true, nil
	}
	if ahead-1 > w.maxPending {
		return false, ErrNeedSnapshot
	}
	w.store(seq, payload)
	return false, nil
}

// Next hands out the buffered message Applied+1, if it is there, and
// moves Applied to it (a Window made by NewPull). payload is the buffer
// slot's: valid until the next Offer or ResetTo.
func (w *Window) Next() (seq uint64, payload []byte, ok bool) {
	if w.pending == 0 {
		return 0, nil, false
	}
	seq = w.applied + 1
	if !w.buffered(seq) {
		return 0, nil, false
	}
	slot := seq & w.mask
	w.clear(slot)
	w.stats.Drained++
	w.stats.Applied++
	w.applied = seq
	if w.highest < seq {
		w.highest = seq
	}
	return seq, w.slotBytes(slot), true
}

// ObserveHighest records that the primary says seq exists (from a
// HEARTBEAT), so that a tail gap becomes visible to Gaps when traffic
// stops. Lower values are ignored. The value is not bounded here: the
// primary bounds what it retransmits and the window bounds what it buffers.
func (w *Window) ObserveHighest(seq uint64) {
	w.enter()
	defer w.leave()
	if seq > w.highest {
		w.highest = seq
	}
}

// ResetTo resumes the stream after a snapshot covering 1..snapshotSeq was
// installed. If snapshotSeq >= Applied, Applied becomes snapshotSeq,
// buffered messages <= snapshotSeq are dropped and everything now
// contiguous is applied; the first gap is returned as by OnMessage.
//
// If snapshotSeq < Applied the stream is rewound (a deposed primary that
// restored an older snapshot to step down): Applied and Highest become
// snapshotSeq and every buffered message is dropped, because it was
// received against a history this node no longer holds. This is the only
// way Ack goes backwards.
func (w *Window) ResetTo(snapshotSeq uint64) (gap Range, hasGap bool) {
	w.enter()
	defer w.leave()
	w.stats.Resets++
	if snapshotSeq < w.applied {
		w.dropThrough(w.lastPending)
		w.applied = snapshotSeq
		w.highest = snapshotSeq
		return Range{}, false
	}
	w.dropThrough(snapshotSeq)
	w.applied = snapshotSeq
	if w.highest < w.applied {
		w.highest = w.applied
	}
	if w.apply == nil {
		return Range{}, false // a pull Window: the caller drains with Next
	}
	w.drain()
	return w.firstGap()
}

// Gaps appends to dst every open gap in ascending order: the ranges
// between Applied and the buffered messages, then the tail up to Highest.
// It never grows dst beyond cap(dst), so it does not allocate; when
// cap(dst)-len(dst) ranges are not enough the highest gaps are left out
// (they are asked for again after the lower ones are filled).
func (w *Window) Gaps(dst []Range) []Range {
	if len(dst) >= cap(dst) {
		return dst
	}
	if w.applied == w.highest {
		return dst // nothing missing; also covers applied == MaxUint64
	}
	start := w.applied + 1 // first missing seq of the next gap
	if w.pending > 0 {
		for {
			first, ok := w.scan(start+1, w.lastPending, true)
			if !ok {
				break
			}
			dst = append(dst, Range{From: start, To: first - 1})
			if len(dst) == cap(dst) {
				return dst
			}
			// The run of buffered seqs starting at first ends before the
			// next missing seq, or at lastPending (tested first because
			// first+1 overflows when first is the uint64 maximum).
			next, ok := uint64(0), false
			if first != w.lastPending {
				next, ok = w.scan(first+1, w.lastPending, false)
			}
			if !ok {
				if w.lastPending == w.highest {
					return dst // also covers lastPending == MaxUint64
				}
				start = w.lastPending + 1
				break
			}
			start = next
		}
	}
	if start <= w.highest {
		dst = append(dst, Range{From: start, To: w.highest})
	}
	return dst
}

// enter marks the start of a mutating call and rejects one made from
// inside ApplyFunc, which would see (and change) a half-drained window.
func (w *Window) enter() {
	if w.applying {
		panic("standby: Window mutated from inside its ApplyFunc")
	}
}

// leave resets the guard even when ApplyFunc panicked, so that a runtime
// that recovers does not find the window permanently locked.
func (w *Window) leave() { w.applying = false }

// applyNext applies the message with seq Applied+1.
func (w *Window) applyNext(payload []byte) {
	seq := w.applied + 1
	w.applying = true
	w.apply(seq, payload)
	w.applying = false
	w.applied = seq
	if w.highest < seq {
		w.highest = seq
	}
	w.stats.Applied++
}

// drain applies buffered messages while the next one is present. The
// loop is bounded by pending, which it decrements. The next one's slot
// may hold the seq a ring further on (buffered): ResetTo(Applied) with
// Applied+1+MaxPending buffered in a window as wide as its ring panicked
// here before.
func (w *Window) drain() {
	for w.pending > 0 {
		seq := w.applied + 1
		if !w.buffered(seq) {
			return
		}
		slot := seq & w.mask
		w.clear(slot)
		w.stats.Drained++
		w.applyNext(w.slotBytes(slot))
	}
}

// store copies payload into the slot of seq, which lies in
// Applied+2 .. Applied+1+maxPending.
func (w *Window) store(seq uint64, payload []byte) {
	slot := seq & w.mask
	if w.has(slot) {
		if w.seqs[slot] != seq {
			panic(fmt.Sprintf("standby: slot %d holds seq %d while storing %d", slot, w.seqs[slot], seq))
		}
		w.stats.Duplicates++
		return
	}
	if w.pending >= w.maxPending {
		panic(fmt.Sprintf("standby: %d pending with a free slot in a window of %d", w.pending, w.maxPending))
	}
	base := slot * uint64(w.maxMessageBytes)
	copy(w.arena[base:base+uint64(len(payload))], payload)
	w.lengths[slot] = uint32(len(payload))
	w.seqs[slot] = seq
	w.present[slot>>6] |= 1 << (slot & 63)
	if w.pending == 0 || seq > w.lastPending {
		w.lastPending = seq
	}
	w.pending++
	if w.highest < seq {
		w.highest = seq
	}
	w.stats.Buffered++
}

// dropThrough discards every buffered message with seq <= through.
func (w *Window) dropThrough(through uint64) {
	if w.pending == 0 {
		return
	}
	if through >= w.lastPending {
		clear(w.present)
		w.stats.Dropped += w.pending
		w.pending = 0
		return
	}
	// Bounded by pending: each iteration clears one buffered message, and
	// lastPending itself survives, so pending stays above zero.
	from := w.applied + 2
	for {
		seq, ok := w.scan(from, through, true)
		if !ok {
			return
		}
		w.clear(seq & w.mask)
		w.stats.Dropped++
		from = seq + 1
	}
}

// firstGap reports (Applied+1, firstPending-1) when anything is buffered.
func (w *Window) firstGap() (Range, bool) {
	if w.pending == 0 {
		return Range{}, false
	}
	first, ok := w.scan(w.applied+2, w.lastPending, true)
	if !ok {
		panic(fmt.Sprintf("standby: %d pending but none in %d..%d", w.pending, w.applied+2, w.lastPending))
	}
	return Range{From: w.applied + 1, To: first - 1}, true
}

// buffered reports whether seq itself is buffered: its slot may instead
// hold seq+slots when the window is as wide as the ring (the original
// drain never looks at Applied+1's slot before applying Applied+1; a pull
// Window does).
func (w *Window) buffered(seq uint64) bool {
	slot := seq & w.mask
	return w.pending > 0 && w.has(slot) && w.seqs[slot] == seq
}

func (w *Window) has(slot uint64) bool { return w.present[slot>>6]&(1<<(slot&63)) != 0 }

func (w *Window) clear(slot uint64) {
	w.present[slot>>6] &^= 1 << (slot & 63)
	w.pending--
}

func (w *Window) slotBytes(slot uint64) []byte {
	base := slot * uint64(w.maxMessageBytes)
	return w.arena[base : base+uint64(w.lengths[slot])]
}

// scan returns the lowest seq in from..to whose slot is present (want true)
// or absent (want false). The range must lie inside one window, so it
// spans at most slots seqs and wraps the ring at most once. It reads a
// bitmap word at a time: at most slots/64 + 1 words.
func (w *Window) scan(from, to uint64, want bool) (uint64, bool) {
	if from > to {
		return 0, false
	}
	remaining := to - from // seqs left after from; avoids overflow at MaxUint64
	for {
		slot := from & w.mask
		word := w.present[slot>>6]
		if !want {
			word = ^word
		}
		word >>= slot & 63
		if word != 0 {
			offset := uint64(bits.TrailingZeros64(word))
			if offset > remaining {
				return 0, false
			}
			return from + offset, true
		}
		step := 64 - (slot & 63)
		if step > remaining {
			return 0, false
		}
		from += step
		remaining -= step
	}
}
