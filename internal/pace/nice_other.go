//go:build !linux

package pace

import "errors"

// SetThreadNice is Linux-only: elsewhere it changes nothing.
func SetThreadNice(nice int) (previous int, err error) {
	return 0, errors.New("pace: a per-thread nice value needs Linux")
}
