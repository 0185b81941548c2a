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
	c.rx.P = p
	c.w = pace.NewWaiter(pace.WaiterConfig{Histogram: true, SpinNs: c.cfg.SpinNs, ParkNs: c.rx.ParkNs})
	restoreSlack := pace.LowTimerSlack()
	return func() {
		restoreSlack()
		c.rx.Reset()
		_ = p.Close()
		c.rx.P = nil
	}, nil
}
