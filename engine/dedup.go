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
	// outSeq is the output sequence number of the session's last output
	// (Output.OutSeq): its history is outputs 1..outSeq.
	outSeq uint64
	// hash is sessionHash as added to Engine.hashSum; while pending, the
	// row changed and its hash is not in the sum (hash.go).
	hash    uint64
	pending bool
}

// entry is the recorded result of one applied command: its exact payload,
// re-sent inside a Duplicate.
type entry struct {
	clOrdID uint64 // 0: empty
	hash    uint64 // entryHash as added to Engine.hashSum; 0 while pending (hash.go)
	n       uint8
	result  [maxResultLen]byte // zero beyond n, so entryHash reads whole words
}

// verdict is what the dedup table says about a (session, client order id)
// before the command is applied.
type verdict uint8

const (
	verdictApply           verdict = iota // not seen: apply it (slot is its row)
	verdictNewSession                     // unknown session with room: apply it in a new row
	verdictTooManySessions                // unknown session, table full: reject, not recorded
	verdictTooOld                         // below the window: reject, not recorded
	verdictDuplicate                      // applied before: answer with en's result
)

// classify reads the dedup table without changing it.
func (e *Engine) classify(sessionID, clOrdID uint64) (slot int32, v verdict, en *entry) {
	slot, ok := e.sessionIndex.get(sessionID)
	if !ok {
		if len(e.sessions) == int(e.cfg.MaxSessions) {
			return nilIndex, verdictTooManySessions, nil
		}
		return nilIndex, verdictNewSession, nil
	}
	s := &e.sessions[slot]
	if clOrdID > s.hi {
		return slot, verdictApply, nil
	}
	if s.hi-clOrdID >= uint64(e.cfg.DedupWindow) {
		return slot, verdictTooOld, nil
	}
	en = e.entry(slot, clOrdID)
	if en.clOrdID != clOrdID {
		return slot, verdictApply, nil
	}
	return slot, verdictDuplicate, en
}

// answerFromTable emits the answer of a command the dedup table answers
// by itself (a reject that is not recorded, or a Duplicate) and reports
// whether it did; it changes no state.
func (e *Engine) answerFromTable(sessionID, clOrdID uint64, v verdict, en *entry) bool {
	switch v {
	case verdictTooManySessions:
		e.emit(sessionID, &Output{Kind: KindReject, ClientOrderID: clOrdID, Reason: ReasonTooManySessions})
	case verdictTooOld:
		e.emit(sessionID, &Output{Kind: KindReject, ClientOrderID: clOrdID, Reason: ReasonTooOld})
	case verdictDuplicate:
		if e.out != nil {
			e.buf[0] = byte(KindDuplicate)
			n := copy(e.buf[1:], en.result[:en.n])
			e.out.Emit(sessionID, e.buf[:1+n])
		}
	default:
		return false
	}
	return true
}

// lookupSession finds or creates the session's dedup row. It answers a
// duplicate or a too-old id itself and reports false when the command must
// not be applied.
func (e *Engine) lookupSession(sessionID, clOrdID uint64) (int32, bool) {
	slot, v, en := e.classify(sessionID, clOrdID)
	if e.answerFromTable(sessionID, clOrdID, v, en) {
		return nilIndex, false
	}
	if v == verdictNewSession {
		slot = int32(len(e.sessions))
		e.sessions = append(e.sessions, session{id: sessionID})
		e.sessionIndex.put(sessionID, slot)
		e.sessionChanged(slot)
	}
	return slot, true
}

// Answer implements Deduper: a read-only look at the dedup table. It
// answers exactly what Apply would for a command that Apply would not
// record (so applying it would change nothing but AppliedSeq): a resend
// of an applied id (Duplicate with the original result), an id below the
// window (Reject TooOld), a new session when the table is full (Reject
// TooManySessions) and client order id 0 (Reject BadClientOrderID). A
// command without a valid header is not answered (Apply emits nothing for
// it either). It never allocates and must not be called from inside Apply.
func (e *Engine) Answer(command []byte, out Emitter) bool {
	var h CommandHeader
	if err := h.Parse(command); err != nil {
		return false
	}
	e.out = out
	answered := true
	if h.ClientOrderID == 0 {
		e.emit(h.Session, &Output{Kind: KindReject, Reason: ReasonBadClientOrderID})
	} else {
		_, v, en := e.classify(h.Session, h.ClientOrderID)
		answered = e.answerFromTable(h.Session, h.ClientOrderID, v, en)
	}
	e.out = nil
	return answered
}

func (e *Engine) entry(slot int32, clOrdID uint64) *entry {
	w := uint64(e.cfg.DedupWindow)
	return &e.entries[uint64(slot)*w+clOrdID&(w-1)]
}

// record stores the result payload of (session slot, clOrdID).
func (e *Engine) record(slot int32, clOrdID uint64, result []byte) {
	s := &e.sessions[slot]
	e.entryChanged(slot, clOrdID)
	en := e.entry(slot, clOrdID)
	en.clOrdID = clOrdID
	en.n = uint8(copy(en.result[:], result))
	clear(en.result[en.n:])
	if clOrdID > s.hi {
		e.sessionChanged(slot)
		s.hi = clOrdID
	}
}
