package bench

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latency.png")
	floor := FromHistogram(latencyLike(100_000), NsPerUs)
	gated := floor.Scaled(2.5)
	if err := PlotPercentiles(path, "floor vs gated", []Named{{"floor", floor}, {"gated ×2.5", gated}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != PlotWidthPx || b.Dy() != PlotHeightPx {
		t.Fatalf("PNG is %dx%d, want %dx%d", b.Dx(), b.Dy(), PlotWidthPx, PlotHeightPx)
	}
}

func TestPlotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latency.svg")
	if err := PlotPercentiles(path, "one", []Named{{"floor", FromHistogram(latencyLike(1000), NsPerUs)}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "99.9%", "floor", "percentile"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Fatalf("SVG lacks %q", want)
		}
	}
}

func TestPlotRejects(t *testing.T) {
	dir := t.TempDir()
	one := []Named{{"a", flat(1, 2, 3)}}
	if err := PlotPercentiles(filepath.Join(dir, "x.jpg"), "", one); !errors.Is(err, ErrConfig) {
		t.Errorf("jpg: %v", err)
	}
	if err := PlotPercentiles(filepath.Join(dir, "x.png"), "", nil); !errors.Is(err, ErrConfig) {
		t.Errorf("no series: %v", err)
	}
}

func TestPercentileLabels(t *testing.T) {
	var got []string
	for _, tick := range (percentileTicks{decades: 6}).Ticks(1, 1e6) {
		got = append(got, tick.Label)
	}
	if want := "0% 90% 99% 99.9% 99.99% 99.999% 99.9999%"; strings.Join(got, " ") != want {
		t.Fatalf("labels %q, want %q", strings.Join(got, " "), want)
	}
}
