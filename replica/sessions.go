package replica

import "slices"

// Sessions is the bounded table of where each client session's outputs
// go: the address its last command came from. It is kept across terms
// (a client that reconnects to the same primary after a new term is
// still known), so the runtime owns it and hands it to each Leader. A is
// the address type (the runtime's netip.AddrPort; the core never looks
// inside it).
//
// The bound: at most Max sessions; a new session beyond it is refused
// (the command is not sequenced, and counted as SessionsFull), a known
// one is always admitted.
type Sessions[A comparable] struct {
	max  int
	addr map[uint64]A
	// last is the session Note or Addr found or recorded last, with its
	// address (lastOK: there is one). A COMMAND frame's commands are one
	// client's, and a command's outputs leave together, so most lookups
	// repeat the previous one: they cost a compare, not a map lookup
	// (three a command: 19-24 ns in BenchmarkSessions).
	lastID   uint64
	lastAddr A
	lastOK   bool
}

// NewSessions returns an empty table of at most max sessions.
func NewSessions[A comparable](max int) *Sessions[A] {
	return &Sessions[A]{max: max, addr: make(map[uint64]A)}
}

// Note records that session's command came from from; false: a new
// session and the table is full (nothing recorded). A known session that
// moved (the client reconnected) is updated.
func (s *Sessions[A]) Note(session uint64, from A) bool {
	if s.lastOK && session == s.lastID && from == s.lastAddr {
		return true
	}
	if cur, ok := s.addr[session]; ok {
		if cur != from {
			s.addr[session] = from
		}
		s.remember(session, from)
		return true
	}
	if len(s.addr) >= s.max {
		return false
	}
	s.addr[session] = from
	s.remember(session, from)
	return true
}

// Addr is where session's outputs go (false: never seen).
func (s *Sessions[A]) Addr(session uint64) (A, bool) {
	if s.lastOK && session == s.lastID {
		return s.lastAddr, true
	}
	a, ok := s.addr[session]
	if ok {
		s.remember(session, a)
	}
	return a, ok
}

func (s *Sessions[A]) remember(session uint64, a A) {
	s.lastID, s.lastAddr, s.lastOK = session, a, true
}

// Len is how many sessions the table holds.
func (s *Sessions[A]) Len() int { return len(s.addr) }

// Addrs appends to dst the address of every session, once each, in the
// order of the sessions' ids (the same order on every run, for the
// simulator), at most max of them (the lowest ids'), and returns it. It
// allocates: for the rare moments a primary tells its clients something
// (wire.NotLeading), never per command.
func (s *Sessions[A]) Addrs(dst []A, max int) []A {
	ids := make([]uint64, 0, len(s.addr))
	for id := range s.addr {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	seen := make(map[A]struct{}, len(ids))
	for _, id := range ids {
		if len(seen) == max {
			break
		}
		a := s.addr[id]
		if _, dup := seen[a]; !dup {
			seen[a] = struct{}{}
			dst = append(dst, a)
		}
	}
	return dst
}
