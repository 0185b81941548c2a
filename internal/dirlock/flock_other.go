//go:build !unix

package dirlock

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("dirlock: would block")

// flock holds nothing where flock(2) does not exist.
func flock(*os.File) error { return nil }
