package standby

import "testing"

// TestHashCheckReset: a hash waiting from an old history is forgotten, so
// the new history's hash at the same seq is not compared with it.
func TestHashCheckReset(t *testing.T) {
	var h HashCheck
	h.Remote(1024, 7) // the deposed primary's hash
	h.Reset()
	if !h.Local(1024, 9) {
		t.Fatal("a hash from before the reset was compared")
	}
	if !h.Remote(1024, 9) || h.Stats().Matched != 1 {
		t.Fatalf("stats %+v", h.Stats())
	}
}
