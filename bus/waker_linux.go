package bus

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waker puts a Worker's thread to sleep in the kernel on its sleep word
// and wakes it: a private futex, so the kernel wakes that very thread
// (no scheduler hand-off, no file descriptor to close).
type waker struct{}

// futex(2) operations (linux/futex.h; not in x/sys/unix).
const (
	futexWait        = 0
	futexWake        = 1
	futexPrivateFlag = 128
)

func (waker) init() {}

// wait returns once *word is no longer 1. It blocks in a system call
// that gives up the goroutine's P (other goroutines run meanwhile).
func (waker) wait(word *atomic.Uint32) {
	for word.Load() == 1 {
		// EAGAIN (the word moved first), EINTR and spurious wake-ups
		// all come back to the look at the word.
		_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)),
			futexWait|futexPrivateFlag, 1, 0, 0, 0)
	}
}

// wake wakes the thread waiting on word, after the caller moved it off 1.
// A raw call: it never blocks, so the caller (an agent) keeps its P.
func (waker) wake(word *atomic.Uint32) {
	_, _, _ = unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)),
		futexWake|futexPrivateFlag, 1, 0, 0, 0)
}
