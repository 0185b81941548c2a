package replica

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

// The primary core's safety properties, checked after every input of a
// random (or fuzzed) sequence, against a model kept by the test:
//
//  1. release only <= applied and <= durable (durable before release);
//  2. release only <= every required standby's ack;
//  3. release only while the lease holds at the moment of release (the
//     keeper's MayLead at that nowNs, for the epoch led);
//  4. nothing is released after the journal failed;
//  5. a decision never steps down from an epoch of our own, and a new
//     term is always a newer epoch granted to us;
//  6. a standby proposed for addition to the in-sync set has acked
//     everything that may have been released: the term's released
//     watermark and the history the term inherited (an earlier primary
//     may have released all of it).
//
// Each input is one byte of the stream: the op in its low bits, an
// argument in the rest.

const propPeers = 3 // standbys 2..4; this node is 1

type propModel struct {
	t       testing.TB
	k       *arbiter.Keeper
	isr     InSync
	p       *Primary
	nowNs   int64
	epoch   uint64
	applied uint64
	durable uint64
	acks    map[uint32]uint64
	broken  bool
	granted uint64 // the newest epoch granted to us
	maxSeen uint64 // the highest epoch any reply named
	// lastRelease is the term's release watermark as last checked.
	lastRelease uint64
	// inherited is what the term began with applied.
	inherited uint64
}

