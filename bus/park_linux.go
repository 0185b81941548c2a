package bus

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Parker parks the calling OS thread in epoll_wait on one socket until it
// is readable or a timeout passes: the last phase of a back-off idle
// strategy for a process that runs one receive loop on a locked thread.
// Unlike a park on the Go netpoller (Receive with a wait), the kernel wakes
// this very thread when a datagram arrives: one wake-up, not a netpoller
// thread waking the locked one. It has its own epoll instance
// (level-triggered), so it does not disturb the runtime's.
type Parker struct {
	epfd   int
	events [1]unix.EpollEvent
}

// NewParker returns a Parker for u's socket. Close it before u.
func NewParker(u *UDP) (*Parker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("bus: epoll_create1: %w", err)
	}
	var cerr error
	err = u.raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		cerr = unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("bus: epoll_ctl: %w", err)
	}
	return &Parker{epfd: epfd}, nil
}

// Park waits until the socket is readable or timeoutMs passes (≥ 1; the
// kernel's resolution is a millisecond or a tick) and reports whether it is
// readable. It blocks the thread in a system call and does not allocate.
func (p *Parker) Park(timeoutMs int) (bool, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd),
			uintptr(unsafe.Pointer(&p.events[0])), 1, uintptr(max(timeoutMs, 1)), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return false, fmt.Errorf("bus: epoll_wait: %w", syscall.Errno(errno))
		}
		return n > 0, nil
	}
}

// Close releases the epoll instance.
func (p *Parker) Close() error { return unix.Close(p.epfd) }
