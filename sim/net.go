package sim

import (
	"errors"
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// The simulated network. Every datagram becomes an event in the run's
// queue; nothing touches a socket. A node's endpoints only send (the
// simulator delivers with Node.Deliver), so Receive is never called.

// errNoReceive is what Receive returns: a driven node has no receive loop.
var errNoReceive = errors.New("sim: endpoints are driven by the simulator, not read")

// simNetwork places node host on the simulated network (transport.Network).
type simNetwork struct {
	s    *sim
	host int
}

var _ transport.Network = simNetwork{}

// Prober gives the node on host its probe socket (transport.Prober).
func (n simNetwork) Prober() transport.Prober {
	p := &simProber{s: n.s, host: n.host, local: netip.AddrPortFrom(n.s.hostAddr[n.host], probePort)}
	n.s.nodes[n.host].prober = p
	return p
}

// probePort is the port a host's probes leave from.
const probePort = 1

// simProber is a node's probe socket on the simulated network: its
// probes travel as any datagram (loss, partitions, delay), and one that
// reaches a host whose node is down (crashed or stopped: no process at
// the port) comes back refused after the link's delay. A paused node's
// port is still open: its probes are held, never refused.
type simProber struct {
	s       *sim
	host    int
	local   netip.AddrPort
	pending []uint32 // refusals heard, for the next Refused
	out     []uint32 // Refused's result
}

func (p *simProber) Probe(id uint32, to netip.AddrPort, frame []byte, _ int64) error {
	p.s.stats.Probes++
	p.s.sendProbe(p.host, p.local, to, frame, id)
	return nil
}

func (p *simProber) Refused(int64) []uint32 {
	p.out = append(p.out[:0], p.pending...)
	p.pending = p.pending[:0]
	return p.out
}

func (p *simProber) Close() error { return nil }

// sendProbe routes a probe like send, marked so that a delivery to a
// host with no node running answers it (refuse).
func (s *sim) sendProbe(from int, fromAddr, to netip.AddrPort, pkt []byte, id uint32) {
	s.probing = &event{probe: id, src: from, gen: s.nodes[from].gen}
	s.send(from, fromAddr, to, pkt)
	s.probing = nil
}

// refuse answers probe e at a host with no node running: "port
// unreachable" goes back to the sender after the link's delay, unless a
// partition cuts the way back.
func (s *sim) refuse(e event) {
	if e.probe == 0 || s.blocked[e.host][e.src] > 0 {
		return
	}
	s.push(event{at: s.now + s.params.baseDelayNs, kind: evRefused, host: e.src, probe: e.probe, gen: e.gen})
}

// refused gives a refusal to the prober of the node running on its host
// (none: it went down meanwhile, and its socket with it).
func (s *sim) refused(e event) {
	sn := s.nodes[e.host]
	if sn.n == nil || sn.prober == nil || sn.gen != e.gen {
		return // the prober's process is gone
	}
	s.stats.ProbesRefused++
	if s.trace != nil {
		s.logf("  %s: probe of node %d refused (port unreachable)", s.hostName[e.host], e.probe)
	}
	sn.prober.pending = append(sn.prober.pending, e.probe)
}

func (n simNetwork) Unicast(local netip.AddrPort, _ bus.Filter) (transport.Endpoint, error) {
	n.s.bind(local, n.host)
	return &endpoint{s: n.s, host: n.host, local: local}, nil
}

func (n simNetwork) MulticastReceiver(group netip.AddrPort, _ string, _ bus.Filter) (transport.Endpoint, error) {
	n.s.join(group, n.host)
	return &endpoint{s: n.s, host: n.host, local: netip.AddrPortFrom(n.s.hostAddr[n.host], group.Port())}, nil
}

func (n simNetwork) MulticastSender(group netip.AddrPort, _ string, _ int) (transport.Endpoint, error) {
	return &endpoint{s: n.s, host: n.host, local: netip.AddrPortFrom(n.s.hostAddr[n.host], group.Port())}, nil
}

// endpoint is one of a host's ports.
type endpoint struct {
	s     *sim
	host  int
	local netip.AddrPort
	c     bus.Counters
}

var _ transport.Endpoint = (*endpoint)(nil)

func (e *endpoint) Receive([][]byte, []int, []netip.AddrPort, time.Duration) (int, error) {
	return 0, errNoReceive
}

func (e *endpoint) Send(bufs [][]byte, to netip.AddrPort) error {
	for _, b := range bufs {
		if e.host <= e.s.numNodes {
			e.s.noteSent(e.host, b)
		}
		e.c.DatagramsSent++
		e.c.BytesSent += uint64(len(b))
		e.s.send(e.host, e.local, to, b)
	}
	return nil
}

func (e *endpoint) Close() error           { return nil }
func (e *endpoint) Counters() bus.Counters { return e.c }

// bind routes unicast datagrams for addr to host.
func (s *sim) bind(addr netip.AddrPort, host int) {
	for i := range s.routes {
		if s.routes[i].addr == addr {
			s.routes[i].host = host
			return
		}
	}
	s.routes = append(s.routes, route{addr, host})
}

// join adds host to a multicast group (once).
func (s *sim) join(group netip.AddrPort, host int) {
	for i := range s.groups {
		if s.groups[i].addr == group {
			for _, h := range s.groups[i].hosts {
				if h == host {
					return
				}
			}
			s.groups[i].hosts = append(s.groups[i].hosts, host)
			return
		}
	}
	s.groups = append(s.groups, group_{addr: group, hosts: []int{host}})
}

type route struct {
	addr netip.AddrPort
	host int
}

type group_ struct {
	addr  netip.AddrPort
	hosts []int
}

// send routes one datagram from host to `to`: unicast to the bound host,
// multicast to every member except the sender (a node drops its own
// looped-back frames anyway).
func (s *sim) send(from int, fromAddr, to netip.AddrPort, pkt []byte) {
	s.digest = digestPacket(s.digest, s.now, from, pkt)
	s.stats.Datagrams++
	s.stats.LargestDatagram = max(s.stats.LargestDatagram, uint64(len(pkt)))
	cp := append([]byte(nil), pkt...)
	if to == s.mdGroupAddr {
		s.chk.onPublishedMD(cp)
	}
	if from >= 1 && from <= s.numNodes {
		if h, err := wire.ParseHeader(cp); err == nil && h.Type == wire.TypeReplayEnd {
			s.chk.checkTooOld(from, cp)
		}
	}
	if to.Addr().IsMulticast() {
		for i := range s.groups {
			if s.groups[i].addr != to {
				continue
			}
			for _, h := range s.groups[i].hosts {
				if h != from {
					s.transmit(from, h, fromAddr, to, cp)
				}
			}
		}
		return
	}
	for _, r := range s.routes {
		if r.addr == to {
			s.transmit(from, r.host, fromAddr, to, cp)
			return
		}
	}
	s.stats.Unroutable++
}

// transmit applies the link's faults and queues the delivery.
func (s *sim) transmit(from, to int, fromAddr, toAddr netip.AddrPort, pkt []byte) {
	if s.blocked[from][to] > 0 {
		s.stats.Partitioned++
		if s.trace != nil {
			s.logf("  drop (partition) %s -> %s %s", s.hostName[from], s.hostName[to], describe(pkt))
		}
		return
	}
	copies := 1
	if !s.quiet {
		if s.rng.Uint64N(1_000_000) < s.params.lossPpm {
			s.stats.Lost++
			if s.trace != nil {
				s.logf("  drop (loss) %s -> %s %s", s.hostName[from], s.hostName[to], describe(pkt))
			}
			return
		}
		if s.rng.Uint64N(1_000_000) < s.params.dupPpm {
			s.stats.Duplicated++
			copies = 2
		}
	}
	for range copies {
		d := s.params.baseDelayNs
		if !s.quiet && s.params.jitterNs > 0 {
			d += int64(s.rng.Uint64N(uint64(s.params.jitterNs)))
		}
		if s.spike[from][to] > 0 {
			d += s.spikeNs
		}
		if s.trace != nil {
			s.logf("  %s -> %s %s (arrives +%s)", s.hostName[from], s.hostName[to], describe(pkt), fmtDur(d))
		}
		ev := event{at: s.now + d, kind: evDeliver, host: to, from: fromAddr, to: toAddr, pkt: pkt}
		if s.probing != nil {
			ev.probe, ev.src, ev.gen = s.probing.probe, s.probing.src, s.probing.gen
		}
		s.push(ev)
	}
}

// digestPacket folds one datagram into the run's digest. A lease frame's
// request ID (and so its checksum) is left out: node.New starts a
// keeper's IDs from the wall clock so that a restarted process's IDs are
// new, which the simulator cannot control; IDs are only ever compared for
// equality and order within one process, so they do not change the run.
func digestPacket(h uint64, now int64, from int, pkt []byte) uint64 {
	h = mix64(h ^ uint64(now))
	h = mix64(h ^ uint64(from))
	if hd, err := wire.ParseHeader(pkt); err == nil && hd.Type >= wire.TypeLeaseAcquire && hd.Type <= wire.TypeLeaseInfo && len(pkt) >= wire.HeaderLen+8 {
		pkt = pkt[wire.HeaderLen+8:]
		h = mix64(h ^ uint64(hd.Type) ^ uint64(hd.Node)<<8 ^ hd.Epoch<<40)
	}
	for _, b := range pkt {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}
