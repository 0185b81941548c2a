//go:build unix

package dirlock

import (
	"os"
	"syscall"
)

var errWouldBlock error = syscall.EWOULDBLOCK

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}
