package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestChaos runs the built binary's chaos run with three nodes and every
// fault: it must inject faults, see the cluster whole after each, exit 0
// with nothing lost, and leave no child process behind.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary for ~15 s")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "chaos", "--duration", "14s", "--rate", "1500", "--seed", "11")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("chaos: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"fault 1: ", "whole again", "lost (received but not in node", "): 0", "stale 0", "verdict: OK, nothing a client saw was lost through "} {
		if !strings.Contains(text, want) {
			t.Fatalf("chaos output lacks %q:\n%s", want, text)
		}
	}
	if m := regexp.MustCompile(`through (\d+) faults`).FindStringSubmatch(text); m == nil || m[1] == "0" {
		t.Fatalf("chaos injected no fault:\n%s", text)
	}
	noChildLeft(t, bin)
}
