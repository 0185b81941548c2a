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
