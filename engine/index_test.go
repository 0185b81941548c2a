package engine

import (
	"testing"

	"pgregory.net/rapid"
)

// TestIndexMatchesMap runs random put/del/get against a Go map, with keys
// drawn from a small range so that probe runs collide and backward-shift
// deletion is exercised.
func TestIndexMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 20).Draw(t, "limit")
		x := newIndex(limit)
		ref := map[uint64]int32{}
		keyGen := rapid.Uint64Range(1, 40)
		for i := 0; i < 200; i++ {
			k := keyGen.Draw(t, "key")
			_, present := ref[k]
			switch {
			case !present && len(ref) < limit && rapid.Bool().Draw(t, "put"):
				v := int32(i)
				x.put(k, v)
				ref[k] = v
			case present && rapid.Bool().Draw(t, "del"):
				x.del(k)
				delete(ref, k)
			}
			for k2 := uint64(1); k2 <= 40; k2++ {
				v, ok := x.get(k2)
				rv, rok := ref[k2]
				if ok != rok || (ok && v != rv) {
					t.Fatalf("key %d: index (%d,%v) map (%d,%v)", k2, v, ok, rv, rok)
				}
			}
			if x.live != len(ref) {
				t.Fatalf("live %d != %d", x.live, len(ref))
			}
		}
	})
}
