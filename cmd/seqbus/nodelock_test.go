package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/internal/syncbuf"
)

// TestNodeRefusesLockedDir: a second `seqbus node` on the --dir of a
// running one is refused at start, naming the holder's pid, and the
// running node goes on; once it is killed the directory is free again.
func TestNodeRefusesLockedDir(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	group := fmt.Sprintf("239.77.%d.%d:%d", rand.IntN(250), 1+rand.IntN(250), freeUDPPort(t))
	node := func(listenPort uint16) *exec.Cmd {
		return exec.CommandContext(ctx, bin, "node", "--id", "1", "--dir", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", listenPort), "--group", group,
			"--peer", fmt.Sprintf("2=127.0.0.1:%d", freeUDPPort(t)))
	}
	first := node(freeUDPPort(t))
	var logs syncbuf.Buffer
	first.Stdout, first.Stderr = &logs, &logs
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { first.Wait(); close(exited) }()
	defer func() { first.Process.Kill(); <-exited }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "status.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first node never wrote its status\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := node(freeUDPPort(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another node uses "+dir) || !strings.Contains(string(out), fmt.Sprintf("by pid %d", first.Process.Pid)) {
		t.Fatalf("second node on the directory: %v\n%s", err, out)
	}
	select {
	case <-exited:
		t.Fatalf("the first node exited when the second was refused\n%s", logs.String())
	default:
	}
	first.Process.Kill()
	<-exited
	second := node(freeUDPPort(t))
	second.Stdout, second.Stderr = &logs, &logs
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { second.Process.Kill(); second.Wait() }()
	// Started: it writes status.json again (the killed node's is older).
	before, _ := os.Stat(filepath.Join(dir, "status.json"))
	for {
		if st, err := os.Stat(filepath.Join(dir, "status.json")); err == nil && st.ModTime().After(before.ModTime()) {
			break
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("a node on the freed directory did not run\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
