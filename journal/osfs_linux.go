//go:build linux

package journal

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// preallocate reserves the blocks with fallocate(2) mode 0, which also
// extends the size and never shrinks; file systems without fallocate
// fall back to a sparse extension.
func preallocate(f *os.File, sizeBytes int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, sizeBytes)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return extendTo(f, sizeBytes)
		default:
			return err
		}
	}
}
