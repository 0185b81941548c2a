package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// CompareSeriesMax bounds how many distributions one table compares; a
// table wider than this is unreadable as text anyway.
const CompareSeriesMax = 16

// Named is a distribution with the name it is shown under (a column of a
// table, a line of a plot).
type Named struct {
	Name string
	Dist Distribution
}

// ComparePoint is one row of a comparison: a label and the percentile
// (0..100) it reads; 100 reads the maximum.
type ComparePoint struct {
	Label      string
	Percentile float64
}

// ComparePoints are the rows Compare reports, in order.
var ComparePoints = []ComparePoint{
	{"p50", 50},
	{"p90", 90},
	{"p99", 99},
	{"p99.9", 99.9},
	{"p99.99", 99.99},
	{"max", 100},
}

// Table compares distributions: one column per input, in input order; the
// first is the baseline every ratio divides by.
type Table struct {
	Names  []string
	Counts []int64 // each input's total count
	Rows   []TableRow
}

// TableRow is one percentile across the inputs.
type TableRow struct {
	Label      string
	Percentile float64
	ValuesUs   []float64 // one per input
	// Ratios[i] is ValuesUs[i] / ValuesUs[0] (so Ratios[0] is 1). It is NaN
	// when the baseline value is 0, which has no ratio; JSON shows null.
	Ratios []float64
}

// Compare reads ComparePoints from each distribution (Distribution.ValueUs:
// the first printed row at or above each percentile) and divides each by
// the first input's. It needs 1..CompareSeriesMax inputs with names.
func Compare(series []Named) (Table, error) {
	if len(series) == 0 || len(series) > CompareSeriesMax {
		return Table{}, fmt.Errorf("%w: compare needs 1..%d distributions, got %d", ErrConfig, CompareSeriesMax, len(series))
	}
	t := Table{Names: make([]string, len(series)), Counts: make([]int64, len(series))}
	for i, s := range series {
		if s.Name == "" {
			return Table{}, fmt.Errorf("%w: distribution %d has no name", ErrConfig, i)
		}
		t.Names[i] = s.Name
		t.Counts[i] = s.Dist.TotalCount
	}
	for _, point := range ComparePoints {
		row := TableRow{
			Label:      point.Label,
			Percentile: point.Percentile,
			ValuesUs:   make([]float64, len(series)),
			Ratios:     make([]float64, len(series)),
		}
		for i := range series {
			row.ValuesUs[i] = series[i].Dist.ValueUs(point.Percentile)
		}
		for i, v := range row.ValuesUs {
			row.Ratios[i] = ratio(v, row.ValuesUs[0])
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

func ratio(value, baseline float64) float64 {
	if baseline == 0 {
		return math.NaN()
	}
	return value / baseline
}

// WriteText renders the table with aligned columns: the percentile, each
// input's value in µs, then each non-baseline input's ratio to the
// baseline ("×" columns), and a final count row.
func (t Table) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "percentile\t")
	for _, name := range t.Names {
		fmt.Fprintf(tw, "%s µs\t", name)
	}
	for _, name := range t.Names[min(1, len(t.Names)):] {
		fmt.Fprintf(tw, "%s ×\t", name)
	}
	fmt.Fprintln(tw)
	for _, row := range t.Rows {
		fmt.Fprintf(tw, "%s\t", row.Label)
		for _, v := range row.ValuesUs {
			fmt.Fprintf(tw, "%s\t", formatUs(v))
		}
		for _, r := range row.Ratios[min(1, len(row.Ratios)):] {
			fmt.Fprintf(tw, "%s\t", formatRatio(r))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "count\t")
	for _, c := range t.Counts {
		fmt.Fprintf(tw, "%d\t", c)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// formatUs prints three significant digits at least and never hides the
// integer part, so 7.12, 71.2 and 7123 all read naturally.
func formatUs(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func formatRatio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}

// tableJSON is the JSON form: ratios are pointers so NaN becomes null.
type tableJSON struct {
	Baseline string         `json:"baseline"`
	Names    []string       `json:"names"`
	Counts   []int64        `json:"counts"`
	Rows     []tableRowJSON `json:"rows"`
}

type tableRowJSON struct {
	Label      string     `json:"label"`
	Percentile float64    `json:"percentile"`
	ValuesUs   []float64  `json:"values_us"`
	Ratios     []*float64 `json:"ratios"`
}

// MarshalJSON gives the table as {"baseline", "names", "counts", "rows":
// [{"label", "percentile", "values_us", "ratios"}]}; an undefined ratio is
// null.
func (t Table) MarshalJSON() ([]byte, error) {
	out := tableJSON{Names: t.Names, Counts: t.Counts, Rows: make([]tableRowJSON, len(t.Rows))}
	if len(t.Names) > 0 {
		out.Baseline = t.Names[0]
	}
	for i, row := range t.Rows {
		r := tableRowJSON{Label: row.Label, Percentile: row.Percentile, ValuesUs: row.ValuesUs, Ratios: make([]*float64, len(row.Ratios))}
		for k := range row.Ratios {
			if !math.IsNaN(row.Ratios[k]) && !math.IsInf(row.Ratios[k], 0) {
				r.Ratios[k] = &row.Ratios[k]
			}
		}
		out.Rows[i] = r
	}
	return json.Marshal(out)
}
