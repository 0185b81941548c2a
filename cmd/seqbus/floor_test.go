package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchFloor: `seqbus bench floor` runs its hops as bench-echo child
// processes of the binary for each idle strategy, writes a .hgrm per
// strategy, reports the generator's lateness, and leaves no child behind.
func TestBenchFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts processes")
	}
	bin := buildBinary(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, bin, "bench", "floor", "--hops", "4", "--count", "1000", "--rate", "5000",
		"--idles", "block,backoff", "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("bench floor: %v\n%s", err, b)
	}
	text := string(b)
	for _, want := range []string{"separate processes", "floor-4hop-block: intended->sent", "floor-4hop-backoff: intended->sent", "p99"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, f := range []string{"floor-4hop-block.hgrm", "floor-4hop-backoff.hgrm", "summary.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// The usage list does not show the hidden hop command.
	u, _ := exec.Command(bin).CombinedOutput()
	if strings.Contains(string(u), "bench-echo") {
		t.Errorf("usage lists bench-echo:\n%s", u)
	}
	noChildLeft(t, bin)
}
