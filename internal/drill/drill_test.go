package drill

import (
	"strings"
	"testing"

	"github.com/seqbus/seqbus/internal/verdict"
)

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		unsafe, anomaly string
		ok              bool
		line            string
	}{
		{"", "", true, "  verdict: PASS, nothing stale reached the client and nothing acknowledged was lost"},
		{"", "3 outputs lost", false, "  verdict: FAIL, 3 outputs lost"},
		{"--unsafe-no-gating", "3 outputs lost", true, "  verdict: ANOMALY DETECTED (expected with --unsafe-no-gating): 3 outputs lost"},
		{"--unsafe-no-fencing", "", false, "  verdict: NOT REPRODUCED: with --unsafe-no-fencing the drill expected an anomaly and saw none"},
	} {
		ok, line := Judge(tc.unsafe, tc.anomaly)
		if ok != tc.ok || line != tc.line {
			t.Errorf("Judge(%q, %q) = %v, %q; want %v, %q", tc.unsafe, tc.anomaly, ok, line, tc.ok, tc.line)
		}
	}
}

func TestSelect(t *testing.T) {
	if got := Select("all"); len(got) != len(Scenarios) {
		t.Fatalf("all: %d scenarios, want %d", len(got), len(Scenarios))
	}
	if got := Select("no-gating"); len(got) != 1 || got[0].Name != "no-gating" || got[0].Unsafe != "--unsafe-no-gating" {
		t.Fatalf("no-gating: %+v", got)
	}
	if got := Select("nope"); len(got) != 0 {
		t.Fatalf("unknown name selected %d scenarios", len(got))
	}
	for _, s := range Scenarios {
		if s.run == nil || s.Title == "" || s.Lesson == "" {
			t.Errorf("scenario %q is incomplete", s.Name)
		}
		if s.Unsafe != "" && !strings.HasPrefix(s.Unsafe, "--unsafe-") {
			t.Errorf("scenario %q: switch %q is not an unsafe switch", s.Name, s.Unsafe)
		}
	}
}

func TestFindings(t *testing.T) {
	if got := join("a", ""); got != "a" {
		t.Errorf("join(a, \"\") = %q", got)
	}
	if got := join("", "b"); got != "b" {
		t.Errorf("join(\"\", b) = %q", got)
	}
	if got := join("a", "b"); got != "a; b" {
		t.Errorf("join(a, b) = %q", got)
	}
	r := &drillRun{}
	if got := r.otherFindings(); got != "" {
		t.Errorf("no verdict: %q", got)
	}
	r.verdict = &verdict.Result{Duplicates: 1, HashMismatches: 2}
	if got, want := r.otherFindings(), "seqbus verify: duplicates 1, conflicts 0, hash mismatches 2"; got != want {
		t.Errorf("otherFindings = %q, want %q", got, want)
	}
}
