package bus

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReceiveStamp is the kernel's receive time (CLOCK_REALTIME) of the last
// datagram Receive returned (SIOCGSTAMPNS): when it reached the socket's
// queue, however late the reader took it. The first call turns the
// kernel's stamping on for this socket and reports false (nothing received
// since was stamped); a datagram received before the kernel's stamping
// took effect reads as the time of the call. For observers that judge
// when a sender sent (a test's tap), never the hot path: it costs an
// ioctl.
func (u *UDP) ReceiveStamp() (time.Time, bool) {
	var ts unix.Timespec
	var errno unix.Errno
	err := u.raw.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, unix.SIOCGSTAMPNS, uintptr(unsafe.Pointer(&ts)))
	})
	if err != nil || errno != 0 {
		return time.Time{}, false
	}
	return time.Unix(ts.Unix()), true
}