func newPropModel(t testing.TB) *propModel {
	cfg := arbiter.DefaultConfig()
	k, err := arbiter.NewKeeper(1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.SetWantLead(true)
	return &propModel{t: t, k: k, acks: map[uint32]uint64{}}
}

// reply hands the keeper a grant or a refusal of its next request.
func (m *propModel) reply(grant bool, arg byte) {
	m.k.Hurry(m.nowNs)
	req, ok := m.k.Tick(m.nowNs)
	if !ok {
		return
	}
	var members []arbiter.NodeID
	for id := uint32(2); id < 2+propPeers; id++ {
		if arg&(1<<(id-2)) != 0 {
			members = append(members, arbiter.NodeID(id))
		}
	}
	set, _ := arbiter.MakeInSyncSet(members, 1)
	r := arbiter.Reply{RequestID: req.ID, InSyncVersion: m.isr.Version() + uint64(arg>>5&1), Members: set}
	epoch := max(m.maxSeen, m.epoch) + uint64(arg>>6&1)
	if epoch == 0 {
		epoch = 1
	}
	if grant {
		r.Kind, r.Epoch, r.DurationNs = arbiter.ReplyGrant, epoch, arbiter.DefaultLeaseDurationNs
	} else {
		holder := arbiter.NodeID(1 + arg>>3&3) // 1..4: sometimes ourselves
		r.Kind, r.Epoch, r.Holder, r.RemainingNs = arbiter.ReplyDeny, epoch, holder, arbiter.DefaultLeaseDurationNs
	}
	if !r.Deliver(m.k) {
		return
	}
	m.maxSeen = max(m.maxSeen, epoch)
	if grant {
		m.granted = max(m.granted, epoch)
	}
	if m.p != nil {
		m.p.ConfirmInSync(&r, m.nowNs)
	} else {
		m.isr.Confirm(&r)
	}
}

func (m *propModel) start(epoch uint64) {
	cfg := PrimaryConfig{Self: 1, Epoch: epoch, Peers: []uint32{2, 3, 4}, InSyncTimeoutNs: 200_000_000, RetryNs: 50_000_000,
		ProbeAfterNs: 2_000_000, ProbeSilentNs: 12_000_000}
	p, err := NewPrimary(cfg, &m.isr, m.k, m.applied, m.durable, m.nowNs)
	if err != nil {
		m.t.Fatal(err)
	}
	p.SetLease(m.k.MayLead(m.nowNs))
	if m.broken {
		p.JournalFailed()
	}
	m.p, m.epoch, m.lastRelease, m.inherited = p, epoch, 0, m.applied
}

func (m *propModel) step(b byte) {
	op, arg := b&7, b>>3
	switch op {
	case 0:
		m.reply(true, arg|b&0xe0)
	case 1:
		m.reply(false, arg|b&0xe0)
	case 2:
		m.applied += uint64(arg&3) + 1
		if m.p != nil {
			m.p.Applied(m.applied)
		}
	case 3:
		m.durable = max(m.durable, m.applied-min(m.applied, uint64(arg&3)))
		if m.p != nil {
			// The syncer's path: release at once, no lease decision first.
			m.p.Durable(m.durable)
			m.ready()
		}
		return
	case 4, 5:
		id := 2 + uint32(arg)%propPeers
		if op == 5 && arg&16 != 0 {
			// A probe's refusal: the standby's process is gone, or it
			// was, before an ack that already came back.
			if m.p != nil && m.p.Unreachable(id) {
				m.p.Tick(m.nowNs)
			}
			break
		}
		seq := max(m.acks[id], m.applied-min(m.applied, uint64(arg>>2&3)))
		m.acks[id] = seq
		if m.p != nil {
			m.p.Ack(id, m.epoch, seq, m.nowNs)
		}
	case 6:
		m.nowNs += int64(arg) * 10_000_000 // 0..310 ms
		if m.p != nil {
			m.p.Tick(m.nowNs)
		}
	case 7:
		if arg == 31 {
			m.broken = true
			if m.p != nil {
				m.p.JournalFailed()
			}
			break
		}
		m.nowNs += int64(arg) * 40_000_000 // paused: time passes, nothing runs
		return
	}
	m.carryOut()
}

// carryOut is the runtime between batches, with the checks.
func (m *propModel) carryOut() {
	if m.p == nil {
		if d := StandbyLease(m.k, m.epoch, m.nowNs); d.Do == Promote {
			if d.Epoch != m.k.Epoch() || d.Epoch <= m.epoch {
				m.t.Fatalf("promote to %d: keeper %d, followed %d", d.Epoch, m.k.Epoch(), m.epoch)
			}
			m.durable = m.applied // a promotion makes what it applied durable
			m.start(d.Epoch)
		}
		if m.p == nil {
			return
		}
	}
	switch d := m.p.LeaseChanged(m.nowNs); d.Do {
	case NewTerm:
		if d.Epoch <= m.epoch || d.Epoch > m.granted {
			m.t.Fatalf("new term %d from %d, granted %d", d.Epoch, m.epoch, m.granted)
		}
		m.start(d.Epoch)
	case StepDown:
		if holder, e, _ := m.k.LastDeny(); holder == 1 || e <= m.epoch || d.Epoch != e {
			m.t.Fatalf("step down from %d to %d: deny names holder %d epoch %d", m.epoch, d.Epoch, holder, e)
		}
		m.p = nil
		return
	}
	m.ready()
}

// ready takes the primary's Ready, checks it and Advances.
func (m *propModel) ready() {
	rd := m.p.Ready(m.nowNs)
	m.check(rd)
	if rd.Propose != nil {
		m.p.Proposed(rd.Propose, m.p.Epoch(), m.nowNs)
	}
	m.p.Advance(rd)
}

func (m *propModel) check(rd Ready) {
	g := m.p.Gate()
	// A probe goes only to a required member, once per Ready.
	for i, id := range rd.Probe {
		if !slices.Contains(g.InSync(nil), id) || slices.Contains(rd.Probe[:i], id) {
			m.t.Fatalf("probe %v: %d is not a member once (members %v)", rd.Probe, id, g.InSync(nil))
		}
	}
	// The gate's watermark never moves down; a standby required later (a
	// grant's set) may be behind what was released before it joined: only
	// a rise must be covered by every required ack, at the moment of it.
	if r := g.Released(); r > m.lastRelease {
		m.lastRelease = r
		for _, id := range g.InSync(nil) {
			if r > m.acks[id] {
				st, _ := g.Standby(id)
				m.t.Fatalf("released %d above required standby %d's ack %d (epoch %d, gate: %+v)", r, id, m.acks[id], m.epoch, st)
			}
		}
	}
	for _, id := range rd.Propose {
		if slices.Contains(m.isr.Members(), id) {
			continue
		}
		if need := max(m.inherited, g.Released()); m.acks[uint32(id)] < need {
			m.t.Fatalf("proposed adding standby %d with ack %d below %d (inherited %d, released %d, epoch %d)", id, m.acks[uint32(id)], need, m.inherited, g.Released(), m.epoch)
		}
	}
	if rd.Release == 0 {
		return
	}
	switch {
	case m.broken:
		m.t.Fatalf("released %d after the journal failed", rd.Release)
	case rd.Release > m.applied || rd.Release > m.durable || rd.Release > g.Released():
		m.t.Fatalf("released %d: applied %d durable %d gate %d", rd.Release, m.applied, m.durable, g.Released())
	case !m.k.MayLead(m.nowNs) || m.k.Epoch() != m.epoch:
		m.t.Fatalf("released %d without the lease of epoch %d at %d (keeper epoch %d)", rd.Release, m.epoch, m.nowNs, m.k.Epoch())
	}
}

func runProp(t testing.TB, ops []byte) {
	m := newPropModel(t)
	for _, b := range ops {
		m.step(b)
	}
}

func TestPrimaryProperties(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 17))
		ops := make([]byte, 200)
		for i := range ops {
			ops[i] = byte(r.Uint32())
		}
		runProp(t, ops)
	}
}

func FuzzPrimary(f *testing.F) {
	f.Add([]byte{0, 2, 3, 4, 5, 12, 6, 46})
	f.Add([]byte{0x40, 2, 2, 3, 4, 12, 20, 0xfe, 1, 0x49, 2, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4096 {
			return
		}
		runProp(t, ops)
	})
}
