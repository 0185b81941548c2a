//go:build linux

package bench

import "testing"

func TestCPUModel(t *testing.T) {
	if got, want := cpuModel("testdata/cpuinfo-x86"), "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := cpuModel("testdata/missing"); got != "" {
		t.Fatalf("missing file: %q", got)
	}
}

func TestStealPercent(t *testing.T) {
	a := parseCPUTimes("cpu  100 0 50 800 10 0 0 40 7 0\ncpu0 1 2 3\n")
	b := parseCPUTimes("cpu  200 0 100 1600 20 0 0 80 9 0\n")
	if !a.OK || a.Total != 1000 || a.Steal != 40 {
		t.Fatalf("parsed %+v", a)
	}
	if got := StealPercent(a, b); got != 4 {
		t.Fatalf("steal %v%%, want 4", got)
	}
	if got := StealPercent(a, parseCPUTimes("intr 1 2 3")); got != -1 {
		t.Fatalf("unreadable: %v", got)
	}
	if LoadAverage() < 0 {
		t.Fatal("no /proc/loadavg on Linux")
	}
}
