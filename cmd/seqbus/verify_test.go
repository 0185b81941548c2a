package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runBin runs the built binary with a bound and returns its output and
// exit code.
func runBin(t *testing.T, bin string, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("seqbus %v: %v\n%s", args, err, out.String())
	return "", 0
}

var lostRe = regexp.MustCompile(`(?m)^lost (\d+)  duplicates (\d+)  conflicts (\d+)  hash mismatches (\d+)  stale (\d+)$`)

func verifyCounts(t *testing.T, text string) []int {
	t.Helper()
	m := lostRe.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no counts line in:\n%s", text)
	}
	out := make([]int, 5)
	for i := range out {
		out[i], _ = strconv.Atoi(m[i+1])
	}
	return out
}

// TestVerifyDemoRecord: seqbus verify on a kept demo's --record file and
// node directories finds nothing lost (exit 0), and every output the
// client received was checked byte for byte.
func TestVerifyDemoRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for ~10 s")
	}
	bin := buildBinary(t)
	rec := filepath.Join(t.TempDir(), "client.jsonl")
	text, code := runBin(t, bin, 90*time.Second, "demo", "--duration", "4s", "--kill-after", "2s", "--rate", "2000", "--keep", "--record", rec)
	dir := regexp.MustCompile(`files in (\S+)`).FindStringSubmatch(text)
	if dir == nil {
		t.Fatalf("no directory in the demo's output:\n%s", text)
	}
	defer os.RemoveAll(dir[1])
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, text)
	}
	noChildLeft(t, bin)
	out, code := runBin(t, bin, 60*time.Second, "verify", "--record", rec, filepath.Join(dir[1], "node1"), filepath.Join(dir[1], "node2"))
	c := verifyCounts(t, out)
	if code != 0 || c[0] != 0 || c[1]+c[2]+c[3]+c[4] != 0 {
		t.Fatalf("verify exit %d, counts %v: want 0 and all zero\n%s", code, c, out)
	}
	m := regexp.MustCompile(`received (\d+) outputs \(\d+ answers\): (\d+) found byte for byte`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || m[1] != m[2] {
		t.Fatalf("not every received output was checked byte for byte:\n%s", out)
	}
	if !strings.Contains(out, "state hashes compared with the primary") {
		t.Fatalf("no replica hashes compared:\n%s", out)
	}
}

// TestVerifyNoGatingDrill: on a run of the drill with gating switched off,
// seqbus verify reports outputs lost and exits 1.
func TestVerifyNoGatingDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for ~15 s")
	}
	bin := buildBinary(t)
	text, code := runBin(t, bin, 2*time.Minute, "drill", "--scenario", "no-gating", "--rate", "2000", "--keep")
	dir := regexp.MustCompile(`files kept in (\S+)`).FindStringSubmatch(text)
	if dir == nil {
		t.Fatalf("no directory in the drill's output:\n%s", text)
	}
	defer os.RemoveAll(dir[1])
	if code != 0 {
		t.Fatalf("drill exit %d:\n%s", code, text)
	}
	noChildLeft(t, bin)
	out, code := runBin(t, bin, 60*time.Second, "verify", "--record", filepath.Join(dir[1], "client.jsonl"), filepath.Join(dir[1], "node1"), filepath.Join(dir[1], "node2"))
	if c := verifyCounts(t, out); code != 1 || c[0] == 0 {
		t.Fatalf("verify exit %d, counts %v: want exit 1 and lost > 0\n%s", code, c, out)
	}
	if !strings.Contains(out, "lost: client.jsonl:") {
		t.Fatalf("no lost output named:\n%s", out)
	}
}
