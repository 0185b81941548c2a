package auth

import "math"

// The replay filter is the sliding-window bitmap of RFC 6479, in the shape
// of wireguard-go's replay package: a ring of 64-bit blocks, the highest
// accepted counter, and a window that slides forward a whole block at a
// time, clearing the blocks it enters.
const (
	replayBlockBitsLog = 6
	replayBlockBits    = 1 << replayBlockBitsLog
	replayRingBlocks   = 32 // 2048 bits: 256 bytes per filter
	replayBlockMask    = replayRingBlocks - 1
	replayBitMask      = replayBlockBits - 1

	// ReplayWindow is how far behind the highest accepted counter a counter
	// may be and still be accepted (once): 2048 ring bits less the block
	// the highest counter sits in, which is only partly behind it. A
	// counter further back is rejected even if never seen. With a DATA
	// frame's first seq as the counter, that is 1984 sequence numbers of
	// reordering: about 50 frames of 40 messages. A frame dropped for being
	// behind the window is not lost: the standby NAKs its range and gets a
	// RETRANSMIT.
	ReplayWindow = (replayRingBlocks - 1) * replayBlockBits

	// CounterLimit is the limit EpochFilter uses: every counter below it
	// is acceptable, so only math.MaxUint64 itself is refused.
	CounterLimit uint64 = math.MaxUint64
)

// Filter rejects replayed counters: ValidateCounter accepts each counter at
// most once, accepts any counter above every counter accepted so far, and
// accepts a lower one only within ReplayWindow of the highest. Its memory
// is fixed (a 2048-bit ring); it never allocates. The zero value is an
// empty filter, ready to use. A Filter is not safe for concurrent use.
type Filter struct {
	last uint64
	ring [replayRingBlocks]uint64
}

// Reset empties the filter.
func (f *Filter) Reset() { *f = Filter{} }

// Highest returns the highest counter accepted since the last Reset (0
// before any).
func (f *Filter) Highest() uint64 { return f.last }

// ValidateCounter reports whether counter is new, and records it if so. It
// returns false for a counter at or over limit, one already accepted, or
// one more than ReplayWindow behind the highest accepted counter.
//
// It changes the filter, so call it only for a frame whose MAC verified:
// otherwise a forger could advance the window with a made-up counter and
// make every genuine frame look old.
func (f *Filter) ValidateCounter(counter, limit uint64) bool {
	if counter >= limit {
		return false
	}
	block := counter >> replayBlockBitsLog
	if counter > f.last {
		// Slide forward: clear every block between the old highest block
		// and the new one, at most the whole ring.
		current := f.last >> replayBlockBitsLog
		diff := min(block-current, replayRingBlocks)
		for i := current + 1; i <= current+diff; i++ {
			f.ring[i&replayBlockMask] = 0
		}
		f.last = counter
	} else if f.last-counter > ReplayWindow {
		return false
	}
	i := block & replayBlockMask
	bit := uint64(1) << (counter & replayBitMask)
	old := f.ring[i]
	f.ring[i] = old | bit
	return old&bit == 0
}

// EpochFilter is a Filter for counters that restart in every epoch, such as
// the first seq of DATA frames: it accepts (epoch, counter) pairs of the
// highest epoch seen, each at most once, and refuses every pair of an
// older epoch. An authenticated frame of a newer epoch starts a new, empty
// window. The zero value is ready to use; it is not safe for concurrent use.
type EpochFilter struct {
	epoch  uint64
	filter Filter
}

// Epoch returns the epoch whose counters the filter is tracking.
func (e *EpochFilter) Epoch() uint64 { return e.epoch }

// Accept records (epoch, counter) and returns nil if it is new, or
// ErrReplay if the epoch is older than the filter's, the counter was
// already accepted in this epoch, it is behind the window, or it equals
// CounterLimit. Call it only after the frame's MAC verified (see
// Filter.ValidateCounter); a refused pair changes nothing.
func (e *EpochFilter) Accept(epoch, counter uint64) error {
	if epoch < e.epoch || counter >= CounterLimit {
		return ErrReplay
	}
	if epoch > e.epoch {
		e.epoch = epoch
		e.filter.Reset()
	}
	if !e.filter.ValidateCounter(counter, CounterLimit) {
		return ErrReplay
	}
	return nil
}
