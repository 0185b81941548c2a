package bus

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// MultiSender is the optional ability to send datagrams to different
// addresses in one call: an agent's pass sends the outputs of several
// clients (and acks, NAKs) with one sendmmsg instead of one sendto each.
type MultiSender interface {
	// SendEach writes bufs[i] as one datagram to to[i], in order, looping
	// over partial batch writes until all are sent; it returns the first
	// error, and datagrams from the failing one on are not sent.
	// len(to) must equal len(bufs); to[i] may be rewritten to its
	// unmapped form.
	SendEach(bufs [][]byte, to []netip.AddrPort) error
}

var _ MultiSender = (*UDP)(nil)

// SendEach implements MultiSender: one sendmmsg per BatchSizeMax datagrams
// on Linux, each with its own address; it never allocates there.
func (u *UDP) SendEach(bufs [][]byte, to []netip.AddrPort) error {
	if len(bufs) != len(to) {
		u.counters.sendErrors.Add(1)
		return fmt.Errorf("%w: %d datagrams for %d addresses", ErrConfig, len(bufs), len(to))
	}
	if len(bufs) == 0 {
		return nil
	}
	if u.is4 {
		for i, a := range to {
			if !a.Addr().Unmap().Is4() {
				u.counters.sendErrors.Add(1)
				return fmt.Errorf("%w: IPv4 socket cannot send to %v", ErrConfig, a)
			}
			to[i] = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		}
	}
	u.sendMu.Lock()
	defer u.sendMu.Unlock()
	err := u.sys.sendEach(u, bufs, to)
	if err != nil {
		u.counters.sendErrors.Add(1)
		if errors.Is(err, net.ErrClosed) {
			return ErrClosed
		}
	}
	return err
}
