package bus

import (
	"fmt"
	"runtime"
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
	gro    *UDP // with UDP_GRO on, a park returns at once while it holds datagrams (Buffered)
	epfd   int
	events [1]unix.EpollEvent
	// noPwait2 is set once the kernel refused epoll_pwait2 (before 5.11):
	// ParkNs then rounds its timeout up to milliseconds.
	noPwait2 bool
	// holdP: ParkNs's short parks keep the Go runtime's P (as Poller's).
	holdP bool
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
	p := &Parker{epfd: epfd, holdP: runtime.GOMAXPROCS(0) >= 2}
	if u.Report().GRO {
		p.gro = u
	}
	return p, nil
}

// Park waits until the socket is readable or timeoutMs passes (≥ 1; the
// kernel's resolution is a millisecond or a tick) and reports whether it is
// readable (at once, without a system call, while the socket holds
// datagrams read before: UDP.Buffered). It blocks the thread in a system
// call and does not allocate.
func (p *Parker) Park(timeoutMs int) (bool, error) {
	if p.gro != nil && p.gro.Buffered() {
		return true, nil // read already, not in the kernel's queue
	}
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

// ParkNs waits until the socket is readable or timeoutNs passes and
// reports whether it is readable: one epoll_pwait2 with a nanosecond
// timeout (epoll_wait with the timeout rounded up to a millisecond on a
// kernel without it). A timeout ≤ 0 polls without blocking. The wait ends
// early, reporting false, when a signal interrupts it (EINTR; the Go
// runtime preempts with one), so a caller recomputes its timeout from the
// clock and parks again rather than oversleeping. Parks of at most 5 ms
// keep the thread's P, as Poller's do (no futex hand-off per park). The
// kernel's timer slack still applies (50 µs by default for a thread;
// pace.SetThreadTimerSlack lowers it). Use it from one thread at a time;
// it does not allocate.
func (p *Parker) ParkNs(timeoutNs int64) (bool, error) {
	if p.gro != nil && p.gro.Buffered() {
		return true, nil // read already, not in the kernel's queue
	}
	timeoutNs = max(timeoutNs, 0)
	syscall6 := unix.Syscall6
	if timeoutNs == 0 || (p.holdP && timeoutNs <= holdPWaitNsMax) {
		syscall6 = unix.RawSyscall6
	}
	events := uintptr(unsafe.Pointer(&p.events[0]))
	var n uintptr
	var errno syscall.Errno
	if !p.noPwait2 {
		ts := unix.NsecToTimespec(timeoutNs)
		n, _, errno = syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.epfd), events, 1,
			uintptr(unsafe.Pointer(&ts)), 0, 0)
		if errno == unix.ENOSYS {
			p.noPwait2 = true
		}
	}
	if p.noPwait2 {
		ms := (timeoutNs + 999_999) / 1_000_000
		n, _, errno = syscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), events, 1, uintptr(ms), 0, 0)
	}
	switch errno {
	case 0:
		return n > 0, nil
	case unix.EINTR:
		return false, nil
	}
	return false, fmt.Errorf("bus: epoll_pwait2: %w", errno)
}

// Close releases the epoll instance.
func (p *Parker) Close() error { return unix.Close(p.epfd) }
