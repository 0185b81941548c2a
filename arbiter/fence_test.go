package arbiter

import (
	"errors"
	"testing"
)

func TestFence(t *testing.T) {
	var f Fence // the zero value is ready
	steps := []struct {
		epoch       uint64
		wantStale   bool
		wantHighest uint64
	}{
		{0, false, 0}, // a new fence accepts epoch 0
		{3, false, 3}, // newer raises
		{3, false, 3}, // equal is the current leader's stream
		{2, true, 3},  // older refused, highest unchanged
		{0, true, 3},
		{4, false, 4},
		{3, true, 4},
		{^uint64(0), false, ^uint64(0)},
		{4, true, ^uint64(0)},
	}
	for i, s := range steps {
		if got := f.Refuses(s.epoch); got != s.wantStale {
			t.Fatalf("step %d: Refuses(%d) = %v, want %v", i, s.epoch, got, s.wantStale)
		}
		before := f.Highest()
		err := f.Accept(s.epoch)
		if s.wantStale {
			var stale *Stale
			if !errors.As(err, &stale) {
				t.Fatalf("step %d: Accept(%d) = %v, want *Stale", i, s.epoch, err)
			}
			if stale.Epoch != s.epoch || stale.Highest != before {
				t.Fatalf("step %d: Stale = %+v, want {Epoch %d Highest %d}", i, *stale, s.epoch, before)
			}
			if !errors.Is(err, ErrStaleEpoch) {
				t.Fatalf("step %d: errors.Is(%v, ErrStaleEpoch) = false", i, err)
			}
		} else if err != nil {
			t.Fatalf("step %d: Accept(%d) = %v, want nil", i, s.epoch, err)
		}
		if got := f.Highest(); got != s.wantHighest {
			t.Fatalf("step %d: Highest = %d, want %d", i, got, s.wantHighest)
		}
	}
}

func TestStaleError(t *testing.T) {
	err := error(&Stale{Epoch: 2, Highest: 5})
	if got, want := err.Error(), "arbiter: stale epoch 2 (highest accepted 5)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("journal: append"), err)
	if !errors.Is(wrapped, ErrStaleEpoch) {
		t.Error("wrapped *Stale does not match ErrStaleEpoch")
	}
	if errors.Is(err, ErrInvalidConfig) {
		t.Error("*Stale matches ErrInvalidConfig")
	}
}

func TestFenceAcceptDoesNotAllocate(t *testing.T) {
	var f Fence
	epoch := uint64(1)
	if n := testing.AllocsPerRun(1000, func() {
		if f.Accept(epoch) != nil {
			panic("refused")
		}
		epoch++
		_ = f.Refuses(epoch - 2)
	}); n != 0 {
		t.Fatalf("Accept allocates %v per call", n)
	}
}
