package gating

import (
	"errors"
	"slices"
	"testing"
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
	p.Release(released, func(seq uint64, out *testOutput) {
		seqs = append(seqs, seq)
		outs = append(outs, *out)
	})
	return seqs, outs
}

// TestReleaseInSeqOrderFIFO proves Release hands out only seq <= released,
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
			t.Errorf("Release(%d) = %v %v, want %v %v", tt.released, seqs, offsets, tt.seqs, tt.offsets)
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
	if n := p.Release(100, func(uint64, **int) { t.Fatal("dropped output handed out") }); n != 0 {
		t.Fatalf("Release after DropAll = %d", n)
	}
	if err := p.Enqueue(4, &x); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Enqueue below the floor after DropAll = %v", err)
	}
	if n := p.DropAll(); n != 0 {
		t.Fatalf("second DropAll = %d", n)
	}
}

// TestReleaseZeroesSlots proves handed-out slots do not keep outputs alive.
func TestReleaseZeroesSlots(t *testing.T) {
	p, _ := NewPublisher[*int](2)
	x := 1
	_ = p.Enqueue(1, &x)
	p.Release(1, func(_ uint64, out **int) {
		if *out != &x {
			t.Fatal("emit saw the wrong output")
		}
	})
	if p.outs[0] != nil {
		t.Fatal("released slot still references the output")
	}
}

// TestReentryPanics proves calling back into the Publisher from emit is
// caught, and that the Publisher is usable after the panic is recovered.
func TestReentryPanics(t *testing.T) {
	p := newTestPublisher(t, 4)
	_ = p.Enqueue(1, testOutput{})
	_ = p.Enqueue(2, testOutput{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Enqueue inside emit did not panic")
			}
		}()
		p.Release(1, func(uint64, *testOutput) { _ = p.Enqueue(3, testOutput{}) })
	}()
	// The output being emitted was already removed: at most once.
	if seqs, _ := collect(p, 10); !slices.Equal(seqs, []uint64{2}) {
		t.Fatalf("after recovered panic: %v, want [2]", seqs)
	}
}
