package replica

import (
	"pgregory.net/rapid"

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

// TestSessionsModel: Note and Addr answer as a plain bounded map would,
// whatever the order of calls (the last-lookup cache never answers
// stale: a session that moved, a session refused while the table is
// full, an Addr of a session never noted).
func TestSessionsModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(1, 4).Draw(t, "max")
		s := NewSessions[string](max)
		model := map[uint64]string{}
		for i, n := 0, rapid.IntRange(1, 60).Draw(t, "n"); i < n; i++ {
			id := rapid.Uint64Range(1, 6).Draw(t, "id")
			if rapid.Bool().Draw(t, "note") {
				from := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "from")
				_, known := model[id]
				want := known || len(model) < max
				if want {
					model[id] = from
				}
				if got := s.Note(id, from); got != want {
					t.Fatalf("step %d: Note(%d, %s) = %v, want %v", i, id, from, got, want)
				}
			} else {
				want, wantOK := model[id]
				if got, ok := s.Addr(id); got != want || ok != wantOK {
					t.Fatalf("step %d: Addr(%d) = %q %v, want %q %v", i, id, got, ok, want, wantOK)
				}
			}
			if s.Len() != len(model) {
				t.Fatalf("step %d: Len %d, want %d", i, s.Len(), len(model))
			}
		}
	})
}
