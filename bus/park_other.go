//go:build !linux

package bus

import "time"

// Parker is Linux's epoll park; elsewhere it only waits out the timeout
// (benchmark processes are Linux-only in practice).
type Parker struct{ u *UDP }

// NewParker returns a Parker for u's socket.
func NewParker(u *UDP) (*Parker, error) { return &Parker{u: u}, nil }

// Park sleeps for timeoutMs and reports false: callers poll after it.
func (p *Parker) Park(timeoutMs int) (bool, error) {
	time.Sleep(time.Duration(max(timeoutMs, 1)) * time.Millisecond)
	return false, nil
}

// ParkNs sleeps for timeoutNs and reports false: callers poll after it.
func (p *Parker) ParkNs(timeoutNs int64) (bool, error) {
	if timeoutNs > 0 {
		time.Sleep(time.Duration(timeoutNs))
	}
	return false, nil
}

// Close does nothing.
func (p *Parker) Close() error { return nil }
