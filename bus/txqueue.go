package bus

import "net/netip"

// TxQueue batches the sends of one pass of an agent: between Begin and
// End, each frame queued is copied into an arena (callers reuse their
// buffers), and the queue leaves with one call per socket: one Send when
// every frame goes to one address (DATA to a group, one client's
// outputs), one SendEach when the socket is a MultiSender (bus.UDP: one
// sendmmsg, each datagram to its own address), else one Send per run of
// one address. The order of every datagram is kept exactly: a frame for
// another socket flushes the queue first, so what leaves, and in which
// order, is what leaves without the queue; only the syscalls are fewer.
// Nothing waits for more work than the pass holds.
//
// Bounds: TxFramesMax frames and TxArenaBytes of frame bytes; a frame
// that would pass either flushes the queue first, and a frame larger than
// the arena is not queued (the caller sends it itself, in order: the
// queue is then empty).
//
// A failed Send or SendEach is counted once per call in the failed counts
// the methods return; the datagrams from the failing one on in that call
// are not sent (Sender's contract).
//
// The zero value is ready; Begin allocates the arena once. A TxQueue
// never allocates after that and is not safe for concurrent use.
type TxQueue struct {
	on    bool
	s     Sender // the socket the queued frames leave by
	n     int
	arena []byte
	bufs  [TxFramesMax][]byte
	to    [TxFramesMax]netip.AddrPort
}

// Bounds of one TxQueue: a full queue is flushed and refilled.
const (
	TxFramesMax  = BatchSizeMax
	TxArenaBytes = 64 << 10
)

// TxFramesPerSend bounds how many frames of a stream whose first frame
// must not wait for the whole pass (DATA) are queued before QueueUpTo
// sends them: a pass that fills hundreds sends them in calls of this many
// as they fill, so the first one's wait stays short (~8 frames) while the
// syscalls stay one per 8 frames.
const TxFramesPerSend = 8

// Begin starts queueing.
func (q *TxQueue) Begin() {
	if q.arena == nil {
		q.arena = make([]byte, 0, TxArenaBytes)
	}
	q.on = true
}

// End sends what is queued and stops queueing; it returns the number of
// calls that failed.
func (q *TxQueue) End() (failed int) {
	failed = q.Flush()
	q.on = false
	return failed
}

// Len returns how many frames wait.
func (q *TxQueue) Len() int { return q.n }

// Queue copies frame into the queue, to leave by s to to. It reports
// whether it queued (false outside Begin..End, or for a frame larger than
// the arena: the caller sends it now) and how many calls failed sending
// what was queued before (a frame for another socket, or a full queue,
// flushes first).
func (q *TxQueue) Queue(s Sender, frame []byte, to netip.AddrPort) (queued bool, failed int) {
	if !q.on {
		return false, 0
	}
	if q.n > 0 && (q.s != s || q.n == TxFramesMax || len(q.arena)+len(frame) > cap(q.arena)) {
		failed = q.Flush()
	}
	if len(frame) > cap(q.arena) {
		return false, failed // larger than the whole arena: sent on its own, in order (the queue is empty)
	}
	start := len(q.arena)
	q.arena = append(q.arena, frame...)
	q.bufs[q.n] = q.arena[start:len(q.arena):len(q.arena)]
	q.to[q.n] = to
	q.s = s
	q.n++
	return true, failed
}

// QueueUpTo is Queue, and once perSend or more frames wait after the frame
// was queued, it sends them (a long pass: the frames filled so far need
// not wait for the rest).
func (q *TxQueue) QueueUpTo(s Sender, frame []byte, to netip.AddrPort, perSend int) (queued bool, failed int) {
	queued, failed = q.Queue(s, frame, to)
	if queued && q.n >= perSend {
		failed += q.Flush()
	}
	return queued, failed
}

// Discard drops the queued frames unsent and returns how many they were.
func (q *TxQueue) Discard() int {
	n := q.n
	clear(q.bufs[:q.n])
	q.n, q.s, q.arena = 0, nil, q.arena[:0]
	return n
}

// Flush sends the queued frames now and returns the number of calls that
// failed (each counted once).
func (q *TxQueue) Flush() (failed int) {
	if q.n == 0 {
		return 0
	}
	bufs, to := q.bufs[:q.n], q.to[:q.n]
	same := true
	for i := 1; i < len(to); i++ {
		if to[i] != to[0] {
			same = false
			break
		}
	}
	ms, multi := q.s.(MultiSender)
	switch {
	case same:
		if err := q.s.Send(bufs, to[0]); err != nil {
			failed++
		}
	case multi:
		if err := ms.SendEach(bufs, to); err != nil {
			failed++
		}
	default:
		for start := 0; start < len(bufs); {
			end := start + 1
			for end < len(bufs) && to[end] == to[start] {
				end++
			}
			if err := q.s.Send(bufs[start:end], to[start]); err != nil {
				failed++
			}
			start = end
		}
	}
	clear(q.bufs[:q.n])
	q.n, q.s, q.arena = 0, nil, q.arena[:0]
	return failed
}
