package engine

import "encoding/binary"

// The state hash is a multiset hash: the wrapping sum of one 64-bit hash per
// element of state (resting order, dedup session, dedup entry), updated
// incrementally (subtract the old element, add the new) on every change,
// then mixed with the counters and the config when StateHash is called.
// Because it depends only on the state and not on the path to it, Restore
// recomputes it from scratch and compares it with the snapshot's copy, and
// tests compare the incremental value with a recomputation after every
// command. It detects divergence; it is not a cryptographic hash and is not
// meant to resist deliberately forged collisions.

const (
	tagConfig  = 0x636f6e666967
	tagOrder   = 0x6f72646572
	tagSession = 0x73657373696f6e
	tagEntry   = 0x656e747279
	tagState   = 0x7374617465
)

// mix64 is the splitmix64 finaliser: a bijection with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// fold absorbs x into the running hash h.
func fold(h, x uint64) uint64 {
	return mix64((h ^ x) + 0x9e3779b97f4a7c15)
}

func orderHash(o *order) uint64 {
	h := fold(tagOrder, o.id)
	h = fold(h, o.session)
	h = fold(h, o.clOrdID)
	h = fold(h, uint64(o.instrument)<<8|uint64(o.side))
	h = fold(h, uint64(o.price))
	return fold(h, o.qty)
}

func sessionHash(s *session) uint64 {
	return fold(fold(fold(tagSession, s.id), s.hi), s.outSeq)
}

// entryHash reads the result as six words, which is exact only while
// maxResultLen is 47: this fails to compile otherwise.
var _ = [1]int{}[maxResultLen-47]

func entryHash(sessionID uint64, en *entry) uint64 {
	h := fold(tagEntry, sessionID)
	h = fold(h, en.clOrdID)
	h = fold(h, uint64(en.n))
	// The result is zero-padded, so whole words cover it.
	r := &en.result
	h = fold(h, binary.LittleEndian.Uint64(r[0:]))
	h = fold(h, binary.LittleEndian.Uint64(r[8:]))
	h = fold(h, binary.LittleEndian.Uint64(r[16:]))
	h = fold(h, binary.LittleEndian.Uint64(r[24:]))
	h = fold(h, binary.LittleEndian.Uint64(r[32:]))
	return fold(h, binary.LittleEndian.Uint64(r[39:])) // bytes 39..46, overlapping by one
}

// Pending element hashes. A dedup entry or session row that changes has
// its old hash taken out of Engine.hashSum at once, and its new one added
// later, when StateHash (or a full pending list) asks for the sum: a
// session changes two to four times a command (its highest id, its
// output seq, a fill's counterparty's output seq) and is hashed once per
// flush instead of twice per change, and the entry hashes of a flush are
// independent chains the CPU overlaps, where each command's own was a
// chain of nine dependent folds on the path of its Apply. The values do
// not change: the sum is over the same element hashes
// (TestStateHashGolden). Resting orders still hash at once.

// maxPending bounds the elements waiting to be hashed: a flush costs a
// command at most this many entry hashes (well under a microsecond),
// and the memory stays fixed.
const maxPending = 32

// pendingHashes lists the elements changed since the last flush. An
// entry is pending while its hash field is 0 (it may be listed twice, or
// truly hash to 0: either way adding a 0 is right); a session while its
// pending flag is set.
type pendingHashes struct {
	entries  []pendingEntry
	sessions []int32
}

type pendingEntry struct{ slot, i int32 }

func newPendingHashes() pendingHashes {
	return pendingHashes{entries: make([]pendingEntry, 0, maxPending), sessions: make([]int32, 0, maxPending)}
}

// entryChanged takes the hash of the dedup entry of (slot, clOrdID) out
// of the sum before the entry is rewritten.
func (e *Engine) entryChanged(slot int32, clOrdID uint64) {
	if len(e.pendings.entries) == maxPending {
		e.flushHashes()
	}
	i := int32(uint64(slot)*uint64(e.cfg.DedupWindow) + clOrdID&uint64(e.cfg.DedupWindow-1))
	en := &e.entries[i]
	e.hashSum -= en.hash
	en.hash = 0
	e.pendings.entries = append(e.pendings.entries, pendingEntry{slot: slot, i: i})
}

// sessionChanged takes the hash of the session row in slot out of the
// sum before the row changes (a new row's is 0).
func (e *Engine) sessionChanged(slot int32) {
	s := &e.sessions[slot]
	if s.pending {
		return
	}
	if len(e.pendings.sessions) == maxPending {
		e.flushHashes()
	}
	e.hashSum -= s.hash
	s.hash, s.pending = 0, true
	e.pendings.sessions = append(e.pendings.sessions, slot)
}

// flushHashes adds the hashes of the pending elements to the sum.
func (e *Engine) flushHashes() {
	for _, p := range e.pendings.entries {
		if en := &e.entries[p.i]; en.hash == 0 {
			en.hash = entryHash(e.sessions[p.slot].id, en)
			e.hashSum += en.hash
		}
	}
	e.pendings.entries = e.pendings.entries[:0]
	for _, slot := range e.pendings.sessions {
		s := &e.sessions[slot]
		s.hash, s.pending = sessionHash(s), false
		e.hashSum += s.hash
	}
	e.pendings.sessions = e.pendings.sessions[:0]
}

// sum is the sum of every element's hash, the pending ones added.
func (e *Engine) sum() uint64 {
	if len(e.pendings.entries)+len(e.pendings.sessions) > 0 {
		e.flushHashes()
	}
	return e.hashSum
}
