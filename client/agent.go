package client

import (
	"github.com/seqbus/seqbus/internal/pace"
)

// Poll mode's parked waits (see the package doc's thread budget).
//
// Load's generator waits for each send time in pace.Waiter's parked mode:
// one epoll_pwait2 on the client's socket (bus.Parker.ParkNs) until the
// spin margin before the send, woken at once by an answer. PollIO then
// reads the socket only when that park said it was readable, so no
// receive finds it empty: about one park per wait and one park and one
// receive per answer, instead of a receive and a sched_yield on every
// spin pass.

// parkedWaits sets wcfg up for parked waits on the client's socket and
// lowers the calling thread's timer slack (the park's timer then fires
// when due, not up to 50 µs late); restore puts the slack back. The
// caller holds its OS thread. Without a parker (a Conn that is not a UDP
// socket) it changes nothing.
func (c *Client) parkedWaits(wcfg *pace.WaiterConfig) (restore func()) {
	if c.parker == nil {
		return func() {}
	}
	wcfg.ParkNs = c.rx.ParkNs
	restoreSlack := pace.LowTimerSlack()
	return func() {
		restoreSlack()
		c.rx.Reset()
	}
}
