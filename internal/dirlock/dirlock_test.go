package dirlock

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondOwnerRefused: while one owner holds a directory a second is
// refused at once with ErrLocked and the holder's pid; after Release the
// next owner gets it.
func TestSecondOwnerRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "test.lock")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir, "test.lock")
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second owner: %v, want ErrLocked", err)
	}
	if want := "by pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name the holder (%s)", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	l2, err := Acquire(dir, "test.lock")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
	var nilLock *Lock
	if err := nilLock.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestMissingDir: a directory that does not exist is an error, not a
// lock.
func TestMissingDir(t *testing.T) {
	if _, err := Acquire(filepath.Join(t.TempDir(), "missing"), "x.lock"); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("missing dir: %v", err)
	}
}

// TestOtherProcessRefused: the lock holds against another process (a
// flock(1) of the same file), and a killed holder leaves no stale lock.
func TestOtherProcessRefused(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("flock(1) missing under CI: %v", err)
		}
		t.Skip("flock(1) (util-linux) not installed")
	}
	dir := t.TempDir()
	l, err := Acquire(dir, "p.lock")
	if err != nil {
		t.Fatal(err)
	}
	// flock -n exits 1 when the lock is held elsewhere.
	if err := exec.Command("flock", "-n", filepath.Join(dir, "p.lock"), "true").Run(); err == nil {
		t.Fatal("another process took the held lock")
	}
	l.Release()
	// A holder that dies: the kernel drops its lock. exec: the process
	// that holds the lock is the one killed (flock(1) running a command
	// would leave its child holding the descriptor). It waits for the lock
	// (no -n) and says when it has it, so nothing here races it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `exec 9>"$1"; flock 9 || exit 1; echo held; exec sleep 60`, "sh", filepath.Join(dir, "p.lock"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("flock(1) did not take the lock: %q, %v", line, err)
	}
	if _, err := Acquire(dir, "p.lock"); !errors.Is(err, ErrLocked) {
		t.Fatalf("Acquire beside another process's lock: %v, want ErrLocked", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l3, err := Acquire(dir, "p.lock")
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	l3.Release()
}
