package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the built binary's demo: it must exit 0 with nothing lost,
// show a promotion, and leave no child process behind.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for ~10 s")
	}
	bin := filepath.Join(t.TempDir(), "seqbus")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "5s", "--kill-after", "2s", "--rate", "3000")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"lost (acked but not in node", "): 0", "promoted in", "verdict: OK"} {
		if !strings.Contains(text, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, text)
		}
	}
	// No child survives: nothing runs our binary any more.
	time.Sleep(200 * time.Millisecond)
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if target, err := os.Readlink(p); err == nil && target == bin {
			t.Fatalf("a child survived the demo: %s", p)
		}
	}
}

// TestStatJSON: `seqbus stat --json` prints a node's status as JSON with
// its role, and the human view names the watermarks.
func TestStatJSON(t *testing.T) {
	dir := t.TempDir()
	status := `{"id":1,"role":"primary","epoch":3,"applied":10,"state_hash":18446744073709551615,"lease":{"held":true,"remaining_ns":500000000}}`
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "seqbus")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "stat", "--dir", dir, "--json").Output()
	if err != nil || !strings.Contains(string(out), `"role":"primary"`) {
		t.Fatalf("stat --json: %v %s", err, out)
	}
	out, err = exec.Command(bin, "stat", "--dir", dir, "--once").Output()
	if err != nil || !strings.Contains(string(out), "role primary") || !strings.Contains(string(out), "state hash ffffffffffffffff") {
		t.Fatalf("stat --once: %v %s", err, out)
	}
	if _, err := exec.Command(bin, "stat", "--dir", filepath.Join(dir, "missing")).Output(); err == nil {
		t.Fatal("stat of a missing node succeeded")
	}
}
