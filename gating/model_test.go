package gating

import (
	"errors"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// This file drives a Gate and a Publisher with random operations and checks
// them against a model written independently of the core: plain maps and
// slices.SortFunc instead of the fixed table and insertion sort. The same
// harness runs under rapid (TestGatePublisherProperties) and the fuzzer
// (FuzzGate).

// chooser picks a number in [0, n).
type chooser interface {
	intn(n int) int
}

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(n int) int { return rapid.IntRange(0, n-1).Draw(c.t, "n") }

// byteChooser reads choices from fuzz input; once it runs out it answers 0
// and reports exhausted, which ends the run.
type byteChooser struct {
	data      []byte
	exhausted bool
}

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 {
		c.exhausted = true
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

// modelItem is the Publisher's T in the harness: it names itself so the
// model can check order and exactly-once.
type modelItem struct {
	seq uint64
	tag int
	// early is true when the output was enqueued with a seq above the
	// released watermark of that moment, as the usage contract asks; such an
	// output must never be handed out above the instantaneous bound.
	early bool
}

// maxModelStandbyID keeps the ids below maxTrackedStandbys so the model need
// not mirror the eviction policy (TestStandbyTableEviction covers it).
const maxModelStandbyID = 10

type harness struct {
	fatalf func(format string, args ...any)
	g      *Gate
	p      *Publisher[modelItem]

	// The model.
	cfg      Config
	applied  uint64
	durable  uint64
	held     bool
	version  uint64
	members  []uint32
	acks     map[uint32]uint64
	lastNs   map[uint32]int64
	progress map[uint32]int64 // when each standby's ack last progressed
	released uint64
	nowNs    int64
	queue    []modelItem
	capacity int
	lastEnq  uint64
	nextTag  int
	emitted  int
}

func newHarness(c chooser, fatalf func(string, ...any)) *harness {
	h := &harness{
		fatalf:   fatalf,
		cfg:      Config{RequiredAcks: c.intn(5), MinInSync: c.intn(4)},
		capacity: 1 + c.intn(16),
		acks:     map[uint32]uint64{},
		lastNs:   map[uint32]int64{},
		progress: map[uint32]int64{},
	}
	var err error
	if h.g, err = NewGate(h.cfg); err != nil {
		fatalf("NewGate(%+v): %v", h.cfg, err)
	}
	if h.p, err = NewPublisher[modelItem](h.capacity); err != nil {
		fatalf("NewPublisher(%d): %v", h.capacity, err)
	}
	if c.intn(2) == 0 { // start as a primary with the lease, as most runs do
		h.held = true
		h.g.SetLease(true)
	}
	if c.intn(2) == 0 { // start with a valid in-sync set of 1..3 standbys
		h.version = 1
		h.members = []uint32{1, 2, 3}[:1+c.intn(3)]
		if err := h.g.SetInSync(h.version, h.members, h.nowNs); err != nil {
			fatalf("SetInSync(1, %v): %v", h.members, err)
		}
		for _, id := range h.members {
			h.seen(id)
		}
	}
	return h
}

// bound is the instantaneous min(applied, required ack, durable); ok is false
// while the in-sync set is below MinInSync.
func (h *harness) bound() (uint64, bool) {
	n := len(h.members)
	if n < h.cfg.MinInSync {
		return 0, false
	}
	required := uint64(math.MaxUint64)
	if n > 0 {
		k := h.cfg.RequiredAcks
		if k == 0 || k > n {
			k = n
		}
		acks := make([]uint64, 0, n)
		for _, id := range h.members {
			acks = append(acks, h.acks[id])
		}
		slices.SortFunc(acks, func(a, b uint64) int { // descending
			switch {
			case a > b:
				return -1
			case a < b:
				return 1
			}
			return 0
		})
		required = acks[k-1]
	}
	return min(h.applied, required, h.durable), true
}

func (h *harness) advance() {
	if b, ok := h.bound(); h.held && ok && b > h.released {
		h.released = b
	}
}

func (h *harness) isMember(id uint32) bool { return slices.Contains(h.members, id) }

func (h *harness) seen(id uint32) {
	if _, ok := h.lastNs[id]; !ok {
		h.lastNs[id] = h.nowNs
		h.progress[id] = h.nowNs
		h.acks[id] = 0
	}
}

func (h *harness) enqueue(seq uint64) {
	it := modelItem{seq: seq, tag: h.nextTag, early: seq > h.released}
	h.nextTag++
	var want error
	switch {
	case seq == 0:
		want = ErrZeroSeq
	case seq < h.lastEnq:
		want = ErrOutOfOrder
	case len(h.queue) == h.capacity:
		want = ErrFull
	}
	before := h.p.Len()
	err := h.p.Enqueue(seq, it)
	if !errors.Is(err, want) || (err == nil) != (want == nil) {
		h.fatalf("Enqueue(%d) = %v, want %v", seq, err, want)
	}
	if want != nil {
		if h.p.Len() != before {
			h.fatalf("Enqueue(%d) failed with %v but Len changed %d -> %d", seq, err, before, h.p.Len())
		}
		return
	}
	h.queue = append(h.queue, it)
	h.lastEnq = seq
}

// step performs one random operation on core and model, then publishes and
// checks every invariant.
func (h *harness) step(c chooser) {
	h.nowNs += int64(c.intn(1000))
	switch c.intn(9) {
	case 0, 1: // apply 1..3 commands, each with 0..2 outputs enqueued first
		for range 1 + c.intn(3) {
			seq := h.applied + 1
			for range c.intn(3) {
				h.enqueue(seq)
			}
			h.g.SetApplied(seq)
			h.applied = seq
			h.advance()
		}
	case 2: // applied, possibly regressing
		seq := uint64(c.intn(int(h.applied) + 2))
		h.g.SetApplied(seq)
		h.applied = max(h.applied, seq)
		h.advance()
	case 3: // durable, possibly regressing or ahead of applied
		seq := h.applied // the usual case: the journal caught up
		if c.intn(2) == 0 {
			seq = uint64(c.intn(int(h.applied) + 4))
		}
		h.g.SetDurable(seq)
		h.durable = max(h.durable, seq)
		h.advance()
	case 4, 5: // an ack, possibly old, possibly from a non-member
		id := uint32(1 + c.intn(maxModelStandbyID))
		if len(h.members) > 0 && c.intn(3) != 0 {
			id = h.members[c.intn(len(h.members))]
		}
		seq := h.applied // the usual case: the standby caught up
		if c.intn(2) == 0 {
			seq = uint64(c.intn(int(h.applied) + 3))
		}
		h.g.OnAck(id, seq, h.nowNs)
		h.seen(id)
		if seq >= h.acks[id] {
			if seq > h.acks[id] || seq >= h.applied {
				h.progress[id] = max(h.progress[id], h.nowNs)
			}
			h.acks[id] = seq
			h.lastNs[id] = max(h.lastNs[id], h.nowNs)
			if h.isMember(id) {
				h.advance()
			}
		}
	case 6: // lease change, dropping the queue on loss (usually)
		h.held = c.intn(3) != 0
		h.g.SetLease(h.held)
		h.advance()
		if !h.held && c.intn(4) != 0 {
			if n := h.p.DropAll(); n != len(h.queue) {
				h.fatalf("DropAll = %d, want %d", n, len(h.queue))
			}
			h.queue = h.queue[:0]
		}
	case 7: // membership change, sometimes invalid
		h.setInSync(c)
	case 8: // an enqueue outside apply order, possibly at or below released
		seq := h.lastEnq + uint64(c.intn(4))
		if c.intn(4) == 0 && seq > 0 {
			seq-- // below the last enqueued seq once in a while
		}
		h.enqueue(seq)
	}
	h.publishAndCheck(c)
}

func (h *harness) setInSync(c chooser) {
	version := h.version + 1
	if c.intn(6) == 0 {
		version = uint64(c.intn(int(h.version) + 1))
	}
	size := c.intn(4) // small sets are the usual case
	if c.intn(4) == 0 {
		size = c.intn(MaxStandbys + 2)
	}
	members := make([]uint32, size)
	for i := range members {
		members[i] = uint32(1 + c.intn(maxModelStandbyID))
	}
	var want error
	switch {
	case version <= h.version:
		want = ErrStaleInSyncVersion
	case len(members) > MaxStandbys:
		want = ErrTooManyStandbys
	case len(slices.Compact(slices.Sorted(slices.Values(members)))) != len(members):
		want = ErrDuplicateStandby
	}
	err := h.g.SetInSync(version, members, h.nowNs)
	if !errors.Is(err, want) || (err == nil) != (want == nil) {
		h.fatalf("SetInSync(%d, %v) = %v, want %v", version, members, err, want)
	}
	if want != nil {
		return
	}
	h.version = version
	for _, id := range members {
		h.seen(id)
		if !h.isMember(id) {
			h.progress[id] = max(h.progress[id], h.nowNs)
		}
	}
	h.members = members
	h.advance()
}

func (h *harness) publishAndCheck(c chooser) {
	g := h.g
	bound, boundOK := h.bound()
	prev := h.emitted
	before := g.Released()
	n := 0
	for limit := Publishable(g); ; n++ {
		seq, out, ok := h.p.Next(limit)
		if !ok {
			break
		}
		if !h.held {
			h.fatalf("handed out seq %d while the lease is not held", seq)
		}
		if seq > h.released {
			h.fatalf("handed out seq %d above the model's released %d", seq, h.released)
		}
		if out.early && (!boundOK || seq > bound) {
			h.fatalf("handed out seq %d above min(applied, ack, durable) = %d (ok %v)", seq, bound, boundOK)
		}
		if len(h.queue) == 0 || *out != h.queue[0] || seq != out.seq {
			h.fatalf("handed out %d %+v, want the model's head %+v", seq, *out, h.queue[:min(1, len(h.queue))])
		}
		h.queue = h.queue[1:]
		h.emitted++
	}
	if n != h.emitted-prev {
		h.fatalf("handed out %d, emitted %d", n, h.emitted-prev)
	}
	if g.Released() != before {
		h.fatalf("Publish changed Released %d -> %d", before, g.Released())
	}
	if got := g.Released(); got != h.released {
		h.fatalf("Released() = %d, model %d (applied %d durable %d held %v members %v acks %v cfg %+v)",
			got, h.released, h.applied, h.durable, h.held, h.members, h.acks, h.cfg)
	}
	if g.Released() > g.Applied() || g.Released() > g.Durable() {
		h.fatalf("Released %d above applied %d or durable %d", g.Released(), g.Applied(), g.Durable())
	}
	if g.Applied() != h.applied || g.Durable() != h.durable || g.LeaseHeld() != h.held {
		h.fatalf("Gate inputs %d %d %v, model %d %d %v", g.Applied(), g.Durable(), g.LeaseHeld(), h.applied, h.durable, h.held)
	}
	if h.held && len(h.queue) > 0 && h.queue[0].seq <= h.released {
		h.fatalf("seq %d is released (%d) but still queued", h.queue[0].seq, h.released)
	}
	if h.p.Len() != len(h.queue) {
		h.fatalf("Publisher Len %d, model %d", h.p.Len(), len(h.queue))
	}
	if !slices.Equal(g.InSync(nil), h.members) {
		h.fatalf("InSync = %v, model %v", g.InSync(nil), h.members)
	}
	for id, ack := range h.acks {
		st, ok := g.Standby(id)
		if !ok || st.AckSeq != ack || st.LastAckNs != h.lastNs[id] || st.ProgressNs != h.progress[id] || st.Member != h.isMember(id) {
			h.fatalf("Standby(%d) = %+v %v, model ack %d at %d progress %d member %v", id, st, ok, ack, h.lastNs[id], h.progress[id], h.isMember(id))
		}
	}
	timeoutNs := int64(c.intn(3000))
	var want []uint32
	for _, id := range h.members {
		silent := h.nowNs-h.lastNs[id] > timeoutNs
		stalled := h.applied > h.released && h.acks[id] < h.applied && h.nowNs-h.progress[id] > timeoutNs
		if silent || stalled {
			want = append(want, id)
		}
	}
	if got := g.Lagging(h.nowNs, timeoutNs, nil); !slices.Equal(got, want) {
		h.fatalf("Lagging(%d, %d) = %v, model %v", h.nowNs, timeoutNs, got, want)
	}
}

// TestGatePublisherProperties checks, over random interleavings of applied,
// durable, ack, lease, membership and enqueue operations, that the Gate's
// watermark equals an independent model's, never goes backwards, never
// moves without the lease, and that every output is handed out in order,
// exactly once, only while the lease is held, never above the model's
// watermark and (when enqueued as the contract asks) never above
// min(applied, required ack, durable) at that moment.
func TestGatePublisherProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := rapidChooser{rt}
		h := newHarness(c, rt.Fatalf)
		steps := rapid.IntRange(20, 400).Draw(rt, "steps")
		for range steps {
			h.step(c)
		}
		// Take the lease and release everything: nothing may be left behind
		// that the model says is released.
		h.held = true
		h.g.SetLease(true)
		h.advance()
		h.publishAndCheck(c)
	})
}

// FuzzGate turns fuzz bytes into the same operations (the ids and acks it
// feeds OnAck stand for network input) and checks the same invariants.
func FuzzGate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 3, 7, 1, 1, 0, 0, 6, 1, 4, 0, 2, 2, 3, 2, 4, 1, 2, 0, 0})
	f.Add([]byte{2, 1, 8, 0, 7, 0, 3, 1, 2, 3, 0, 0, 3, 1, 4, 5, 1, 4, 0, 2, 3, 6, 0, 0, 0, 0, 1, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		h := newHarness(c, t.Fatalf)
		for !c.exhausted {
			h.step(c)
		}
	})
}
