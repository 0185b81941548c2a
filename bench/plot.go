package bench

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot geometry. A PNG is drawn at 96 dots per inch (gonum's vgimg
// default), so PlotWidthPx × PlotHeightPx pixels; an SVG has the same size
// in points × 4/3.
const (
	PlotWidthPx  = 1200
	PlotHeightPx = 750
	plotDPI      = 96
	// PlotSeriesMax bounds the lines on one plot: beyond a dozen the colours
	// repeat and the legend covers the data.
	PlotSeriesMax = 12
)

// PlotOptions tunes PlotPercentilesWith; the zero value is PlotPercentiles'.
type PlotOptions struct {
	Title string
	// LogLatency puts latency on a log axis too: a 7 µs floor and a 4 ms
	// tail on one linear axis make the floor a flat line at zero.
	LogLatency bool
}

// PlotPercentiles draws each distribution as a line of latency (µs, y)
// against percentile (x) on HdrHistogram's usual scale: x is 1/(1−p) on a
// log axis, labelled 0%, 90%, 99%, 99.9%, … as far as the data reaches. The
// 100% row (the maximum, at infinity on this axis) is not drawn; Compare
// reports it. The format follows path's extension, .png or .svg.
func PlotPercentiles(path, title string, series []Named) error {
	return PlotPercentilesWith(path, PlotOptions{Title: title}, series)
}

// PlotPercentilesWith is PlotPercentiles with options.
func PlotPercentilesWith(path string, opts PlotOptions, series []Named) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("%w: plot path %q: want a .png or .svg extension", ErrConfig, path)
	}
	if len(series) == 0 || len(series) > PlotSeriesMax {
		return fmt.Errorf("%w: plot needs 1..%d series, got %d", ErrConfig, PlotSeriesMax, len(series))
	}
	p := plot.New()
	p.Title.Text = opts.Title
	p.Title.TextStyle.Font.Size = vg.Points(16)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.X.Label.TextStyle.Font.Size = vg.Points(13)
	p.Y.Label.TextStyle.Font.Size = vg.Points(13)
	p.X.Tick.Label.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)
	p.X.Scale = plot.LogScale{}
	if opts.LogLatency {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
		p.Y.Tick.Marker = latencyTicks{}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(12)
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(8)
	p.Legend.ThumbnailWidth = vg.Points(28)
	p.Add(plotter.NewGrid())

	xMax := 10.0 // always show 0% and 90%
	for i, s := range series {
		xys := percentileXYs(s.Dist, opts.LogLatency)
		if len(xys) == 0 {
			continue
		}
		xMax = math.Max(xMax, xys[len(xys)-1].X)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("bench: plot %q: %w", s.Name, err)
		}
		line.Width = vg.Points(2.5)
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		p.Add(line)
		p.Legend.Add(s.Name, line)
	}
	// The axis ends at a decade. Rows run a little past the last full
	// decade (a 10^5-value run reaches 1/(1−p) ≈ 1.1·10^5), and a whole
	// empty decade for them wastes a sixth of the plot: up to 2× past a
	// decade is clipped instead.
	decades := max(1, int(math.Ceil(math.Log10(xMax/2)-1e-9)))
	p.X.Min = 1
	p.X.Max = math.Pow(10, float64(decades))
	p.X.Tick.Marker = percentileTicks{decades: decades}

	widthPt := vg.Length(PlotWidthPx) * vg.Inch / plotDPI
	heightPt := vg.Length(PlotHeightPx) * vg.Inch / plotDPI
	if err := p.Save(widthPt, heightPt, path); err != nil {
		return fmt.Errorf("bench: save plot %s: %w", path, err)
	}
	return nil
}

// percentileXYs maps each row below 100% to (1/(1−p), value); on a log
// latency axis rows at 0 (which it cannot show) are left out.
func percentileXYs(d Distribution, logLatency bool) plotter.XYs {
	xys := make(plotter.XYs, 0, len(d.Rows))
	for _, r := range d.Rows {
		if r.Percentile >= 1 || (logLatency && r.ValueUs <= 0) {
			continue
		}
		xys = append(xys, plotter.XY{X: 1 / (1 - r.Percentile), Y: r.ValueUs})
	}
	return xys
}

// percentileTicks labels decades of 1/(1−p) as percentiles: 1 → 0%,
// 10 → 90%, 100 → 99%, 1000 → 99.9%, and so on.
type percentileTicks struct{ decades int }

var _ plot.Ticker = percentileTicks{}

func (t percentileTicks) Ticks(_, _ float64) []plot.Tick {
	ticks := make([]plot.Tick, 0, t.decades+1)
	for k := 0; k <= t.decades; k++ {
		ticks = append(ticks, plot.Tick{Value: math.Pow(10, float64(k)), Label: percentileLabel(k)})
	}
	return ticks
}

// percentileLabel is the percentile at 1/(1−p) = 10^k: 100·(1 − 10^−k) %.
func percentileLabel(k int) string {
	if k == 0 {
		return "0%"
	}
	// 100 − 10^(2−k): "90", "99", "99.9", … printed exactly, not via floats.
	if k <= 2 {
		return strconv.Itoa(100-int(math.Pow(10, float64(2-k)))) + "%"
	}
	return "99." + strings.Repeat("9", k-2) + "%"
}

// latencyTicks are gonum's default linear ticks with labels that drop
// needless decimals ("250000", "7.5") instead of printing "250000.00".
type latencyTicks struct{}

var _ plot.Ticker = latencyTicks{}

func (latencyTicks) Ticks(low, high float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(low, high)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
