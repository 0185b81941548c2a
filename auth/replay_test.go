package auth

import (
	"errors"
	"math"
	"testing"
)

func TestFilterRules(t *testing.T) {
	type step struct {
		counter uint64
		limit   uint64
		want    bool
	}
	const noLimit = math.MaxUint64
	tests := []struct {
		name  string
		steps []step
	}{
		{"zero value accepts 0 once", []step{{0, noLimit, true}, {0, noLimit, false}}},
		{"in order once each", []step{{1, noLimit, true}, {2, noLimit, true}, {3, noLimit, true}, {2, noLimit, false}, {3, noLimit, false}}},
		{"out of order within the window", []step{{100, noLimit, true}, {50, noLimit, true}, {99, noLimit, true}, {50, noLimit, false}}},
		{"exactly ReplayWindow behind is accepted", []step{{ReplayWindow + 10, noLimit, true}, {10, noLimit, true}, {10, noLimit, false}}},
		{"one further back is refused", []step{{ReplayWindow + 10, noLimit, true}, {9, noLimit, false}}},
		{"at the limit is refused", []step{{5, 5, false}, {4, 5, true}}},
		{"over the limit is refused and changes nothing", []step{{10, noLimit, true}, {1 << 40, 100, false}, {9, noLimit, true}}},
		{"max counter with max limit", []step{{math.MaxUint64, noLimit, false}, {math.MaxUint64 - 1, noLimit, true}, {math.MaxUint64 - 1, noLimit, false}}},
		{"a big jump clears the ring", []step{{64, noLimit, true}, {64 + 64*replayRingBlocks*3, noLimit, true}, {64 + 64*replayRingBlocks*3 - 1, noLimit, true}, {64, noLimit, false}}},
		{"a jump of exactly the ring clears stale bits", []step{
			{5, noLimit, true}, {5 + 64*replayRingBlocks, noLimit, true}, {5 + 64*replayRingBlocks - ReplayWindow, noLimit, true}}},
		{"slide by one block keeps the rest", []step{{63, noLimit, true}, {64, noLimit, true}, {63, noLimit, false}, {62, noLimit, true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f Filter
			for i, s := range tc.steps {
				if got := f.ValidateCounter(s.counter, s.limit); got != s.want {
					t.Fatalf("step %d: ValidateCounter(%d, %d) = %v, want %v", i, s.counter, s.limit, got, s.want)
				}
			}
		})
	}
}

func TestFilterReset(t *testing.T) {
	var f Filter
	for c := uint64(0); c < 3000; c += 7 {
		f.ValidateCounter(c, CounterLimit)
	}
	f.Reset()
	if f.Highest() != 0 {
		t.Fatalf("Highest after Reset = %d", f.Highest())
	}
	for c := uint64(0); c < 100; c++ {
		if !f.ValidateCounter(c, CounterLimit) {
			t.Fatalf("counter %d refused after Reset", c)
		}
	}
}

func TestEpochFilter(t *testing.T) {
	type step struct {
		epoch, counter uint64
		want           error
	}
	steps := []step{
		{1, 10, nil},
		{1, 10, ErrReplay},
		{1, 11, nil},
		{1, 5, nil},
		{2, 1, nil},        // a new epoch starts an empty window
		{2, 1, ErrReplay},  // once
		{1, 12, ErrReplay}, // older epoch: refused even if never seen
		{2, 10, nil},       // 10 is new in epoch 2
		{2, CounterLimit, ErrReplay},
		{3, CounterLimit, ErrReplay}, // refused before the epoch moves
		{2, 11, nil},                 // so epoch 2 is still current
		{0, 0, ErrReplay},
	}
	var f EpochFilter
	for i, s := range steps {
		err := f.Accept(s.epoch, s.counter)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("step %d: Accept(%d, %d) = %v, want %v", i, s.epoch, s.counter, err, s.want)
		}
	}
	if f.Epoch() != 2 {
		t.Fatalf("Epoch = %d, want 2", f.Epoch())
	}
}
