package bench

import (
	"encoding/json"
	"runtime"
	"testing"
)

func TestMachine(t *testing.T) {
	m := Machine()
	if m.GOOS != runtime.GOOS || m.GOARCH != runtime.GOARCH || m.NumCPU < 1 || m.GoVersion == "" {
		t.Fatalf("%+v", m)
	}
	if runtime.GOOS == "linux" && m.Kernel == "" {
		t.Fatalf("no kernel from uname: %+v", m)
	}
}

func TestSummary(t *testing.T) {
	h := newLatencyHistogram()
	for v := int64(1); v <= 10_000; v++ {
		recordClamped(h, v*1000) // 1 µs .. 10 ms
	}
	s := NewSummary("ramp", h, NsPerUs)
	want := map[string]float64{"p50": 5000, "p90": 9000, "p99": 9900, "p99.9": 9990, "p99.99": 9999, "max": 10000}
	for label, us := range want {
		got := s.PercentilesUs[label]
		if got < us || got > us*1.001 { // 3 significant digits
			t.Errorf("%s = %v, want %v (+0.1%%)", label, got, us)
		}
	}
	if s.Count != 10_000 || s.MinUs != 1 || s.Name != "ramp" {
		t.Fatalf("%+v", s)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(data, &back); err != nil || back.PercentilesUs["p99"] != s.PercentilesUs["p99"] || back.Machine != s.Machine {
		t.Fatalf("JSON round trip: %v %s", err, data)
	}
}
