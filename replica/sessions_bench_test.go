package replica

import (
	"net/netip"
	"testing"
)

// BenchmarkSessions is a primary's per-command use of the table with many
// clients: a COMMAND frame of 32 commands from one session (Note each),
// then each command's two outputs released to it (Addr each), the frames
// coming from 1,000 sessions in turn.
func BenchmarkSessions(b *testing.B) {
	const sessions, perFrame = 1000, 32
	s := NewSessions[netip.AddrPort](sessions)
	addrs := make([]netip.AddrPort, sessions)
	for i := range addrs {
		addrs[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, byte(i >> 8), byte(i)}), 7000)
		s.Note(uint64(i+1), addrs[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	ok := true
	for i := 0; i < b.N; i++ {
		frame := i / perFrame
		id := uint64(frame*7919%sessions + 1)
		ok = s.Note(id, addrs[id-1]) && ok
		for range 2 {
			_, found := s.Addr(id)
			ok = found && ok
		}
	}
	if !ok {
		b.Fatal("a session was not found")
	}
}
