package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// flat is a distribution whose every percentile reads valueUs, except the
// max.
func flat(valueUs, maxUs float64, count int64) Distribution {
	return Distribution{
		Rows:       []Row{{valueUs, 0, 1}, {valueUs, 0.99999, count}, {maxUs, 1, count}},
		MaxUs:      maxUs,
		TotalCount: count,
	}
}

func TestCompareRatios(t *testing.T) {
	table, err := Compare([]Named{
		{"floor", flat(10, 100, 1000)},
		{"gated", flat(25, 150, 2000)},
		{"same", flat(10, 100, 3000)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != len(ComparePoints) || strings.Join(table.Names, ",") != "floor,gated,same" {
		t.Fatalf("table shape: %+v", table)
	}
	for i, row := range table.Rows {
		if row.Label != ComparePoints[i].Label {
			t.Fatalf("row %d is %s", i, row.Label)
		}
		wantGated, wantFloor := 2.5, 10.0
		if row.Label == "max" {
			wantGated, wantFloor = 1.5, 100
		}
		if row.ValuesUs[0] != wantFloor || row.Ratios[0] != 1 || row.Ratios[1] != wantGated || row.Ratios[2] != 1 {
			t.Fatalf("%s: values %v ratios %v", row.Label, row.ValuesUs, row.Ratios)
		}
	}
	if table.Counts[1] != 2000 {
		t.Fatalf("counts %v", table.Counts)
	}
	data, err := json.Marshal(table)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows []struct{ Ratios []float64 }
	}
	if err := json.Unmarshal(data, &back); err != nil || back.Rows[0].Ratios[1] != 2.5 || back.Rows[5].Ratios[1] != 1.5 {
		t.Fatalf("JSON ratios: %v %s", err, data)
	}
}

func TestCompareText(t *testing.T) {
	table, err := Compare([]Named{{"floor", flat(7.1234, 71.2, 10)}, {"gated", flat(19.2, 7123, 10)}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := table.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 1+len(ComparePoints)+1 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"floor µs", "gated µs", "gated ×", "7.12", "19.2", "2.70×", "7123", "100.04×", "count"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("text lacks %q:\n%s", want, buf.String())
		}
	}
	// Right-aligned columns: every percentile line has the header's width.
	width := len([]rune(lines[0]))
	for _, l := range lines[:len(lines)-1] {
		if len([]rune(l)) != width {
			t.Fatalf("ragged table:\n%s", buf.String())
		}
	}
}

func TestCompareJSON(t *testing.T) {
	table, err := Compare([]Named{{"zero", flat(0, 0, 0)}, {"b", flat(5, 9, 3)}})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(table.Rows[0].Ratios[1]) {
		t.Fatalf("ratio to a zero baseline: %v", table.Rows[0].Ratios[1])
	}
	data, err := json.Marshal(table)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Baseline string
		Names    []string
		Counts   []int64
		Rows     []struct {
			Label    string
			ValuesUs []float64 `json:"values_us"`
			Ratios   []*float64
		}
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Baseline != "zero" || len(got.Rows) != len(ComparePoints) || got.Rows[0].Ratios[1] != nil || got.Rows[0].ValuesUs[1] != 5 || got.Counts[1] != 3 {
		t.Fatalf("json: %s", data)
	}
}

func TestCompareRejects(t *testing.T) {
	many := make([]Named, CompareSeriesMax+1)
	for i := range many {
		many[i].Name = "x"
	}
	for name, in := range map[string][]Named{"none": nil, "unnamed": {{Name: ""}}, "too many": many} {
		if _, err := Compare(in); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
