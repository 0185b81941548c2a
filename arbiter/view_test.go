package arbiter

import (
	"math"
	"testing"
)

func TestMayLead(t *testing.T) {
	const maxNs, minNs = math.MaxInt64, math.MinInt64
	v := LeaseView{Epoch: 1, SentAtNs: 0, DurationNs: 1000}
	tests := []struct {
		name     string
		view     LeaseView
		nowNs    int64
		marginNs int64
		want     bool
	}{
		{"no lease", LeaseView{}, 0, 0, false},
		{"epoch 0 never leads", LeaseView{SentAtNs: 0, DurationNs: 1000}, 1, 0, false},
		{"at send time", v, 0, 150, true},
		{"last instant before deadline", v, 849, 150, true},
		{"deadline itself", v, 850, 150, false},
		{"after deadline", v, 2000, 150, false},
		{"margin 0: last instant", v, 999, 0, true},
		{"margin 0: lease end", v, 1000, 0, false},
		{"clock before send time", v, -1, 150, false},
		{"margin equals duration", v, 0, 1000, false},
		{"margin larger than duration", v, 0, 2000, false},
		{"margin MaxInt64", v, 0, maxNs, false},
		{"negative margin refused", v, 0, -1, false},
		{"zero duration", LeaseView{Epoch: 1, DurationNs: 0}, 0, 0, false},
		{"negative duration", LeaseView{Epoch: 1, DurationNs: -5}, 0, 0, false},
		{"near top: at send", LeaseView{Epoch: 1, SentAtNs: maxNs - 100, DurationNs: 1000}, maxNs - 100, 150, true},
		{"near top: saturated deadline", LeaseView{Epoch: 1, SentAtNs: maxNs - 100, DurationNs: 1000}, maxNs - 1, 150, true},
		{"near top: MaxInt64 itself", LeaseView{Epoch: 1, SentAtNs: maxNs - 100, DurationNs: 1000}, maxNs, 150, false},
		{"near top: no saturation needed", LeaseView{Epoch: 1, SentAtNs: maxNs - 1000, DurationNs: 1000}, maxNs - 151, 150, true},
		{"near top: exact deadline", LeaseView{Epoch: 1, SentAtNs: maxNs - 1000, DurationNs: 1000}, maxNs - 150, 150, false},
		{"huge duration", LeaseView{Epoch: 1, SentAtNs: 5, DurationNs: maxNs}, maxNs - 1, 0, true},
		{"bottom of clock", LeaseView{Epoch: 1, SentAtNs: minNs, DurationNs: 1000}, minNs + 849, 150, true},
		{"bottom of clock deadline", LeaseView{Epoch: 1, SentAtNs: minNs, DurationNs: 1000}, minNs + 850, 150, false},
		{"negative send time", LeaseView{Epoch: 1, SentAtNs: -1000, DurationNs: 1000}, -151, 150, true},
	}
	for _, tt := range tests {
		if got := MayLead(tt.view, tt.nowNs, tt.marginNs); got != tt.want {
			t.Errorf("%s: MayLead(%+v, now %d, margin %d) = %v, want %v", tt.name, tt.view, tt.nowNs, tt.marginNs, got, tt.want)
		}
	}
}

func TestAddSaturating(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{0, 0, 0},
		{1, 2, 3},
		{-10, 5, -5},
		{math.MaxInt64, 0, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 2, math.MaxInt64},
		{1, math.MaxInt64, math.MaxInt64},
		{math.MinInt64, math.MaxInt64, -1},
	}
	for _, tt := range tests {
		if got := addSaturating(tt.a, tt.b); got != tt.want {
			t.Errorf("addSaturating(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
