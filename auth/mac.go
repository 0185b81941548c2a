package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
)

// TagLen is the size of a MAC tag on the wire: HMAC-SHA256 truncated to its
// first 16 bytes (RFC 2104 section 5 allows truncation to the leftmost
// bits; NIST SP 800-107 allows it down to 32 bits and recommends at least
// 64). 128 bits leave a forger a 2^-128 chance per attempt, and every
// attempt is a datagram the receiver sees: there is no offline check. The
// other 16 bytes would cost wire space on every frame and buy nothing a
// network attacker can reach.
const TagLen = 16

// MAC is one pre-keyed HMAC-SHA256 state. hmac.New allocates (two SHA-256
// states and the padded key), so a MAC is built once per key and reset per
// message: Sign and Verify do not allocate.
//
// A MAC is not safe for concurrent use: it holds hash state. A process with
// a send loop and a receive loop gives each its own MAC (or Keyring).
type MAC struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// NewMAC returns a MAC keyed with k. It allocates; call it when a key comes
// into use, not per frame.
func NewMAC(k Key) *MAC {
	m := &MAC{h: hmac.New(sha256.New, k[:])}
	// The first Reset saves the keyed state (and allocates to do so); every
	// later Reset restores it without allocating. Doing it here keeps the
	// first Sign or Verify at zero allocations too.
	m.h.Reset()
	return m
}

// Sign appends the TagLen-byte tag of msg to dst and returns the extended
// slice. msg may alias dst (the usual case: the tag is appended right after
// the frame it covers). It does not allocate when dst has TagLen bytes of
// spare capacity.
func (m *MAC) Sign(dst, msg []byte) []byte {
	return append(dst, m.tag(msg)...)
}

// Verify reports whether tag is msg's tag: nil, or ErrBadMAC (also for a tag
// of the wrong length). The comparison takes constant time (hmac.Equal), so
// the time to reject does not tell a forger how many leading bytes were
// right.
func (m *MAC) Verify(msg, tag []byte) error {
	if len(tag) != TagLen {
		return ErrBadMAC
	}
	if !hmac.Equal(m.tag(msg), tag) {
		return ErrBadMAC
	}
	return nil
}

// tag computes the truncated tag into m.sum and returns it; the slice is
// valid until the next call.
func (m *MAC) tag(msg []byte) []byte {
	m.h.Reset()
	m.h.Write(msg)
	return m.h.Sum(m.sum[:0])[:TagLen]
}
