package engine

// session is one row of the dedup table: a session and the highest client
// order id it has had applied. Its DedupWindow entries live in
// Engine.entries at slot*DedupWindow, indexed by clOrdID mod DedupWindow:
// ids inside the window (hi-DedupWindow, hi] never share an entry, so a
// slot holding a different id means "not applied". A slot may hold an id
// that has fallen out of the window; it is never matched (the hi check
// answers first) and is overwritten by the next id that maps to the slot.
type session struct {
	id, hi uint64
}

// entry is the recorded result of one applied command: its exact payload,
// re-sent inside a Duplicate.
type entry struct {
	clOrdID uint64 // 0: empty
	hash    uint64 // entryHash as added to Engine.hashSum
	n       uint8
	result  [maxResultLen]byte // zero beyond n, so entryHash reads whole words
}

// lookupSession finds or creates the session's dedup row. It answers a
// duplicate or a too-old id itself and reports false when the command must
// not be applied.
func (e *Engine) lookupSession(sessionID, clOrdID uint64) (int32, bool) {
	slot, ok := e.sessionIndex.get(sessionID)
	if !ok {
		if len(e.sessions) == int(e.cfg.MaxSessions) {
			e.emit(sessionID, &Output{Kind: KindReject, ClientOrderID: clOrdID, Reason: ReasonTooManySessions})
			return nilIndex, false
		}
		slot = int32(len(e.sessions))
		e.sessions = append(e.sessions, session{id: sessionID})
		e.sessionIndex.put(sessionID, slot)
		e.hashSum += sessionHash(&e.sessions[slot])
		return slot, true
	}
	s := &e.sessions[slot]
	if clOrdID > s.hi {
		return slot, true
	}
	if s.hi-clOrdID >= uint64(e.cfg.DedupWindow) {
		e.emit(sessionID, &Output{Kind: KindReject, ClientOrderID: clOrdID, Reason: ReasonTooOld})
		return nilIndex, false
	}
	en := e.entry(slot, clOrdID)
	if en.clOrdID != clOrdID {
		return slot, true
	}
	if e.out != nil {
		e.buf[0] = byte(KindDuplicate)
		n := copy(e.buf[1:], en.result[:en.n])
		e.out.Emit(sessionID, e.buf[:1+n])
	}
	return nilIndex, false
}

func (e *Engine) entry(slot int32, clOrdID uint64) *entry {
	w := uint64(e.cfg.DedupWindow)
	return &e.entries[uint64(slot)*w+clOrdID&(w-1)]
}

// record stores the result payload of (session slot, clOrdID).
func (e *Engine) record(slot int32, clOrdID uint64, result []byte) {
	s := &e.sessions[slot]
	en := e.entry(slot, clOrdID)
	if en.clOrdID != 0 {
		e.hashSum -= en.hash
	}
	en.clOrdID = clOrdID
	en.n = uint8(copy(en.result[:], result))
	clear(en.result[en.n:])
	en.hash = entryHash(s.id, en)
	e.hashSum += en.hash
	if clOrdID > s.hi {
		e.hashSum -= sessionHash(s)
		s.hi = clOrdID
		e.hashSum += sessionHash(s)
	}
}
