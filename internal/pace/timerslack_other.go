//go:build !linux

package pace

import "errors"

// ThreadTimerSlackNs: see the Linux file.
const ThreadTimerSlackNs = 1

// SetThreadTimerSlack is Linux-only: elsewhere it changes nothing.
func SetThreadTimerSlack(ns int) (previous int, err error) {
	return 0, errors.New("pace: a per-thread timer slack needs Linux")
}
