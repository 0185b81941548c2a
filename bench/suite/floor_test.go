package suite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bench"
)

// TestMain: RunFloorSuite's test execs this test binary as the hops.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "bench-echo" {
		if err := bench.EchoMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench-echo:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestFloorSuiteAndCompare: each strategy's histogram is written and
// compared, with a lateness line each; the files read back for compare
// are named by their directory.
func TestFloorSuiteAndCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "floor")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := RunFloorSuite(ctx, FloorConfig{Bin: os.Args[0], Hops: 2, Size: 32, Count: 300, Rate: 5000, Idles: []string{"block", "yield"}, Dir: dir, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Summaries) != 2 || len(res.Table.Rows) == 0 {
		t.Fatalf("result %+v", res)
	}
	for _, want := range []string{"  floor-2hop-block: intended->sent p50", "  floor-2hop-yield: intended->sent p50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	series, err := ReadHGRMs([]string{filepath.Join(dir, "floor-2hop-block.hgrm"), filepath.Join(dir, "floor-2hop-yield.hgrm")})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 2 || series[0].Name != "floor/floor-2hop-block" || series[1].Name != "floor/floor-2hop-yield" {
		t.Fatalf("series %+v", series)
	}
	if _, err := ReadHGRMs([]string{filepath.Join(dir, "missing.hgrm")}); err == nil {
		t.Fatal("a missing file read")
	}
}
