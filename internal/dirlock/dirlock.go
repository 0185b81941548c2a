// Package dirlock keeps a state directory to one process at a time: an
// exclusive, non-blocking flock(2) on a lock file inside it, held for the
// owner's life and dropped by the kernel when the process dies (a crash
// or SIGKILL leaves no stale lock behind). A second owner gets ErrLocked
// with the holder's pid, never a wait.
//
// The witness takes it on its state directory: two witnesses on one
// directory would grant the same epoch twice, and `seqbus witness
// override` must not rewrite a record a running witness keeps in memory.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLocked: another process (or another owner in this one) holds the
// directory.
var ErrLocked = errors.New("dirlock: directory in use")

// The lock files of the two roles that keep a directory: a node's
// journal directory and a witness's state directory.
const (
	NodeLockName    = "node.lock"
	WitnessLockName = "witness.lock"
)

// ErrOtherRole: the directory holds the other role's lock file (a witness
// pointed at a node's directory, or a node at a witness's): each would
// read and rewrite the other's files (status.json among them).
var ErrOtherRole = errors.New("dirlock: the directory is another role's")

// Lock is a held directory lock.
type Lock struct {
	f *os.File
}

// Acquire locks dir through dir/name (created, mode 0600) without
// waiting, and writes this process's pid into it for the next owner's
// error message. On a platform without flock it returns a Lock that
// holds nothing (documented where it is used).
func Acquire(dir, name string) (*Lock, error) {
	for _, other := range []string{NodeLockName, WitnessLockName} {
		if _, err := os.Stat(filepath.Join(dir, other)); other != name && err == nil {
			return nil, fmt.Errorf("%w: %s holds %s; give each node and the witness a directory of its own", ErrOtherRole, dir, other)
		}
	}
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: %s is held%s", ErrLocked, path, holder(path))
		}
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	// Best effort: the pid is a hint for a message, the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// holder is ", by pid N" from the lock file, or "" when unreadable.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" by pid %d", pid)
}

// Release drops the lock (closing its file); the file stays. Safe on nil
// and twice.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
