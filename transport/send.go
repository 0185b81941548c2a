package transport

import (
	"net/netip"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/wire"
)

// Per-pass send batching (issue 18, item 7), carried out by bus.TxQueue.
// Inside a pass (the agent's doWork, or the simulator's Deliver, Tick and
// SyncStep), the frames a node sends are queued: the unicast ones
// (outputs to clients, acks, NAKs, retransmits, lease requests) leave
// when the pass ends, so a pass that released the outputs of many
// commands sends them with one sendmmsg; the multicast ones (DATA,
// HEARTBEAT, HASH) leave when the node flushes (Flush, once the primary
// has sequenced what the pass received, ahead of the pass's journal write
// and releases, which the standby's ack and so every release waits for),
// in calls of at most FramesPerSend. The order of every datagram is what
// it was without the queue (the simulator sees the same sequence); only
// the syscalls are fewer.

// Begin starts queueing sends.
func (t *Transport) Begin() { t.txq.Begin() }

// End sends what the pass queued and stops queueing.
func (t *Transport) End() { t.c.SendErrors += uint64(t.txq.End()) }

// Flush sends the queued frames now; a failed call counts one SendErrors.
func (t *Transport) Flush() { t.c.SendErrors += uint64(t.txq.Flush()) }

// Discard drops the frames queued since the last send, unsent, and
// returns how many they were.
func (t *Transport) Discard() int { return t.txq.Discard() }

// Send sends one frame to addr on the unicast socket (at the end of the
// pass, during one).
func (t *Transport) Send(frame []byte, to netip.AddrPort) {
	sealed := t.seal(frame)
	queued, failed := t.txq.Queue(t.s.Unicast, sealed, to)
	t.c.SendErrors += uint64(failed)
	if !queued {
		t.sendNow(t.s.Unicast, sealed, to)
	}
}

// Multicast sends one frame to the replication group. During a pass it
// is queued behind what the pass queued before it, so the DATA frames a
// pass sealed leave together when the node flushes; a long pass sends
// each FramesPerSend at once. Outside a pass it leaves at once.
func (t *Transport) Multicast(frame []byte) {
	sealed := t.seal(frame)
	queued, failed := t.txq.QueueUpTo(t.s.MulticastSend, sealed, t.cfg.Group, FramesPerSend)
	t.c.SendErrors += uint64(failed)
	if !queued {
		t.Flush()
		t.sendNow(t.s.MulticastSend, sealed, t.cfg.Group)
	}
}

// SendMarketData sends one frame to the market-data group, at once.
func (t *Transport) SendMarketData(frame []byte) {
	t.sendNow(t.s.MarketDataSend, t.seal(frame), t.cfg.MarketData)
}

// Probe sends frame (sealed, like every frame) to peer id at to from the
// prober's socket for it, at once, so that a refusal of it comes back to
// Refused. Over a network that cannot probe it counts an error and sends
// nothing.
func (t *Transport) Probe(id uint32, to netip.AddrPort, frame []byte, nowNs int64) {
	if t.prober == nil && !t.noProbe {
		if p, ok := t.cfg.Network.(probing); ok {
			t.prober = p.Prober()
		} else {
			t.noProbe = true
		}
	}
	if t.prober == nil {
		t.c.ProbeErrors++
		return
	}
	if err := t.prober.Probe(id, to, t.seal(frame), nowNs); err != nil {
		t.c.ProbeErrors++
		return
	}
	t.c.ProbesSent++
}

// Refused returns the peers whose host refused a probe since the last
// call (Prober.Refused); valid until the next call.
func (t *Transport) Refused(nowNs int64) []uint32 {
	if t.prober == nil {
		return nil
	}
	ids := t.prober.Refused(nowNs)
	t.c.ProbesRefused += uint64(len(ids))
	return ids
}

func (t *Transport) sendNow(ep Endpoint, frame []byte, to netip.AddrPort) {
	t.sendBuf[0] = frame
	if err := ep.Send(t.sendBuf[:], to); err != nil {
		t.c.SendErrors++
	}
	t.sendBuf[0] = nil
}

// Frame authentication (Config.Key set): every frame sent is sealed with
// a MAC and every frame received must carry a good one, or it is dropped
// and counted before any core sees it. Which key signs what, the bounded
// derivation of a new epoch's key and the DATA replay window are
// auth.Frames'; the transport counts its verdicts.

// seal returns frame with FlagMAC and its tag (in t.sealBuf), or frame
// itself without a key.
func (t *Transport) seal(frame []byte) []byte {
	if t.auth == nil {
		return frame
	}
	t.sealBuf = t.auth.Seal(t.sealBuf[:0], frame)
	return t.sealBuf
}

// Verify checks a received frame's MAC against the keys up to the
// highest epoch the node has seen; false means drop (counted). Without a
// key every frame passes.
func (t *Transport) Verify(f *wire.Frame, highestEpoch uint64, now int64) bool {
	if t.auth == nil {
		return true
	}
	switch t.auth.Verify(f, highestEpoch, now) {
	case auth.Verified, auth.VerifiedNewEpoch:
		return true
	case auth.NoMAC:
		t.c.DropNoMAC++
	case auth.UnknownKey:
		t.c.DropUnknownKey++
	default:
		t.c.DropBadMAC++
	}
	return false
}

// Fresh advances the DATA replay window and reports whether the frame is
// new (false: a replay, counted). Call it after Verify and after the
// sender was found to be a configured node, so nothing from outside the
// cluster can move the window.
func (t *Transport) Fresh(f *wire.Frame) bool {
	if t.auth == nil || t.auth.Fresh(f) {
		return true
	}
	t.c.DropReplay++
	return false
}
