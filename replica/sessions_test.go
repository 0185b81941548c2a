package replica

import (
	"slices"
	"testing"
)

// TestSessionsAddrs: every address once, in session order, whatever the
// map's order; a moved session's new address only.
func TestSessionsAddrs(t *testing.T) {
	s := NewSessions[string](8)
	for _, c := range []struct {
		id   uint64
		addr string
	}{{9, "c"}, {2, "a"}, {5, "b"}, {7, "a"}, {3, "x"}, {3, "d"}} {
		if !s.Note(c.id, c.addr) {
			t.Fatalf("Note(%d) refused", c.id)
		}
	}
	for range 20 { // map order varies between calls
		if got, want := s.Addrs(nil, 8), []string{"a", "d", "b", "c"}; !slices.Equal(got, want) {
			t.Fatalf("Addrs = %v, want %v", got, want)
		}
	}
	if got, want := s.Addrs(nil, 2), []string{"a", "d"}; !slices.Equal(got, want) {
		t.Fatalf("Addrs at most 2 = %v, want %v (the lowest sessions')", got, want)
	}
	if got := NewSessions[string](1).Addrs([]string{"z"}, 8); !slices.Equal(got, []string{"z"}) {
		t.Fatalf("empty table: Addrs = %v, want the dst unchanged", got)
	}
}
