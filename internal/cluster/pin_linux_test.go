package cluster

import (
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestStartPinned: a child started on CPU 0 is confined to it from its
// first instruction, and the parent's thread gets its affinity back.
func TestStartPinned(t *testing.T) {
	var out bytes.Buffer
	cmd := exec.Command("/bin/cat", "/proc/self/status")
	cmd.Stdout = &out
	if err := startPinned(cmd, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Cpus_allowed_list:\t0\n") {
		t.Fatalf("child not pinned to CPU 0:\n%s", out.String())
	}
	out.Reset()
	cmd = exec.Command("/bin/cat", "/proc/self/status")
	cmd.Stdout = &out
	if err := startPinned(cmd, nil); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Cpus_allowed_list:\t0\n") && runtime.NumCPU() > 1 {
		t.Fatalf("an unpinned child inherited a pin:\n%s", out.String())
	}
}
