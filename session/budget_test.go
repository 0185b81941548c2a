package session

import "testing"

// TestBudget: RequestBudget requests a window; the window starts at the
// first request after the previous one ended.
func TestBudget(t *testing.T) {
	type step struct {
		nowNs int64
		want  bool
	}
	var burst []step
	for i := range RequestBudget {
		burst = append(burst, step{int64(i), true})
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a burst, then refused", append(burst, step{RequestBudget, false}, step{RequestBudgetNs - 1, false})},
		{"a new window", append(burst, step{RequestBudgetNs, true})},
		{"the window starts late", []step{{5 * RequestBudgetNs, true}, {6*RequestBudgetNs - 1, true}, {6 * RequestBudgetNs, true}}},
		{"negative monotonic time", []step{{-RequestBudgetNs, true}, {-1, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Budget
			for i, s := range tc.steps {
				if got := b.Allow(s.nowNs); got != s.want {
					t.Fatalf("step %d at %d ns: Allow = %v, want %v", i, s.nowNs, got, s.want)
				}
			}
		})
	}
}
