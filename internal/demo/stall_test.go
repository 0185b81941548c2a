package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/cluster"
)

// TestStallWatchdog: answers that do not move for demoStallMax stop the
// demo with an error and the state and log tail of every process; moving
// answers never do.
func TestStallWatchdog(t *testing.T) {
	dir := t.TempDir()
	local, err := cluster.NewLocal("/nonexistent/seqbus", dir, 2, 77)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node1.log"), []byte("one\ntwo\nlast line of node1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	d := &demo{Local: local, out: &out}
	if d.stalled(5) {
		t.Fatal("first look stalled")
	}
	d.lastMoved = time.Now().Add(-2 * demoStallMax)
	if d.stalled(6) {
		t.Fatal("answers moved, yet stalled")
	}
	if d.stall != nil || out.Len() != 0 {
		t.Fatalf("moving answers: stall %v, printed %q", d.stall, out.String())
	}
	d.lastMoved = time.Now().Add(-demoStallMax - time.Second)
	if !d.stalled(6) {
		t.Fatal("no answer for longer than demoStallMax, not stalled")
	}
	if d.stall == nil || !strings.Contains(d.stall.Error(), "the cluster stalled") {
		t.Fatalf("stall error %v", d.stall)
	}
	for _, want := range []string{">>> no answer for 20s: stopping", "witness: never started", "node1: never started", "    last line of node1", "node2: never started"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stall report lacks %q:\n%s", want, out.String())
		}
	}
}
