package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
)

// Snapshot layout (little endian). It is canonical: replicas in the same
// state write the same bytes, and a restored engine re-snapshots to the
// bytes it was restored from.
//
//	magic "SQBENG02"
//	config: MaxInstruments u32, MaxOrders u32, MaxSessions u32, DedupWindow u32, MaxOrderQty u64
//	appliedSeq u64, nextOrderID u64, nextTradeID u64, mdSeq u64
//	orders u32, then per order, by instrument, bids then asks, best level
//	  first, oldest first: id u64, session u64, clOrdID u64, instrument u32,
//	  side u8, price i64, qty u64
//	sessions u32, then per session in table order: id u64, hi u64, outSeq u64,
//	  entries u32, then per entry in window order: clOrdID u64, len u8, result
//	stateHash u64
//
// Counts are checked against the config before anything is allocated, so
// a hostile snapshot cannot make Restore allocate beyond New's footprint.
var snapshotMagic = [8]byte{'S', 'Q', 'B', 'E', 'N', 'G', '0', '2'}

type snapWriter struct {
	w   *bufio.Writer
	tmp [8]byte
}

func (s *snapWriter) u8(v uint8) { _ = s.w.WriteByte(v) }
func (s *snapWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(s.tmp[:], v)
	_, _ = s.w.Write(s.tmp[:4])
}
func (s *snapWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(s.tmp[:], v)
	_, _ = s.w.Write(s.tmp[:8])
}

// Snapshot implements StateMachine. Write errors are returned from the
// final flush (bufio keeps the first one).
func (e *Engine) Snapshot(w io.Writer) error {
	s := snapWriter{w: bufio.NewWriter(w)}
	_, _ = s.w.Write(snapshotMagic[:])
	s.u32(e.cfg.MaxInstruments)
	s.u32(e.cfg.MaxOrders)
	s.u32(e.cfg.MaxSessions)
	s.u32(e.cfg.DedupWindow)
	s.u64(e.cfg.MaxOrderQty)
	s.u64(e.appliedSeq)
	s.u64(e.nextOrderID)
	s.u64(e.nextTradeID)
	s.u64(e.mdSeq)
	s.u32(uint32(e.resting))
	for i := range e.books {
		for side := 0; side < 2; side++ {
			for li := e.books[i].best[side]; li != nilIndex; li = e.levels[li].worse {
				for oi := e.levels[li].head; oi != nilIndex; oi = e.orders[oi].next {
					o := &e.orders[oi]
					s.u64(o.id)
					s.u64(o.session)
					s.u64(o.clOrdID)
					s.u32(o.instrument)
					s.u8(uint8(o.side))
					s.u64(uint64(o.price))
					s.u64(o.qty)
				}
			}
		}
	}
	s.u32(uint32(len(e.sessions)))
	w64 := int(e.cfg.DedupWindow)
	for slot := range e.sessions {
		ss := &e.sessions[slot]
		s.u64(ss.id)
		s.u64(ss.hi)
		s.u64(ss.outSeq)
		ents := e.entries[slot*w64 : (slot+1)*w64]
		n := 0
		for i := range ents {
			if ents[i].clOrdID != 0 {
				n++
			}
		}
		s.u32(uint32(n))
		for i := range ents {
			if en := &ents[i]; en.clOrdID != 0 {
				s.u64(en.clOrdID)
				s.u8(en.n)
				_, _ = s.w.Write(en.result[:en.n])
			}
		}
	}
	s.u64(e.StateHash())
	return s.w.Flush()
}

type snapReader struct {
	r   *bufio.Reader
	err error
	tmp [8]byte
}

func (s *snapReader) read(n int) []byte {
	if s.err != nil {
		return s.tmp[:n:n] // zeros are harmless: err is returned at the end
	}
	if _, err := io.ReadFull(s.r, s.tmp[:n]); err != nil {
		s.err = err
		clear(s.tmp[:])
	}
	return s.tmp[:n]
}
func (s *snapReader) u8() uint8   { return s.read(1)[0] }
func (s *snapReader) u32() uint32 { return binary.LittleEndian.Uint32(s.read(4)) }
func (s *snapReader) u64() uint64 { return binary.LittleEndian.Uint64(s.read(8)) }

// corrupt records a validation failure unless an earlier error stands.
func (s *snapReader) corrupt() {
	if s.err == nil {
		s.err = ErrSnapshotCorrupt
	}
}

// Restore implements StateMachine. It builds the state in a fresh engine,
// validates every invariant the engine relies on, recomputes the state
// hash and compares it with the recorded one, and only then replaces e's
// state. Errors: ErrConfigMismatch, ErrSnapshotCorrupt (also for a
// truncated snapshot), or the reader's own error.
func (e *Engine) Restore(r io.Reader) error {
	s := snapReader{r: bufio.NewReader(r)}
	var magic [8]byte
	if _, err := io.ReadFull(s.r, magic[:]); err != nil || magic != snapshotMagic {
		return snapErr(err)
	}
	cfg := Config{
		MaxInstruments: s.u32(), MaxOrders: s.u32(), MaxSessions: s.u32(),
		DedupWindow: s.u32(), MaxOrderQty: s.u64(),
	}
	if s.err != nil {
		return snapErr(s.err)
	}
	if cfg != e.cfg {
		return ErrConfigMismatch
	}
	t, err := New(cfg)
	if err != nil {
		return err
	}
	t.appliedSeq, t.nextOrderID, t.nextTradeID, t.mdSeq = s.u64(), s.u64(), s.u64(), s.u64()
	if t.nextOrderID == 0 || t.nextTradeID == 0 {
		s.corrupt()
	}
	t.restoreOrders(&s)
	t.restoreSessions(&s)
	want := s.u64()
	if s.err != nil {
		return snapErr(s.err)
	}
	if _, err := s.r.ReadByte(); err != io.EOF {
		return snapErr(err) // trailing bytes, or a read error
	}
	if t.recomputeHash() != t.sum() || t.StateHash() != want {
		return ErrSnapshotCorrupt
	}
	*e = *t
	return nil
}

