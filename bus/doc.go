// Package bus is the datagram transport every seqbus role sends through:
// UDP multicast and unicast with batched, allocation-free I/O on Linux
// (recvmmsg/sendmmsg), spinning receive loops with Aeron-style idle
// strategies, socket tuning with a report of what the kernel granted,
// counters, and an in-memory network with a seeded fault router for tests
// and the simulator. It carries bytes only: frame parsing is the caller's,
// plugged in through Filter.
//
// The interfaces follow wireguard-go's conn.Bind: the caller owns the
// buffers, every call moves a batch, and optional abilities are separate
// small interfaces (Receiver, Sender, Conn, CounterReader).
//
// Usage contract:
//  1. Open endpoints with ListenUnicast, NewMulticastSender or
//     ListenMulticast (or MemNetwork.Listen in tests). A multicast endpoint
//     names its interface; "" means lo, and a missing or down interface is
//     refused with ErrNoInterface, never replaced by the default route.
//  2. Check Report() for what the kernel granted (buffer sizes, busy poll).
//  3. Receive with Receive(bufs, sizes, from, wait) directly, or with
//     StartLoop and an Idle strategy (DefaultIdle is block). Datagram i
//     is bufs[i][:sizes[i]]; the buffers are reused by the next call.
//  4. Send with Send(bufs, to); it returns once every datagram is with the
//     kernel, looping over short batch writes.
//  5. Read Counters() at any time from any goroutine.
//  6. Stop loops (Loop.Stop) before or after Close; Close makes a parked
//     Receive return ErrClosed.
//  7. Or run one agent over every endpoint with NewAgentRunner: a locked
//     thread calls Agent.DoWork pass after pass, reading what arrived
//     through Received.Next, and idles as its Idle says, parking in epoll
//     on all endpoints at once until an arrival, a Wake or the agent's
//     DeadlineNs. Stop the runner, then whatever calls Wake, then Close
//     the runner, then the endpoints.
//
// Example, a standby's receive path:
//
//	r, err := bus.ListenMulticast(bus.MulticastReceiverConfig{
//		Group:  netip.MustParseAddrPort("239.1.1.1:4000"),
//		Tuning: bus.Tuning{RecvBufferBytes: 8 << 20},
//		Filter: func(pkt []byte, from netip.AddrPort) bus.DropReason {
//			if _, err := wire.ParseHeader(pkt); err != nil {
//				return bus.DropBadHeader
//			}
//			return bus.Accept
//		},
//	})
//	if err != nil { ... }
//	loop, err := bus.StartLoop(r, bus.LoopConfig{Idle: bus.DefaultIdle},
//		func(bufs [][]byte, sizes []int, from []netip.AddrPort) {
//			for i := range sizes { window.Receive(bufs[i][:sizes[i]], nowNs()) }
//		})
//	...
//	loop.Stop(); r.Close()
//
// See docs/bus.md for the idle strategies, the measured default and why,
// the counters and the safety defaults.
package bus
