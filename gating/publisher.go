package gating

// PublisherStats counts what a Publisher did, for operators.
type PublisherStats struct {
	// Enqueued counts outputs accepted by Enqueue.
	Enqueued uint64
	// Released counts outputs handed out by Release.
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
	lastSeq   uint64
	releasing bool
	stats     PublisherStats
}

// NewPublisher returns an empty Publisher holding at most capacity outputs.
func NewPublisher[T any](capacity int) (*Publisher[T], error) {
	if capacity <= 0 {
		return nil, ErrInvalidConfig
	}
	return &Publisher[T]{outs: make([]T, capacity), seqs: make([]uint64, capacity)}, nil
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
	p.assertNotReleasing()
	if seq == 0 {
		return ErrZeroSeq
	}
	if seq < p.lastSeq {
		return ErrOutOfOrder
	}
	if p.count == len(p.outs) {
		p.stats.Full++
		return ErrFull
	}
	tail := p.head + p.count
	if tail >= len(p.outs) {
		tail -= len(p.outs)
	}
	p.outs[tail] = out
	p.seqs[tail] = seq
	p.count++
	p.lastSeq = seq
	p.stats.Enqueued++
	return nil
}

// Release hands every queued output with seq <= released to emit, in order,
// and returns how many. Each output is removed before emit sees it, so it is
// handed out at most once even if emit panics. The pointer is valid only
// during the call; emit must copy what it keeps and must not call back into
// the Publisher (that panics). Release does not check the lease: use Publish.
func (p *Publisher[T]) Release(released uint64, emit func(seq uint64, out *T)) int {
	p.assertNotReleasing()
	p.releasing = true
	defer func() { p.releasing = false }()
	var zero T
	n := 0
	for p.count > 0 && p.seqs[p.head] <= released {
		i := p.head
		p.head++
		if p.head == len(p.outs) {
			p.head = 0
		}
		p.count--
		p.stats.Released++
		n++
		emit(p.seqs[i], &p.outs[i])
		// Zero the slot so the ring does not keep what out referenced alive.
		p.outs[i] = zero
	}
	return n
}

// DropAll discards every queued output and returns how many. A node that
// loses the lease calls it: nothing may be queued to replay later.
func (p *Publisher[T]) DropAll() int {
	p.assertNotReleasing()
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

func (p *Publisher[T]) assertNotReleasing() {
	if p.releasing {
		panic("gating: Publisher called from inside its own Release callback")
	}
}

// Publish hands out every output of p whose seq the Gate has released, and
// returns how many. It hands out nothing while the Gate does not hold the
// lease: a deposed primary may compute, but it never releases.
func Publish[T any](g *Gate, p *Publisher[T], emit func(seq uint64, out *T)) int {
	if !g.LeaseHeld() {
		return 0
	}
	return p.Release(g.Released(), emit)
}
