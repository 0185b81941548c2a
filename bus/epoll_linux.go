package bus

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wakeTag is the eventfd's epoll_data.
const wakeTag = -1

// pollEventsMax is how many ready fds one Wait reports; an agent polls
// every socket after a wake anyway, so this only has to be non-zero.
const pollEventsMax = 8

// Poller parks one agent thread on all of its sockets and on a wake-up
// eventfd at once, with its own (level-triggered) epoll instance: the
// kernel wakes this very thread when a datagram arrives on any socket or
// another thread calls Wake, so a park never hides an arrival the way a
// timed sleep would, and nothing goes through the Go netpoller (one wake-up
// per arrival, not a netpoller thread waking the agent). The runtime's own
// epoll instance keeps the fds too; the two do not disturb each other.
//
// Wait is for the one agent thread; Wake is safe from any goroutine.
type Poller struct {
	epfd, efd int
	events    [pollEventsMax]unix.EpollEvent
	eventBuf  [8]byte
	// pwait2 is false once the kernel refused epoll_pwait2 (before 5.11):
	// timeouts then round up to milliseconds.
	pwait2 atomic.Bool
	closed atomic.Bool
	fds    int
	// holdP: short parks keep the Go runtime's P (see holdPWaitNsMax).
	holdP bool
}

// holdPWaitNsMax bounds the parks that keep the P. A thread blocked in
// an ordinary syscall gives its P up: sysmon retakes it after ~20 µs and
// hands it to another thread, which wakes (futex) only to find nothing to
// run and sleeps again (futex) — measured, 0.3–0.5 futex per command on a
// parked agent, two per park. A park made as a raw syscall keeps the P
// and costs no futex; the runtime still preempts it with a signal (which
// ends epoll_wait with EINTR) for a GC or after 10 ms. Other goroutines
// then share the remaining Ps, so it is done only where there is one
// (GOMAXPROCS ≥ 2) and only for parks bounded by a timer deadline of a
// few milliseconds; longer parks give the P up.
const holdPWaitNsMax = int64(5 * time.Millisecond)

// NewPoller makes an epoll instance with a non-blocking eventfd in it.
func NewPoller() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("bus: epoll_create1: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("bus: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeTag}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(efd)
		unix.Close(epfd)
		return nil, fmt.Errorf("bus: epoll_ctl eventfd: %w", err)
	}
	p := &Poller{epfd: epfd, efd: efd, holdP: runtime.GOMAXPROCS(0) >= 2}
	p.pwait2.Store(true)
	return p, nil
}

// PollSocketsMax is how many sockets one Poller takes (one bit each in
// Wait's result).
const PollSocketsMax = 32

// PollWoken is the bit of Wait's result that says Wake was called.
const PollWoken = uint64(1) << 63

// Add makes Wait return when u's socket is readable, and report it as bit
// i of its result, i being how many sockets were added before. Close the
// Poller before u, or at least do not Wait after u is closed.
func (p *Poller) Add(u *UDP) error {
	if p.fds >= PollSocketsMax {
		return fmt.Errorf("%w: more than %d sockets in one poller", ErrConfig, PollSocketsMax)
	}
	var cerr error
	err := u.raw.Control(func(fd uintptr) {
		// epoll_data carries the socket's index (Fd is only a name in
		// x/sys: the kernel hands the 64 bits back untouched).
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p.fds)}
		cerr = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bus: epoll_ctl: %w", err)
	}
	p.fds++
	return nil
}

// Sockets is how many sockets Add registered.
func (p *Poller) Sockets() int { return p.fds }

// Wake makes the current or the next Wait return at once (an eventfd
// write: one system call, no futex). Wakes before a Wait collapse into one.
func (p *Poller) Wake() error {
	if p.closed.Load() {
		return ErrClosed
	}
	one := [8]byte{1}
	for {
		_, _, errno := unix.Syscall(unix.SYS_WRITE, uintptr(p.efd), uintptr(unsafe.Pointer(&one[0])), 8)
		switch errno {
		case 0, unix.EAGAIN: // EAGAIN: the counter is saturated, a wake is pending anyway
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("bus: eventfd write: %w", errno)
	}
}

// Wait parks the calling thread until a socket is readable, Wake is
// called, or timeoutNs passes (0 polls; it must not be negative: every
// park is bounded). It returns which sockets are readable (bit i for the
// i-th added; 0 on a timeout) and PollWoken if a Wake came, which it
// consumes. The epoll instance is level-triggered: a socket still holding
// datagrams is reported again. It does not allocate.
func (p *Poller) Wait(timeoutNs int64) (uint64, error) {
	if timeoutNs < 0 {
		return 0, fmt.Errorf("%w: negative poll timeout %d", ErrConfig, timeoutNs)
	}
	for {
		n, errno := p.wait(timeoutNs)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, fmt.Errorf("bus: epoll_wait: %w", errno)
		}
		var ready uint64
		for i := 0; i < n; i++ {
			tag := p.events[i].Fd
			if tag == wakeTag {
				// Reset the counter; EAGAIN means another Wait took it.
				_, _, _ = unix.Syscall(unix.SYS_READ, uintptr(p.efd), uintptr(unsafe.Pointer(&p.eventBuf[0])), 8)
				ready |= PollWoken
				continue
			}
			if tag >= 0 && tag < PollSocketsMax {
				ready |= 1 << uint(tag)
			}
		}
		return ready, nil
	}
}

func (p *Poller) wait(timeoutNs int64) (int, syscall.Errno) {
	// A zero-timeout poll never blocks: no need to tell the runtime.
	syscall6 := unix.Syscall6
	if timeoutNs == 0 || (p.holdP && timeoutNs <= holdPWaitNsMax) {
		syscall6 = unix.RawSyscall6
	}
	events := uintptr(unsafe.Pointer(&p.events[0]))
	if p.pwait2.Load() {
		ts := unix.NsecToTimespec(timeoutNs)
		n, _, errno := syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.epfd), events, pollEventsMax,
			uintptr(unsafe.Pointer(&ts)), 0, 0)
		if errno != unix.ENOSYS {
			return int(n), errno
		}
		p.pwait2.Store(false)
	}
	ms := (timeoutNs + 999_999) / 1_000_000
	n, _, errno := syscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), events, pollEventsMax, uintptr(ms), 0, 0)
	return int(n), errno
}

// WaitNs is how long a Wait of timeoutNs may block: the timeout itself,
// or rounded up to a millisecond on a kernel without epoll_pwait2.
func (p *Poller) WaitNs(timeoutNs int64) int64 {
	if timeoutNs <= 0 || p.pwait2.Load() {
		return timeoutNs
	}
	return (timeoutNs + 999_999) / 1_000_000 * 1_000_000
}

// Close releases the epoll instance and the eventfd.
func (p *Poller) Close() error {
	if p.closed.Swap(true) {
		return ErrClosed
	}
	err := unix.Close(p.efd)
	if cerr := unix.Close(p.epfd); err == nil {
		err = cerr
	}
	return err
}
