package client

import "testing"

func TestMDTracker(t *testing.T) {
	var tr MDTracker
	for _, s := range []uint64{5, 6, 7, 10, 11, 11, 9, 12} {
		tr.Observe(s)
	}
	if tr.Updates != 8 || tr.Gaps != 1 || tr.Missing != 2 || tr.Dups != 2 || tr.LastGapFrom != 8 || tr.LastGapTo != 9 {
		t.Fatalf("%+v", tr)
	}
}
