package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/cluster"
	"github.com/seqbus/seqbus/internal/syncbuf"
)

// runBin runs the built binary with a bound and returns its output and
// exit code.
func runBinCombined(t *testing.T, bin string, timeout time.Duration, args ...string) (string, int) {
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

var lostRe = regexp.MustCompile(`(?m)^lost (\d+)  duplicates (\d+)  conflicts (\d+)  hash mismatches (\d+)  stale (\d+)(?: \(delivered \d+\))?$`)

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
	text, code := runBinCombined(t, bin, 90*time.Second, "demo", "--duration", "4s", "--kill-after", "2s", "--rate", "2000", "--keep", "--record", rec)
	dir := regexp.MustCompile(`files in (\S+)`).FindStringSubmatch(text)
	if dir == nil {
		t.Fatalf("no directory in the demo's output:\n%s", text)
	}
	defer os.RemoveAll(dir[1])
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, text)
	}
	noChildLeft(t, bin)
	out, code := runBinCombined(t, bin, 60*time.Second, "verify", "--record", rec, filepath.Join(dir[1], "node1"), filepath.Join(dir[1], "node2"))
	c := verifyCounts(t, out)
	if code != 0 || c[0] != 0 || c[1]+c[2]+c[3]+c[4] != 0 {
		t.Fatalf("verify exit %d, counts %v: want 0 and all zero\n%s", code, c, out)
	}
	// Every output is checked: byte for byte at its (epoch, seq), or, for
	// the resends after the failover that the new primary answered from
	// its dedup table without sequencing them, against the original
	// result in the history.
	m := regexp.MustCompile(`received (\d+) outputs \(\d+ answers\): (\d+) found byte for byte at their \(epoch, seq\) in the final primary's history, (\d+) duplicate answers from the dedup table`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || atoiT(t, m[1]) != atoiT(t, m[2])+atoiT(t, m[3]) {
		t.Fatalf("not every received output was checked:\n%s", out)
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
	text, code := runBinCombined(t, bin, 2*time.Minute, "drill", "--scenario", "no-gating", "--keep")
	dir := regexp.MustCompile(`files kept in (\S+)`).FindStringSubmatch(text)
	if dir == nil {
		t.Fatalf("no directory in the drill's output:\n%s", text)
	}
	defer os.RemoveAll(dir[1])
	if code != 0 {
		t.Fatalf("drill exit %d:\n%s", code, text)
	}
	noChildLeft(t, bin)
	out, code := runBinCombined(t, bin, 60*time.Second, "verify", "--record", filepath.Join(dir[1], "client.jsonl"), filepath.Join(dir[1], "node1"), filepath.Join(dir[1], "node2"))
	if c := verifyCounts(t, out); code != 1 || c[0] == 0 {
		t.Fatalf("verify exit %d, counts %v: want exit 1 and lost > 0\n%s", code, c, out)
	}
	if !strings.Contains(out, "lost: client.jsonl:") {
		t.Fatalf("no lost output named:\n%s", out)
	}
}

// TestVerifyUsage: no node directory, or an unreadable input, is exit 2
// (nothing checked), not the verdict's 1.
func TestVerifyUsage(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"verify"},
		{"verify", filepath.Join(dir, "missing")},
		{"verify", "--record", filepath.Join(dir, "missing.jsonl"), dir},
	} {
		if out, code := runBinCombined(t, bin, 30*time.Second, args...); code != 2 {
			t.Errorf("seqbus %v: exit %d, want 2\n%s", args, code, out)
		}
	}
	// A directory with no journal (a mistyped path) is refused, not taken
	// for an empty history that lost every output.
	rec := filepath.Join(dir, "client.jsonl")
	if err := os.WriteFile(rec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := runBinCombined(t, bin, 30*time.Second, "verify", "--record", rec, dir); code != 2 || !strings.Contains(out, "no journal: no segment or snapshot files") {
		t.Errorf("seqbus verify of a directory with no journal: exit %d, want 2 saying so\n%s", code, out)
	}
}

// TestClientRecordFlushedOnSIGTERM: `seqbus client --record` against a
// static primary, stopped by SIGTERM mid-load, leaves a whole record
// (every line parses, the last one ends) that seqbus verify finds in the
// node's journal.
func TestClientRecordFlushedOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node and a client for a few seconds")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	port, err := cluster.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	gport, err := cluster.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	addr := cluster.Loopback(port).String()
	nodeDir := filepath.Join(dir, "node1")
	var nodeOut syncbuf.Buffer
	nodeCmd := exec.Command(bin, "node", "--id", "1", "--dir", nodeDir, "--listen", addr, "--role", "primary",
		"--group", "239.77.201.9:"+strconv.Itoa(int(gport)), "--iface", "lo")
	nodeCmd.Stdout, nodeCmd.Stderr = &nodeOut, &nodeOut
	if err := nodeCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nodeCmd.Process.Kill(); _ = nodeCmd.Wait() }()
	rec := filepath.Join(dir, "client.jsonl")
	var clOut syncbuf.Buffer
	cl := exec.Command(bin, "client", "--primary", addr, "--rate", "2000", "--count", "1000000", "--record", rec)
	cl.Stdout, cl.Stderr = &clOut, &clOut
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Process.Kill() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(rec); bytes.Count(b, []byte("\n")) >= 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 1000 recorded outputs in 20 s\nclient:\n%s\nnode:\n%s", clOut.String(), nodeOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cl.Process.Signal(syscall.SIGTERM)
	waitExit(t, cl, 20*time.Second)
	if !strings.Contains(clOut.String(), "answered") {
		t.Fatalf("no summary table after SIGTERM:\n%s", clOut.String())
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("the record does not end with a whole line (%d bytes)", len(b))
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("line %d is not JSON: %q", i+1, line)
		}
	}
	_ = nodeCmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, nodeCmd, 20*time.Second)
	out, code := runBinCombined(t, bin, 60*time.Second, "verify", "--record", rec, nodeDir)
	if c := verifyCounts(t, out); code != 0 || c[0] != 0 {
		t.Fatalf("verify exit %d, counts %v\n%s", code, c, out)
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within %v of SIGTERM", cmd.Args[:2], timeout)
	}
}

func atoiT(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
