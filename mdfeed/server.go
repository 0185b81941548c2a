package mdfeed

import (
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

type bucket struct {
	tokens int64
	lastNs int64
}

// replyKind is what Next hands out for the request last handled.
type replyKind uint8

const (
	replyNone   replyKind = iota
	replyStatus           // one MD_STATUS
	replyRange            // MD_REPLAY frames from next to last
)

// reply is the answer to one request, handed out frame by frame by Next.
type reply[A comparable] struct {
	kind replyKind
	to   A
	// status: the request's First, the code and the bounds servable when
	// the request was refused.
	first          uint64
	code           wire.MDStatusCode
	oldest, newest uint64
	// range: the next update to pack and the last one.
	next, last uint64
}

// snapshotWait is the book snapshot exported for its waiters, sent once
// its MD seq is released.
type snapshotWait[A comparable] struct {
	active     bool
	mdSeq      uint64
	instrument uint32
	takenNs    int64
	waiters    []A
	// sending: the snapshot is released and being handed out by Next,
	// chunk chunk of chunks to waiters[waiter].
	sending       bool
	waiter, chunk int
	chunks        int
}

// server is the recovery service's state.
type server[A comparable] struct {
	buckets    map[A]bucket
	reply      reply[A]
	snap       snapshotWait[A]
	lastSnapNs int64 // when the last snapshot was exported
	levels     []engine.BookLevel
	wlevels    []wire.MDLevel
	perChunk   int // levels in one MD_SNAPSHOT chunk
	batch      *wire.Batch
	buf        []byte // MD_STATUS and MD_SNAPSHOT frames
}

func (s *server[A]) init(datagramLen int) {
	s.buckets = make(map[A]bucket)
	s.snap.waiters = make([]A, 0, MaxSnapshotWaiters)
	s.perChunk = wire.MaxMDSnapshotLevels(datagramLen)
	s.wlevels = make([]wire.MDLevel, 0, s.perChunk)
	s.batch = wire.NewBatch(datagramLen)
	s.buf = make([]byte, 0, datagramLen)
}

// Request handles one MD_REQUEST from a requester (client traffic, from
// anyone: the caller checked the frame's type, stream and MAC). books is
// the state machine's book export, nil when it has none (no snapshots,
// and every held update counts as at or below its MD seq). The answer is
// handed out by Next: a range of updates as MD_REPLAY frames, never above
// Released (nothing unreleased leaves a node), or one MD_STATUS refusing
// it (too old, not yet, rate limited, unavailable: no ring, no books, too
// many waiting, malformed). A snapshot request exports the books now, or
// joins the export waiting for the same instrument, and its chunks come
// out of Next once its MD seq is released. Every outcome is counted.
func (f *Feed[A]) Request(from A, req wire.MDRequest, nowNs int64, books engine.BookExporter) {
	f.stats.Requests++
	f.reply.kind = replyNone
	stateMD := StateMDSeq(books)
	switch {
	case f.ring == nil:
		f.refuse(from, req.First, wire.MDUnavailable, stateMD)
		return
	case !wellFormed(&req):
		f.stats.Malformed++
		f.refuse(from, req.First, wire.MDUnavailable, stateMD)
		return
	case !f.allow(from, nowNs):
		f.stats.RateLimited++
		f.refuse(from, req.First, wire.MDRateLimited, stateMD)
		return
	case req.Kind == wire.MDRequestSnapshot:
		f.snapshotRequest(from, req.Instrument, nowNs, books)
		return
	}
	oldest, newest := f.servable(stateMD)
	switch {
	case req.First < oldest:
		f.refuse(from, req.First, wire.MDTooOld, stateMD)
		return
	case req.First > newest:
		f.refuse(from, req.First, wire.MDNotYet, stateMD)
		return
	}
	last := min(newest, req.First+uint64(min(req.Count, MaxPerRequest))-1)
	f.reply = reply[A]{kind: replyRange, to: from, next: req.First, last: last}
	f.charge(from, int64(last-req.First+1)/UpdatesPerToken)
}

// wellFormed is wire.Parse's rule for an MD_REQUEST: a known kind, and a
// range from MD seq 1 or later of at least one update.
func wellFormed(r *wire.MDRequest) bool {
	switch r.Kind {
	case wire.MDRequestRange:
		return r.First != 0 && r.Count != 0
	case wire.MDRequestSnapshot:
		return true
	}
	return false
}

// StateMDSeq is the state machine's MD seq as the feed takes it (books
// nil: no BookExporter to ask, so all of the ring).
func StateMDSeq(books engine.BookExporter) uint64 {
	if books == nil {
		return ^uint64(0)
	}
	return books.MDSeq()
}

func (f *Feed[A]) refuse(to A, first uint64, code wire.MDStatusCode, stateMD uint64) {
	f.stats.Refused++
	oldest, newest := f.servable(stateMD)
	f.reply = reply[A]{kind: replyStatus, to: to, first: first, code: code, oldest: oldest, newest: newest}
}

// allow is the per-requester token bucket.
func (f *Feed[A]) allow(from A, nowNs int64) bool {
	b, ok := f.buckets[from]
	if !ok {
		if len(f.buckets) >= MaxRequesters {
			for k, v := range f.buckets {
				if nowNs-v.lastNs > RequesterIdleNs {
					delete(f.buckets, k)
				}
			}
			if len(f.buckets) >= MaxRequesters {
				return false
			}
		}
		b = bucket{tokens: Burst, lastNs: nowNs}
	}
	if gained := (nowNs - b.lastNs) / RefillNs; gained > 0 {
		b.tokens = min(Burst, b.tokens+gained)
		b.lastNs += gained * RefillNs
	}
	ok = b.tokens > 0
	if ok {
		b.tokens--
	}
	f.buckets[from] = b
	return ok
}

// charge takes tokens more from an allowed requester's bucket (it may go
// below zero: the requester waits until it refills).
func (f *Feed[A]) charge(from A, tokens int64) {
	if b, ok := f.buckets[from]; ok {
		b.tokens -= tokens
		f.buckets[from] = b
	}
}

func (f *Feed[A]) expireSnapshot() {
	w := &f.snap
	w.active, w.sending, w.waiters = false, false, w.waiters[:0]
	f.stats.SnapshotsExpired++
}

func (f *Feed[A]) snapshotRequest(from A, instrument uint32, nowNs int64, books engine.BookExporter) {
	w := &f.snap
	if w.active && !w.sending && nowNs-w.takenNs > SnapshotWaitNs {
		f.expireSnapshot()
	}
	stateMD := StateMDSeq(books)
	if w.active {
		if w.sending || w.instrument != instrument || len(w.waiters) >= MaxSnapshotWaiters {
			f.refuse(from, 0, wire.MDUnavailable, stateMD)
			return
		}
		for _, a := range w.waiters {
			if a == from {
				return // asked again while waiting: one copy
			}
		}
		w.waiters = append(w.waiters, from)
		return
	}
	if books == nil || (f.lastSnapNs != 0 && nowNs-f.lastSnapNs < SnapshotEveryNs) {
		f.refuse(from, 0, wire.MDUnavailable, stateMD)
		return
	}
	f.lastSnapNs = nowNs
	f.charge(from, SnapshotTokens)
	f.levels = books.AppendBook(f.levels[:0], instrument)
	if len(f.levels) > MaxSnapshotLevels {
		f.levels = f.levels[:0]
		f.refuse(from, 0, wire.MDUnavailable, stateMD)
		return
	}
	w.active, w.mdSeq, w.instrument, w.takenNs = true, books.MDSeq(), instrument, nowNs
	w.waiters = append(w.waiters[:0], from)
	f.ServeSnapshot(nowNs)
}

// ServeSnapshot starts handing out (through Next) the waiting snapshot to
// its waiters if its MD seq is released, and drops it if it waited longer
// than SnapshotWaitNs. The primary calls it after every release (Request
// and OnHeartbeat call it themselves).
func (f *Feed[A]) ServeSnapshot(nowNs int64) {
	w := &f.snap
	if !w.active || w.sending {
		return
	}
	if w.mdSeq > f.released {
		if nowNs-w.takenNs > SnapshotWaitNs {
			f.expireSnapshot()
		}
		return
	}
	w.sending, w.waiter, w.chunk = true, 0, 0
	w.chunks = max((len(f.levels)+f.perChunk-1)/f.perChunk, 1)
}

// Next returns the next frame to send by unicast, built with origin o,
// and its addressee: the answer to the last Request, then the chunks of a
// released snapshot to each waiter in turn. ok false: nothing (more) to
// send. The frame is valid until the next call. Call it until ok is false
// after every Request, OnHeartbeat and ServeSnapshot: a new request
// replaces an answer not yet handed out.
func (f *Feed[A]) Next(o wire.Origin) (frame []byte, to A, ok bool) {
	if r := &f.reply; r.kind != replyNone {
		return f.nextReply(r, o)
	}
	if f.snap.sending {
		return f.nextChunk(o)
	}
	return nil, to, false
}

func (f *Feed[A]) nextReply(r *reply[A], o wire.Origin) ([]byte, A, bool) {
	if r.kind == replyStatus {
		st := wire.MDStatus{Origin: o, First: r.first, Code: r.code, Oldest: r.oldest, Newest: r.newest}
		f.buf = st.Append(f.buf[:0])
		r.kind = replyNone
		return f.buf, r.to, true
	}
	b := f.batch
	b.Reset(wire.TypeMDReplay, o, r.next)
	for ; r.next <= r.last; r.next++ {
		s := f.slot(r.next)
		if b.Count() > 0 && !b.Fits(int(s.n)) {
			break
		}
		b.Add(s.b[:s.n])
		f.stats.Served++
	}
	if r.next > r.last {
		r.kind = replyNone
	}
	return b.Bytes(), r.to, true
}

func (f *Feed[A]) nextChunk(o wire.Origin) ([]byte, A, bool) {
	w := &f.snap
	for {
		to, c := w.waiters[w.waiter], w.chunk
		per := f.perChunk
		lv := f.levels[min(c*per, len(f.levels)):min((c+1)*per, len(f.levels))]
		f.wlevels = f.wlevels[:0]
		for _, l := range lv {
			f.wlevels = append(f.wlevels, wire.MDLevel{Instrument: l.Instrument, Side: uint8(l.Side), Price: l.Price, Qty: l.Qty})
		}
		s := wire.MDSnapshot{Origin: o, MDSeq: w.mdSeq, Instrument: w.instrument,
			Chunk: uint16(c), Chunks: uint16(w.chunks), Levels: f.wlevels}
		b, err := s.Append(f.buf[:0])
		if w.chunk++; w.chunk == w.chunks {
			f.stats.SnapshotsServed++
			w.chunk = 0
			if w.waiter++; w.waiter == len(w.waiters) {
				w.active, w.sending, w.waiters = false, false, w.waiters[:0]
			}
		}
		if err == nil {
			f.buf = b
			f.stats.SnapshotChunks++
			return b, to, true
		}
		// Never: perChunk levels fit a datagram and chunks <= 16384/perChunk.
		if !w.sending {
			return nil, to, false
		}
	}
}
