package pace

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// SetThreadNice changes the calling thread only, reports the old value,
// and restoring it puts the thread back as it was.
func TestSetThreadNiceThisThreadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lowering a nice value needs root (CAP_SYS_NICE)")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	prev, err := SetThreadNice(-7)
	if err != nil {
		t.Fatal(err)
	}
	if prev != 20-before {
		t.Fatalf("previous nice %d, want %d", prev, 20-before)
	}
	if p, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid()); 20-p != -7 {
		t.Fatalf("thread nice %d after SetThreadNice(-7)", 20-p)
	}
	if p, _ := unix.Getpriority(unix.PRIO_PROCESS, os.Getpid()); os.Getpid() != unix.Gettid() && 20-p == -7 {
		t.Fatalf("the main thread's nice changed too")
	}
	if _, err := SetThreadNice(prev); err != nil {
		t.Fatal(err)
	}
	if p, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid()); p != before {
		t.Fatalf("not restored: %d, want %d", p, before)
	}
}