// snapErr maps a truncation (or trailing data, err == nil) to
// ErrSnapshotCorrupt and passes other reader errors through.
func snapErr(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrSnapshotCorrupt
	}
	return err
}

func (e *Engine) restoreOrders(s *snapReader) {
	n := s.u32()
	if n > e.cfg.MaxOrders {
		s.corrupt()
		return
	}
	for i := uint32(0); i < n && s.err == nil; i++ {
		o := order{
			id: s.u64(), session: s.u64(), clOrdID: s.u64(), instrument: s.u32(),
			side: Side(s.u8()), price: int64(s.u64()), qty: s.u64(),
		}
		if o.id == 0 || o.id >= e.nextOrderID || o.session == 0 || o.clOrdID == 0 ||
			o.instrument >= e.cfg.MaxInstruments || !o.side.valid() ||
			o.qty == 0 || o.qty > e.cfg.MaxOrderQty {
			s.corrupt()
			return
		}
		if _, dup := e.orderIndex.get(o.id); dup {
			s.corrupt()
			return
		}
		b := &e.books[o.instrument]
		li := e.levelFor(b, o.side, o.price)
		// Time priority within a level is id order; keep it so.
		if tail := e.levels[li].tail; tail != nilIndex && e.orders[tail].id > o.id {
			s.corrupt()
			return
		}
		e.rest(b, &o)
	}
	for i := range e.books {
		bid, ask := e.books[i].best[0], e.books[i].best[1]
		if bid != nilIndex && ask != nilIndex && e.levels[bid].price >= e.levels[ask].price {
			s.corrupt() // a crossed book is never left by matching
			return
		}
	}
}

func (e *Engine) restoreSessions(s *snapReader) {
	n := s.u32()
	if n > e.cfg.MaxSessions {
		s.corrupt()
		return
	}
	w := uint64(e.cfg.DedupWindow)
	for i := uint32(0); i < n && s.err == nil; i++ {
		id, hi, outSeq, count := s.u64(), s.u64(), s.u64(), s.u32()
		// Every recorded result took one output seq of its session.
		if id == 0 || hi == 0 || count == 0 || uint64(count) > w || outSeq < uint64(count) {
			s.corrupt()
			return
		}
		if _, dup := e.sessionIndex.get(id); dup {
			s.corrupt()
			return
		}
		slot := int32(len(e.sessions))
		e.sessions = append(e.sessions, session{id: id, outSeq: outSeq})
		e.sessionIndex.put(id, slot)
		e.sessionChanged(slot)
		var maxID uint64
		for j := uint32(0); j < count && s.err == nil; j++ {
			clOrdID, size := s.u64(), s.u8()
			// Entries older than the window may remain (nothing clears a
			// slot until an id that maps to it arrives); they are never
			// matched, but they are state, so they are kept.
			if clOrdID == 0 || clOrdID > hi || size > maxResultLen {
				s.corrupt()
				return
			}
			var result [maxResultLen]byte
			for k := 0; k < int(size); k++ {
				result[k] = s.u8()
			}
			o, err := ParseOutput(result[:size])
			if err != nil || o.ClientOrderID != clOrdID || o.OutSeq == 0 || o.OutSeq > outSeq ||
				(o.Kind != KindAck && o.Kind != KindReject && o.Kind != KindCancelled) {
				s.corrupt()
				return
			}
			if e.entry(slot, clOrdID).clOrdID != 0 {
				s.corrupt()
				return
			}
			e.record(slot, clOrdID, result[:size])
			maxID = max(maxID, clOrdID)
		}
		if s.err == nil && maxID != hi {
			s.corrupt()
			return
		}
	}
}

// recomputeHash is the state hash sum computed from scratch; Restore and
// the tests compare it with the incremental one.
func (e *Engine) recomputeHash() uint64 {
	var sum uint64
	for i := range e.books {
		for side := 0; side < 2; side++ {
			for li := e.books[i].best[side]; li != nilIndex; li = e.levels[li].worse {
				for oi := e.levels[li].head; oi != nilIndex; oi = e.orders[oi].next {
					sum += orderHash(&e.orders[oi])
				}
			}
		}
	}
	w := int(e.cfg.DedupWindow)
	for slot := range e.sessions {
		ss := &e.sessions[slot]
		sum += sessionHash(ss)
		for i := slot * w; i < (slot+1)*w; i++ {
			if e.entries[i].clOrdID != 0 {
				sum += entryHash(ss.id, &e.entries[i])
			}
		}
	}
	return sum
}
