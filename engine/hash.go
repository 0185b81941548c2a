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
