package client

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/wire"
)

// mdFailover is a model of the market-data feed across a failover for
// MDRecovery: the old primary publishes 1..died and dies; the standby
// knew (from heartbeats) that 1..known were released, answers NotYet above
// that until it is promoted at promoteAt, then republishes known+1..last
// and serves everything. Multicast updates and unicast answers are lost
// at random.
type mdFailover struct {
	r                      *MDRecovery
	died, known, last      uint64
	promoteAt              int64
	mcastLoss, ucastLoss   int // percent
	got                    []uint64
	published, republished uint64 // next update each primary publishes
	pending                []wire.MDRequest
	pendingTo              []int
}

func (m *mdFailover) serve(t *rapid.T, now int64) {
	for i, req := range m.pending {
		server := m.pendingTo[i]
		var newest uint64
		switch {
		case server == 0 && m.published <= m.died: // the old primary, alive
			newest = m.published - 1
		case server == 1 && now < m.promoteAt:
			newest = m.known
		case server == 1:
			newest = m.republished - 1
		default:
			continue // dead: no answer
		}
		if rapid.IntRange(0, 99).Draw(t, "ucast") < m.ucastLoss {
			continue
		}
		if req.Kind != wire.MDRequestRange || req.First > newest {
			m.r.Status(wire.MDStatus{First: req.First, Code: wire.MDNotYet, Oldest: 1, Newest: newest}, now)
			continue
		}
		for s := req.First; s < req.First+uint64(req.Count) && s <= newest; s++ {
			m.r.Update(s, mdPayload(s), true, now)
		}
	}
	m.pending, m.pendingTo = m.pending[:0], m.pendingTo[:0]
}

func (m *mdFailover) multicast(t *rapid.T, seq uint64, now int64) {
	if rapid.IntRange(0, 99).Draw(t, "mcast") >= m.mcastLoss {
		m.r.Update(seq, mdPayload(seq), false, now)
	}
}

func runMDFailover(t *rapid.T, m *mdFailover) {
	m.r = NewMDRecovery(MDRecoveryConfig{
		Servers: 2, FromStart: true, RetryNs: 10, ProbeNs: 100, WaitNs: 1000, MaxRetries: 3,
		Send: func(server int, req wire.MDRequest) {
			m.pending = append(m.pending, req)
			m.pendingTo = append(m.pendingTo, server)
		},
		Deliver: func(seq uint64, _ []byte, _ bool) { m.got = append(m.got, seq) },
	})
	m.published, m.republished = 1, m.known+1
	for now := int64(1); now < m.promoteAt+int64(m.last)*2+5000; now++ {
		switch {
		case now%2 == 0 && m.published <= m.died:
			m.multicast(t, m.published, now)
			m.published++
		case now%2 == 0 && now >= m.promoteAt && m.republished <= m.last:
			m.multicast(t, m.republished, now)
			m.republished++
		}
		m.serve(t, now)
		m.r.Tick(now)
	}
	for i := 1; i < len(m.got); i++ {
		if m.got[i] <= m.got[i-1] {
			t.Fatalf("delivered %d after %d", m.got[i], m.got[i-1])
		}
	}
	tr := m.r.Tracker()
	if tr.Updates != uint64(len(m.got)) || tr.Conflicts != 0 {
		t.Fatalf("%+v, %d delivered", tr, len(m.got))
	}
	if len(m.got) > 0 && m.got[0] == 1 && tr.Updates+tr.Missing != m.got[len(m.got)-1] {
		t.Fatalf("%+v: delivered and given up do not add up to %d", tr, m.got[len(m.got)-1])
	}
}

func drawMDFailover(t *rapid.T) *mdFailover {
	died := rapid.Uint64Range(1, 300).Draw(t, "died")
	return &mdFailover{
		died:      died,
		known:     rapid.Uint64Range(0, died).Draw(t, "known"),
		last:      died + rapid.Uint64Range(0, 100).Draw(t, "more"),
		mcastLoss: rapid.IntRange(0, 30).Draw(t, "mcastLoss"),
	}
}

// TestMDRecoveryPropertyFailoverWithinWait: a failover shorter than
// WaitNs (counted from the start, so from before any gap) loses nothing:
// with every unicast answer arriving, the consumer delivers 1..last
// exactly once, in order, whatever the multicast lost.
func TestMDRecoveryPropertyFailoverWithinWait(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawMDFailover(t)
		m.promoteAt = int64(m.died)*2 + rapid.Int64Range(1, 900-int64(m.died)*2+300).Draw(t, "failover")
		m.promoteAt = min(m.promoteAt, 990)
		runMDFailover(t, m)
		if tr := m.r.Tracker(); tr.Gaps != 0 || uint64(len(m.got)) != m.last {
			t.Fatalf("%+v: delivered %d of %d", tr, len(m.got), m.last)
		}
	})
}

// TestMDRecoveryPropertyAnyFailover: any failover length and any unicast
// loss: what is delivered is in order, once each, and delivered plus
// given up is everything up to the last delivered.
func TestMDRecoveryPropertyAnyFailover(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawMDFailover(t)
		m.promoteAt = int64(m.died)*2 + rapid.Int64Range(1, 3000).Draw(t, "failover")
		m.ucastLoss = rapid.IntRange(0, 50).Draw(t, "ucastLoss")
		runMDFailover(t, m)
	})
}

// mdTimerState is what a Tick can change: the request in flight, the
// server it goes to, the retries, what was asked and delivered.
type mdTimerState struct {
	next                  uint64
	inflight, probe, snap bool
	server, retries       int
	reqSentNs             int64
	asked, got            int
}

func timerState(h *mdHarness) mdTimerState {
	r := h.r
	return mdTimerState{r.next, r.inflight, r.probe, r.snapshotting, r.server, r.retries, r.reqSentNs, len(h.asked), len(h.got)}
}

// TestMDRecoveryDeadlineProperty: a Tick before DeadlineNs (or with no
// deadline) changes nothing, so the consumer's agent may sleep until it;
// and a recovery with a request in flight or a quiet feed to probe
// always has one. Random feeds with gaps, answers and ticks.
func TestMDRecoveryDeadlineProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fromStart := rapid.Bool().Draw(rt, "fromStart")
		h := newMDHarness(t, fromStart)
		now, seq := int64(1), uint64(0)
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			now += rapid.Int64Range(0, 150).Draw(rt, "advance")
			switch rapid.IntRange(0, 3).Draw(rt, "event") {
			case 0: // updates, some skipped (a gap)
				seq += uint64(rapid.IntRange(1, 4).Draw(rt, "skip"))
				h.feed(now, seq)
			case 1: // an answer to the last request
				if len(h.asked) > 0 && seq > 0 {
					h.answer(now, 1, seq)
				}
			default: // a tick
				d, ok := h.r.DeadlineNs()
				before := timerState(h)
				h.r.Tick(now)
				if fromStart && before.next == 0 {
					before.next = 1 // the first Tick starts a late joiner at 1: no timer moves
				}
				if (!ok || now < d) && timerState(h) != before {
					rt.Fatalf("a Tick at %d before the deadline (%d, %v) changed %+v into %+v", now, d, ok, before, timerState(h))
				}
			}
			if _, ok := h.r.DeadlineNs(); !ok && (h.r.inflight || h.r.next > 0) {
				rt.Fatalf("no deadline with a request in flight (%v) or a feed to probe (next %d)", h.r.inflight, h.r.next)
			}
		}
	})
}
