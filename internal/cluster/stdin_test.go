package cluster

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStdinPipe: with Spec.Stdin a child that reads its stdin to EOF runs
// until CloseStdin; without it, stdin is /dev/null and it ends at once.
func TestStdinPipe(t *testing.T) {
	dir := t.TempDir()
	script := "cat >/dev/null; echo eof"
	held, err := Start(Spec{Name: "held", Bin: "/bin/sh", Args: []string{"-c", script}, Log: filepath.Join(dir, "held.log"), Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Kill()
	free, err := Start(Spec{Name: "free", Bin: "/bin/sh", Args: []string{"-c", script}, Log: filepath.Join(dir, "free.log")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := free.Wait(10 * time.Second); err != nil {
		t.Fatalf("without a stdin pipe: %v", err)
	}
	// The other child saw EOF long ago; this one must still be waiting.
	if held.Exited() {
		t.Fatalf("the child with a stdin pipe exited before CloseStdin: %q", held.Log())
	}
	held.CloseStdin()
	held.CloseStdin() // twice is fine
	if _, err := held.Wait(10 * time.Second); err != nil {
		t.Fatalf("after CloseStdin: %v", err)
	}
	if !strings.Contains(held.Log(), "eof") {
		t.Fatalf("log %q", held.Log())
	}
}

// TestProcsStartSpec: a child started from a whole Spec is supervised by
// name, with Bin and the log defaulted from the Procs.
func TestProcsStartSpec(t *testing.T) {
	p := &Procs{Bin: "/bin/sh", Dir: t.TempDir()}
	defer p.StopAll()
	if err := p.StartSpec(Spec{Name: "reader", Args: []string{"-c", "cat >/dev/null; echo done"}, Stdin: true}); err != nil {
		t.Fatal(err)
	}
	c := p.Get("reader")
	if c == nil || c.LogPath != filepath.Join(p.Dir, "reader.log") {
		t.Fatalf("child %+v", c)
	}
	c.CloseStdin()
	if _, err := p.Wait("reader", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Log(), "done") {
		t.Fatalf("log %q", c.Log())
	}
}
