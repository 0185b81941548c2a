package gating

// PublisherStats counts what a Publisher did, for operators.
type PublisherStats struct {
	// Enqueued counts outputs accepted by Enqueue.
	Enqueued uint64
	// Released counts outputs handed out by Next.
	Released uint64
	// Dropped counts outputs discarded by DropAll.
	Dropped uint64
	// Full counts Enqueue calls refused with ErrFull (back-pressure events).
	Full uint64
}

// Publisher is a bounded FIFO of outputs waiting for their seq to be
// released. Outputs are handed out in seq order, first in first out within
// one seq, each exactly once. It is not safe for concurrent use; its methods
// never allocate after NewPublisher.
type Publisher[T any] struct {
	outs  []T
	seqs  []uint64
	head  int
	count int
	// lastSeq is the seq of the last accepted output; it survives DropAll
	// so that a caller bug that reorders outputs is still caught.
	lastSeq uint64
	// lent is 1 + the index of the slot the last Next handed out (0:
	// none), zeroed at the next call.
	lent  int
	stats PublisherStats
}

// NewPublisher returns an empty Publisher holding at most capacity outputs.
func NewPublisher[T any](capacity int) (*Publisher[T], error) {
	if capacity <= 0 {
		return nil, ErrInvalidConfig
	}
	return &Publisher[T]{outs: make([]T, capacity), seqs: make([]uint64, capacity)}, nil
}

// Reset empties the publisher and its counters, as NewPublisher left it,
// keeping its memory: a runtime hands one publisher from term to term
// instead of allocating (and zeroing) a new one at each promotion. The
// queued outputs are forgotten, not handed out.
func (p *Publisher[T]) Reset() {
	*p = Publisher[T]{outs: p.outs, seqs: p.seqs}
}

// Prefault writes every slot once, so the pages of a new publisher are
// faulted in now rather than by the first outputs queued in them.
func (p *Publisher[T]) Prefault() {
	var zero T
	for i := range p.outs {
		p.outs[i] = zero
	}
	clear(p.seqs)
}

// Len returns how many outputs are queued.
func (p *Publisher[T]) Len() int { return p.count }

// Cap returns the capacity given to NewPublisher.
func (p *Publisher[T]) Cap() int { return len(p.outs) }

// Stats returns the counters.
func (p *Publisher[T]) Stats() PublisherStats { return p.stats }

// Enqueue queues out, caused by the command with seq. It returns ErrZeroSeq
// for seq 0, ErrOutOfOrder if seq is lower than the last enqueued seq, and
// ErrFull when capacity outputs are queued; in each case nothing is queued.
func (p *Publisher[T]) Enqueue(seq uint64, out T) error {
	slot, err := p.EnqueueSlot(seq)
	if err != nil {
		return err
	}
	*slot = out
	return nil
}

// EnqueueSlot is Enqueue for an output the caller writes in place: it
// queues the slot for seq and returns it, with the slot's previous
// contents, to be filled before the next call on p. Its errors are
// Enqueue's, and nothing is queued then. An output built on the stack
// and passed by value was copied twice (a 144-byte OUTPUT slot on every
// output of the primary), the second time reading what the first had
// just written, each 16-byte load a failed store-to-load forward.
func (p *Publisher[T]) EnqueueSlot(seq uint64) (*T, error) {
	p.clearLent()
	if seq == 0 {
		return nil, ErrZeroSeq
	}
	if seq < p.lastSeq {
		return nil, ErrOutOfOrder
	}
	if p.count == len(p.outs) {
		p.stats.Full++
		return nil, ErrFull
	}
	tail := p.head + p.count
	if tail >= len(p.outs) {
		tail -= len(p.outs)
	}
	p.seqs[tail] = seq
	p.count++
	p.lastSeq = seq
	p.stats.Enqueued++
	return &p.outs[tail], nil
}

// Next hands out the oldest queued output if its seq is at or below
// released, removing it from the queue; ok is false when none is (the
// queue is empty or its oldest output waits for a higher seq). The runtime
// drives the release as a loop, after the call and with nothing held by
// the Publisher, the way etcd/raft hands out a Ready:
//
//	for {
//		seq, out, ok := p.Next(released)
//		if !ok {
//			break
//		}
//		send(seq, out)
//	}
//
// Outputs come in seq order, first in first out within one seq, each
// exactly once: the output is removed before Next returns it. The pointer
// is valid until the next call on the Publisher; copy what you keep. That
// next call zeroes the slot, so the ring does not keep what out referenced
// alive. Next does not check the lease: pass Publishable(gate).
func (p *Publisher[T]) Next(released uint64) (seq uint64, out *T, ok bool) {
	p.clearLent()
	if p.count == 0 || p.seqs[p.head] > released {
		return 0, nil, false
	}
	i := p.head
	p.head++
	if p.head == len(p.outs) {
		p.head = 0
	}
	p.count--
	p.stats.Released++
	p.lent = i + 1
	return p.seqs[i], &p.outs[i], true
}

// clearLent zeroes the slot the last Next handed out.
func (p *Publisher[T]) clearLent() {
	if p.lent == 0 {
		return
	}
	var zero T
	p.outs[p.lent-1] = zero
	p.lent = 0
}

// DropAll discards every queued output and returns how many. A node that
// loses the lease calls it: nothing may be queued to replay later.
func (p *Publisher[T]) DropAll() int {
	p.clearLent()
	n := p.count
	var zero T
	for ; p.count > 0; p.count-- {
		p.outs[p.head] = zero
		p.head++
		if p.head == len(p.outs) {
			p.head = 0
		}
	}
	p.head = 0
	p.stats.Dropped += uint64(n)
	return n
}

// Publishable is the bound to pass to Publisher.Next: the Gate's released
// watermark while it holds the lease, else 0, under which nothing is ever
// queued (seq 0 is refused). A deposed primary may compute, but it never
// releases.
func Publishable(g *Gate) uint64 {
	if !g.LeaseHeld() {
		return 0
	}
	return g.Released()
}
