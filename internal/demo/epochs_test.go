package demo

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestEpochSummary: the demo's summary line counts epochs, promotions,
// new terms and step-downs from the nodes' status files.
func TestEpochSummary(t *testing.T) {
	dir := t.TempDir()
	for id, st := range map[int]string{
		1: `{"epoch":1,"node":{"Promotions":1}}`,
		2: `{"epoch":3,"node":{"Promotions":1,"NewTerms":1,"StepDowns":1}}`,
	} {
		nd := filepath.Join(dir, "node"+strconv.Itoa(id))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(nd, "status.json"), []byte(st), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	line, stepDowns := epochSummary(dir, []uint32{2, 1, 3})
	want := "epochs: highest 3, 2 promotions, 1 new terms of a leader's own; step-downs 1 (promotions/step-downs: node1 1/0, node2 1/1)"
	if line != want || stepDowns != 1 {
		t.Fatalf("summary %q (%d step-downs), want %q", line, stepDowns, want)
	}
}
