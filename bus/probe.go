package bus

import (
	"errors"
	"net/netip"
)

// Prober asks whether a process still listens at a peer's address. It
// sends a datagram there from a connected socket of its own, one per
// peer: a connected UDP socket hears its peer host's ICMP "port
// unreachable" (the socket's error becomes ECONNREFUSED), which an
// unconnected socket does not, and the node's own sockets must not, or
// the error would come back from the hot path's receive. A refusal means
// the peer's host is up and nothing listens at the port: its process is
// gone. A host that is down, or a firewall that drops ICMP, answers
// nothing, and the caller falls back to its timeout.
//
// One goroutine owns a Prober (the node's agent). Probe and Refused make
// one system call each per peer, and nothing is checked for a peer not
// probed in the last ProbeWaitNs.
type Prober struct {
	peers []probePeer
	buf   []uint32 // Refused's result, reused
	stats ProberStats
}

// ProbeWaitNs is how long after a probe Refused keeps looking for its
// refusal: far longer than any round trip an ICMP answer takes.
const ProbeWaitNs = 100_000_000

// ProberStats counts a Prober's work.
type ProberStats struct {
	// Sent: probes that left. SendErrors: probes the kernel refused to
	// send (other than a refusal; see Refused). Refused: refusals heard.
	// OtherErrors: other errors the peer's socket reported (a host or
	// network unreachable), which are not taken as a refusal.
	Sent, SendErrors, Refused, OtherErrors uint64
}

// errRefusedAtSend: a probe's send returned a refusal twice running, so
// nothing left (the refusal is kept for Refused).
var errRefusedAtSend = errors.New("bus: probe: the send returned a refusal twice")

// ErrProbeUnsupported: this platform has no Prober; the caller relies on
// its timeouts alone.
var ErrProbeUnsupported = errors.New("bus: probing a peer's port is not supported on this platform")

type probePeer struct {
	id      uint32
	to      netip.AddrPort
	fd      int
	sentNs  int64 // last probe
	refused bool  // a send reported the refusal of an earlier probe
}

// NewProber returns a Prober with no sockets yet: each peer's is opened
// at its first probe.
func NewProber() *Prober { return &Prober{} }

// Stats returns a copy of the counters.
func (p *Prober) Stats() ProberStats { return p.stats }

// Probe sends frame to peer id at to, at nowNs, from id's socket (opened,
// or reopened when to changed, first).
func (p *Prober) Probe(id uint32, to netip.AddrPort, frame []byte, nowNs int64) error {
	pr, err := p.peer(id, to)
	if err != nil {
		p.stats.SendErrors++
		return err
	}
	refused, err := probeSend(pr.fd, frame)
	if refused {
		// The send returned an earlier probe's refusal (the socket's
		// pending error) and sent nothing: keep the refusal for Refused
		// and send this probe once more, now the error is taken.
		pr.refused = true
		refused, err = probeSend(pr.fd, frame)
	}
	pr.sentNs = nowNs
	switch {
	case refused:
		pr.refused = true // refused again at once: nothing was sent
		p.stats.SendErrors++
		return errRefusedAtSend
	case err != nil:
		p.stats.SendErrors++
		return err
	default:
		p.stats.Sent++
	}
	return nil
}

// Refused returns the peers whose host refused a probe sent in the last
// ProbeWaitNs, each once however many of its probes were refused since
// the last call. The slice is valid until the next
// call.
func (p *Prober) Refused(nowNs int64) []uint32 {
	p.buf = p.buf[:0]
	for i := range p.peers {
		pr := &p.peers[i]
		if !pr.refused && nowNs-pr.sentNs > ProbeWaitNs {
			continue
		}
		refused, other := probeCheck(pr.fd)
		if other {
			p.stats.OtherErrors++
		}
		if refused || pr.refused {
			pr.refused = false
			p.stats.Refused++
			p.buf = append(p.buf, pr.id)
		}
	}
	return p.buf
}

// peer returns id's socket, opening it at to.
func (p *Prober) peer(id uint32, to netip.AddrPort) (*probePeer, error) {
	for i := range p.peers {
		pr := &p.peers[i]
		if pr.id != id {
			continue
		}
		if pr.to == to {
			return pr, nil
		}
		probeClose(pr.fd)
		p.peers = append(p.peers[:i], p.peers[i+1:]...)
		break
	}
	fd, err := probeOpen(to)
	if err != nil {
		return nil, err
	}
	p.peers = append(p.peers, probePeer{id: id, to: to, fd: fd, sentNs: -ProbeWaitNs - 1})
	return &p.peers[len(p.peers)-1], nil
}

// Close closes every peer's socket.
func (p *Prober) Close() error {
	for _, pr := range p.peers {
		probeClose(pr.fd)
	}
	p.peers = nil
	return nil
}
