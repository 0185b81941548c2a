package node

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
)

// sendCall is one call a recordingEndpoint saw.
type sendCall struct {
	socket string
	to     []netip.AddrPort
	types  []wire.Type
	seqs   []uint64 // each frame's header seq
}

// recordingEndpoint records every send call, in one log shared by the
// node's sockets so the order across sockets shows.
type recordingEndpoint struct {
	nopEndpoint
	name string
	log  *[]sendCall
}

func (e *recordingEndpoint) record(bufs [][]byte, to []netip.AddrPort) {
	c := sendCall{socket: e.name, to: append([]netip.AddrPort(nil), to...)}
	for _, b := range bufs {
		h, err := wire.ParseHeader(bytes.Clone(b))
		if err != nil {
			panic(err)
		}
		c.types = append(c.types, h.Type)
		c.seqs = append(c.seqs, h.Seq)
	}
	*e.log = append(*e.log, c)
}

func (e *recordingEndpoint) Send(bufs [][]byte, to netip.AddrPort) error {
	tos := make([]netip.AddrPort, len(bufs))
	for i := range tos {
		tos[i] = to
	}
	e.record(bufs, tos)
	return nil
}

type multiEndpoint struct{ recordingEndpoint }

func (e *multiEndpoint) SendEach(bufs [][]byte, to []netip.AddrPort) error {
	e.record(bufs, to)
	return nil
}

var _ bus.MultiSender = (*multiEndpoint)(nil)

type recordingNetwork struct {
	nopNetwork
	uc transport.Endpoint
	mc *recordingEndpoint
}

func (r recordingNetwork) Unicast(netip.AddrPort, bus.Filter) (transport.Endpoint, error) {
	return r.uc, nil
}
func (r recordingNetwork) MulticastSender(netip.AddrPort, string, int) (transport.Endpoint, error) {
	return r.mc, nil
}

func recordingPrimary(t *testing.T, multi bool) (*Node, *stepClock, *[]sendCall) {
	t.Helper()
	var log []sendCall
	var uc transport.Endpoint = &recordingEndpoint{name: "unicast", log: &log}
	if multi {
		uc = &multiEndpoint{recordingEndpoint{name: "unicast", log: &log}}
	}
	n, clk := drivenPrimaryOn(t, recordingNetwork{uc: uc, mc: &recordingEndpoint{name: "multicast", log: &log}})
	return n, clk, &log
}

// One pass that releases the outputs of three clients sends them with one
// call, each to its own address (one sendmmsg on a bus.UDP).
func TestPassSendsOutputsOfManyClientsInOneCall(t *testing.T) {
	n, clk, log := recordingPrimary(t, true)
	clients := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:7"), netip.MustParseAddrPort("10.0.0.10:7"), netip.MustParseAddrPort("10.0.0.11:7")}
	for i, addr := range clients {
		n.Deliver(commandFrame(uint64(7+i), 1, 100), addr)
	}
	clk.ns += int64(time.Millisecond)
	*log = (*log)[:0]
	ack := wire.Ack{Origin: wire.Origin{Stream: 9, Node: replayStandby, Epoch: 1}, Seq: 3}
	n.Deliver(ack.Append(nil), n.cfg.Peers[replayStandby])
	if r := n.Released(); r != 3 {
		t.Fatalf("released %d, want 3", r)
	}
	var outputs []sendCall
	for _, c := range *log {
		if c.socket == "unicast" {
			outputs = append(outputs, c)
		}
	}
	if len(outputs) != 1 || len(outputs[0].to) != 3 {
		t.Fatalf("outputs went out in %d calls (%+v), want one call of 3", len(outputs), outputs)
	}
	for i, addr := range clients {
		if outputs[0].to[i] != addr || outputs[0].types[i] != wire.TypeOutput {
			t.Fatalf("datagram %d: %v to %v, want an output to %v", i, outputs[0].types[i], outputs[0].to[i], addr)
		}
	}
}

// Queued unicast frames leave before a multicast frame of the same pass,
// and without SendEach a socket gets one Send per run of one address: the
// order of datagrams is what it was without the queue.
func TestPassKeepsTheOrderOfSends(t *testing.T) {
	n, _, log := recordingPrimary(t, false)
	n.mu.Lock()
	n.tr.Begin()
	a, b := netip.MustParseAddrPort("10.0.0.9:7"), netip.MustParseAddrPort("10.0.0.10:7")
	hb := wire.Heartbeat{Origin: n.origin(), HighestSeq: 0}
	frame := hb.Append(nil)
	n.tr.Send(frame, a)
	n.tr.Send(frame, a)
	n.tr.Send(frame, b)
	during := len(*log)
	n.tr.Multicast(frame)
	n.tr.Send(frame, b)
	n.tr.End()
	n.mu.Unlock()
	if during != 0 {
		t.Fatalf("sent before the pass ended: %+v", *log)
	}
	want := []struct {
		socket string
		count  int
		to     netip.AddrPort
	}{{"unicast", 2, a}, {"unicast", 1, b}, {"multicast", 1, n.cfg.Group}, {"unicast", 1, b}}
	if len(*log) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(*log), len(want), *log)
	}
	for i, w := range want {
		c := (*log)[i]
		if c.socket != w.socket || len(c.to) != w.count || c.to[0] != w.to {
			t.Fatalf("call %d: %s %v, want %s %d to %v", i, c.socket, c.to, w.socket, w.count, w.to)
		}
	}
}
