package gating

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

type testOutput struct {
	session uint64
	offset  uint32
}

func newTestPublisher(t *testing.T, capacity int) *Publisher[testOutput] {
	t.Helper()
	p, err := NewPublisher[testOutput](capacity)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPublisherRejectsBadCapacity(t *testing.T) {
	for _, c := range []int{0, -1} {
		if _, err := NewPublisher[int](c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewPublisher(%d) = %v, want ErrInvalidConfig", c, err)
		}
	}
}

// collect releases up to released and returns what was handed out.
func collect(p *Publisher[testOutput], released uint64) (seqs []uint64, outs []testOutput) {
	for {
		seq, out, ok := p.Next(released)
		if !ok {
			return seqs, outs
		}
		seqs = append(seqs, seq)
		outs = append(outs, *out)
	}
}

// TestReleaseInSeqOrderFIFO proves Next hands out only seq <= released,
// in seq order and FIFO within one seq, and each output once.
func TestReleaseInSeqOrderFIFO(t *testing.T) {
	p := newTestPublisher(t, 8)
	for i, seq := range []uint64{1, 2, 2, 2, 4, 5} {
		if err := p.Enqueue(seq, testOutput{session: seq, offset: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		released uint64
		seqs     []uint64
		offsets  []uint32
	}{
		{released: 0, seqs: nil, offsets: nil},
		{released: 1, seqs: []uint64{1}, offsets: []uint32{0}},
		{released: 1, seqs: nil, offsets: nil},
		{released: 3, seqs: []uint64{2, 2, 2}, offsets: []uint32{1, 2, 3}},
		{released: 10, seqs: []uint64{4, 5}, offsets: []uint32{4, 5}},
		{released: 10, seqs: nil, offsets: nil},
	}
	for _, tt := range tests {
		seqs, outs := collect(p, tt.released)
		var offsets []uint32
		for _, o := range outs {
			offsets = append(offsets, o.offset)
		}
		if !slices.Equal(seqs, tt.seqs) || !slices.Equal(offsets, tt.offsets) {
			t.Errorf("Next(%d) = %v %v, want %v %v", tt.released, seqs, offsets, tt.seqs, tt.offsets)
		}
	}
	if s := p.Stats(); s.Enqueued != 6 || s.Released != 6 || p.Len() != 0 {
		t.Fatalf("Stats() = %+v Len %d", s, p.Len())
	}
}

// TestEnqueueErrorsChangeNothing proves ErrFull, ErrOutOfOrder and
// ErrZeroSeq leave the queue exactly as it was.
func TestEnqueueErrorsChangeNothing(t *testing.T) {
	tests := []struct {
		name string
		seq  uint64
		want error
	}{
		{"full", 9, ErrFull},
		{"out of order", 2, ErrOutOfOrder},
		{"zero seq", 0, ErrZeroSeq},
	}
	for _, tt := range tests {
		p := newTestPublisher(t, 3)
		for _, seq := range []uint64{3, 4, 5} {
			if err := p.Enqueue(seq, testOutput{session: seq}); err != nil {
				t.Fatal(err)
			}
		}
		if tt.want != ErrFull {
			collect(p, 3) // make room so only the rule under test applies
		}
		before := p.Len()
		if err := p.Enqueue(tt.seq, testOutput{session: 99}); !errors.Is(err, tt.want) {
			t.Errorf("%s: Enqueue = %v, want %v", tt.name, err, tt.want)
		}
		if p.Len() != before {
			t.Errorf("%s: Len %d, want %d", tt.name, p.Len(), before)
		}
		seqs, outs := collect(p, 100)
		for _, o := range outs {
			if o.session == 99 {
				t.Errorf("%s: rejected output was queued", tt.name)
			}
		}
		if tt.want == ErrFull && !slices.Equal(seqs, []uint64{3, 4, 5}) {
			t.Errorf("%s: queue after ErrFull = %v", tt.name, seqs)
		}
	}
	p := newTestPublisher(t, 1)
	_ = p.Enqueue(1, testOutput{})
	_ = p.Enqueue(2, testOutput{})
	if s := p.Stats(); s.Full != 1 || s.Enqueued != 1 {
		t.Fatalf("Stats() = %+v", s)
	}
}

// TestRingWraps proves order survives the ring wrapping many times.
func TestRingWraps(t *testing.T) {
	p := newTestPublisher(t, 3)
	next := uint64(1)
	for seq := uint64(1); seq <= 50; seq++ {
		if err := p.Enqueue(seq, testOutput{session: seq}); err != nil {
			t.Fatal(err)
		}
		if seq%2 == 0 {
			seqs, _ := collect(p, seq-1)
			for _, s := range seqs {
				if s != next {
					t.Fatalf("got seq %d, want %d", s, next)
				}
				next++
			}
		}
	}
}

// TestDropAll proves DropAll discards and counts everything queued, zeroes
// the slots, and keeps the out-of-order floor.
func TestDropAll(t *testing.T) {
	p, _ := NewPublisher[*int](4)
	x := 1
	_ = p.Enqueue(5, &x)
	_ = p.Enqueue(6, &x)
	if n := p.DropAll(); n != 2 || p.Len() != 0 || p.Stats().Dropped != 2 {
		t.Fatalf("DropAll = %d, Len %d, %+v", n, p.Len(), p.Stats())
	}
	for i, v := range p.outs {
		if v != nil {
			t.Fatalf("slot %d still references an output", i)
		}
	}
	if _, _, ok := p.Next(100); ok {
		t.Fatal("dropped output handed out")
	}
	if err := p.Enqueue(4, &x); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Enqueue below the floor after DropAll = %v", err)
	}
	if n := p.DropAll(); n != 0 {
		t.Fatalf("second DropAll = %d", n)
	}
}

// TestReleaseZeroesSlots proves handed-out slots do not keep outputs
// alive: the slot is zeroed by the next call, whichever it is.
func TestReleaseZeroesSlots(t *testing.T) {
	x := 1
	for _, next := range []func(p *Publisher[*int]){
		func(p *Publisher[*int]) { p.Next(0) },
		func(p *Publisher[*int]) { p.Next(1) },
		func(p *Publisher[*int]) { _ = p.Enqueue(2, nil) },
		func(p *Publisher[*int]) { p.DropAll() },
	} {
		p, _ := NewPublisher[*int](2)
		_ = p.Enqueue(1, &x)
		if _, out, ok := p.Next(1); !ok || *out != &x {
			t.Fatal("Next handed out the wrong output")
		}
		next(p)
		if p.outs[0] != nil {
			t.Fatal("released slot still references the output")
		}
	}
}

// TestNextNeverAboveReleased proves Next stops at the first output above
// released and hands nothing out for released 0 (Publishable without the
// lease), and that a release interleaved with Enqueue keeps the order.
func TestNextNeverAboveReleased(t *testing.T) {
	p := newTestPublisher(t, 8)
	for _, seq := range []uint64{1, 3, 3, 4} {
		_ = p.Enqueue(seq, testOutput{session: seq})
	}
	if _, _, ok := p.Next(0); ok {
		t.Fatal("Next(0) handed out an output")
	}
	if seq, _, ok := p.Next(2); !ok || seq != 1 {
		t.Fatalf("Next(2) = %d %v, want 1", seq, ok)
	}
	if seq, _, ok := p.Next(2); ok {
		t.Fatalf("Next(2) handed out seq %d above released", seq)
	}
	if seq, _, ok := p.Next(3); !ok || seq != 3 {
		t.Fatalf("Next(3) = %d %v", seq, ok)
	}
	_ = p.Enqueue(5, testOutput{session: 5}) // between two Next calls
	if seqs, _ := collect(p, 5); !slices.Equal(seqs, []uint64{3, 4, 5}) {
		t.Fatalf("after an interleaved Enqueue: %v, want [3 4 5]", seqs)
	}
	if s := p.Stats(); s.Released != 5 || s.Enqueued != 5 || p.Len() != 0 {
		t.Fatalf("Stats() = %+v Len %d", s, p.Len())
	}
}

// TestPublishable proves the bound is the Gate's released watermark only
// while the lease is held.
func TestPublishable(t *testing.T) {
	g := benchGate(t, 1, Config{})
	g.SetApplied(7)
	g.SetDurable(7)
	g.OnAck(1, 7, 0)
	if got := Publishable(g); got != 7 {
		t.Fatalf("Publishable with the lease = %d, want 7", got)
	}
	g.SetLease(false)
	if got := Publishable(g); got != 0 {
		t.Fatalf("Publishable without the lease = %d, want 0", got)
	}
}

// TestPublisherAgainstSliceModel drives random Enqueue, Next and DropAll
// against a plain slice: Next hands out exactly the model's head while its
// seq is at or below released, never above it, and the counters match.
func TestPublisherAgainstSliceModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 12).Draw(rt, "capacity")
		p, err := NewPublisher[testOutput](capacity)
		if err != nil {
			rt.Fatal(err)
		}
		type item struct {
			seq uint64
			tag uint32
		}
		var model []item
		var last uint64
		var want PublisherStats
		tag := uint32(0)
		for range rapid.IntRange(1, 300).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2: // enqueue at or above the last seq, sometimes below
				seq := last + rapid.Uint64Range(0, 3).Draw(rt, "d")
				if rapid.IntRange(0, 7).Draw(rt, "below") == 0 && seq > 0 {
					seq--
				}
				tag++
				var err error
				if rapid.Bool().Draw(rt, "in place") {
					var slot *testOutput
					if slot, err = p.EnqueueSlot(seq); err == nil {
						slot.session, slot.offset = seq, tag // over whatever the slot held
					} else if slot != nil {
						rt.Fatalf("EnqueueSlot(%d) failed (%v) with a slot", seq, err)
					}
				} else {
					err = p.Enqueue(seq, testOutput{session: seq, offset: tag})
				}
				switch {
				case seq == 0:
					if !errors.Is(err, ErrZeroSeq) {
						rt.Fatalf("Enqueue(0) = %v", err)
					}
				case seq < last:
					if !errors.Is(err, ErrOutOfOrder) {
						rt.Fatalf("Enqueue(%d) below %d = %v", seq, last, err)
					}
				case len(model) == capacity:
					if !errors.Is(err, ErrFull) {
						rt.Fatalf("Enqueue into a full queue = %v", err)
					}
					want.Full++
				default:
					if err != nil {
						rt.Fatalf("Enqueue(%d) = %v", seq, err)
					}
					model = append(model, item{seq, tag})
					last = seq
					want.Enqueued++
				}
			case 3, 4: // release up to a random bound
				released := rapid.Uint64Range(0, last+2).Draw(rt, "released")
				for {
					seq, out, ok := p.Next(released)
					if !ok {
						break
					}
					if seq > released {
						rt.Fatalf("Next(%d) handed out seq %d", released, seq)
					}
					if len(model) == 0 || model[0].seq != seq || out.offset != model[0].tag || out.session != seq {
						rt.Fatalf("Next(%d) = %d %+v, model head %v", released, seq, *out, model[:min(1, len(model))])
					}
					model = model[1:]
					want.Released++
				}
				if len(model) > 0 && model[0].seq <= released {
					rt.Fatalf("Next(%d) stopped with seq %d still queued", released, model[0].seq)
				}
			case 5:
				if n := p.DropAll(); n != len(model) {
					rt.Fatalf("DropAll = %d, model %d", n, len(model))
				}
				want.Dropped += uint64(len(model))
				model = model[:0]
			}
			if p.Len() != len(model) || p.Stats() != want {
				rt.Fatalf("Len %d Stats %+v, model %d %+v", p.Len(), p.Stats(), len(model), want)
			}
		}
	})
}
