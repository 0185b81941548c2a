//go:build !linux

package bus

// Poller is Linux's epoll park for an agent; elsewhere NewPoller fails and
// the agent falls back to its bounded wait for endpoints without fds.
type Poller struct{}

// PollSocketsMax and PollWoken are as on Linux.
const (
	PollSocketsMax = 32
	PollWoken      = uint64(1) << 63
)

// NewPoller reports ErrUnsupported off Linux.
func NewPoller() (*Poller, error) { return nil, ErrUnsupported }

// Add is not supported off Linux.
func (p *Poller) Add(*UDP) error { return ErrUnsupported }

// Sockets is 0 off Linux.
func (p *Poller) Sockets() int { return 0 }

// Wake is not supported off Linux.
func (p *Poller) Wake() error { return ErrUnsupported }

// Wait is not supported off Linux.
func (p *Poller) Wait(int64) (uint64, error) { return 0, ErrUnsupported }

// Close does nothing off Linux.
func (p *Poller) Close() error { return nil }

// WaitNs is timeoutNs: Wait never blocks off Linux.
func (p *Poller) WaitNs(timeoutNs int64) int64 { return timeoutNs }
