package bench

import (
	"fmt"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/internal/pace"
)

// The floor's client paces exactly as client.Load in poll mode does (the
// lead compares the gated run with the floor as ratios, so both must use
// the same generator): pace.Waiter's parked mode, one epoll_pwait2 on the
// socket until SpinNs before each send, woken by a reply, and a receive
// only when the park said the socket was readable.

// startParking opens the client's park on its socket, switches its
// Waiter to parked waits and lowers the thread's timer slack; stop undoes
// it. Call it on the client's locked thread, before the run.
func (c *floorClient) startParking() (stop func(), err error) {
	p, err := bus.NewParker(c.u)
	if err != nil {
		return nil, fmt.Errorf("bench: floor client park: %w", err)
	}
	c.parker = p
	c.w = pace.NewWaiter(pace.WaiterConfig{Histogram: true, SpinNs: c.cfg.SpinNs, ParkNs: c.parkNs})
	restoreSlack := func() {}
	if prev, err := pace.SetThreadTimerSlack(pace.ThreadTimerSlackNs); err == nil {
		restoreSlack = func() { _, _ = pace.SetThreadTimerSlack(prev) }
	}
	return func() {
		restoreSlack()
		c.rxIdle = false
		_ = p.Close()
		c.parker = nil
	}, nil
}

// parkNs is the Waiter's ParkNs: a park that ends with the socket empty
// tells the poll right after it not to read.
func (c *floorClient) parkNs(timeoutNs int64) bool {
	ready, err := c.parker.ParkNs(timeoutNs)
	c.rxIdle = !ready && err == nil
	return ready
}

// readNow reports whether poll should read: always, except once right
// after a park that found the socket empty.
func (c *floorClient) readNow() bool {
	if c.rxIdle {
		c.rxIdle = false
		return false
	}
	return true
}
