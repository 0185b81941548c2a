package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
	"pgregory.net/rapid"
)

// latencyLike fills a nanosecond histogram with a floor-like shape: a body
// near 7 µs and a long tail, deterministic.
func latencyLike(count int) *hdrhistogram.Histogram {
	h := newLatencyHistogram()
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < count; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		u := float64(x>>11) / (1 << 53)
		// Pareto-ish tail over a 6 µs floor.
		v := 6000 + 1500*u + 200/math.Max(1e-6, 1-u)
		recordClamped(h, int64(v))
	}
	return h
}

// TestHGRMRoundTrip: what WriteHGRM prints, ReadHGRM reads back as the
// same distribution FromHistogram builds, and every printed row is the
// histogram's own value at that percentile (to the printed nanosecond).
func TestHGRMRoundTrip(t *testing.T) {
	for _, count := range []int{1, 2, 10, 1000, 100_000} {
		h := latencyLike(count)
		var buf bytes.Buffer
		if err := WriteHGRM(&buf, h, NsPerUs); err != nil {
			t.Fatal(err)
		}
		got, err := ReadHGRM(&buf)
		if err != nil {
			t.Fatalf("count %d: %v", count, err)
		}
		want := FromHistogram(h, NsPerUs)
		assertSameDistribution(t, got, want, 0.0005) // printed with 3 decimals
		// Each row is the value at its percentile in the iterator's sense
		// (the first value whose cumulative count reaches it), which is
		// within one rank above ValueAtPercentile's rounded rank.
		for _, row := range got.Rows {
			lowUs := float64(h.ValueAtPercentile(row.Percentile*100)) / NsPerUs
			highUs := float64(h.ValueAtPercentile(min(100, row.Percentile*100+100/float64(count)))) / NsPerUs
			if row.ValueUs < lowUs-0.0005 || row.ValueUs > highUs+0.0005 {
				t.Fatalf("count %d: row at %v prints %v, histogram says %v..%v", count, row.Percentile, row.ValueUs, lowUs, highUs)
			}
		}
		// The standard percentiles read from the file bracket the exact
		// value: never below it, never above the next printed tick.
		for _, p := range ComparePoints {
			exactUs := float64(h.ValueAtPercentile(p.Percentile)) / NsPerUs
			if p.Percentile == 100 {
				exactUs = float64(h.Max()) / NsPerUs
			}
			if v := got.ValueUs(p.Percentile); v < exactUs-0.0005 {
				t.Fatalf("count %d: %s = %v below exact %v", count, p.Label, v, exactUs)
			}
		}
		if count >= 1000 {
			// Ticks: p50 and p90 are printed exactly.
			for _, p := range []float64{50, 90} {
				exactUs := float64(h.ValueAtPercentile(p)) / NsPerUs
				if v := got.ValueUs(p); math.Abs(v-exactUs) > 0.0005 {
					t.Fatalf("count %d: p%v = %v, exact %v", count, p, v, exactUs)
				}
			}
		}
	}
}

func assertSameDistribution(t *testing.T, got, want Distribution, slack float64) {
	t.Helper()
	if len(got.Rows) != len(want.Rows) {
		t.Fatalf("rows: got %d, want %d", len(got.Rows), len(want.Rows))
	}
	for i := range got.Rows {
		g, w := got.Rows[i], want.Rows[i]
		if math.Abs(g.ValueUs-w.ValueUs) > slack || math.Abs(g.Percentile-w.Percentile) > 1e-12 || g.TotalCount != w.TotalCount {
			t.Fatalf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	if got.TotalCount != want.TotalCount || got.Buckets != want.Buckets || got.SubBuckets != want.SubBuckets {
		t.Fatalf("footer: got %d/%d/%d, want %d/%d/%d", got.TotalCount, got.Buckets, got.SubBuckets, want.TotalCount, want.Buckets, want.SubBuckets)
	}
	for _, pair := range [][2]float64{{got.MaxUs, want.MaxUs}, {got.MeanUs, want.MeanUs}, {got.StdDeviationUs, want.StdDeviationUs}} {
		if math.Abs(pair[0]-pair[1]) > slack {
			t.Fatalf("footer values: got %+v, want %+v", got, want)
		}
	}
}

// TestHGRMJavaLayout pins the exact Java layout: header, row and last-row
// formats, footer.
func TestHGRMJavaLayout(t *testing.T) {
	h := newLatencyHistogram()
	for _, v := range []int64{1000, 2000, 3000, 4000} {
		recordClamped(h, v)
	}
	var buf bytes.Buffer
	if err := WriteHGRM(&buf, h, NsPerUs); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"       Value     Percentile TotalCount 1/(1-Percentile)\n" +
		"\n" +
		"       1.000 0.000000000000          1           1.00\n" +
		"       1.000 0.100000000000          1           1.11\n" +
		"       1.000 0.200000000000          1           1.25\n" +
		"       2.000 0.300000000000          2           1.43\n" +
		"       2.000 0.400000000000          2           1.67\n" +
		"       2.000 0.500000000000          2           2.00\n" +
		"       3.001 0.550000000000          3           2.22\n" +
		"       3.001 0.600000000000          3           2.50\n" +
		"       3.001 0.650000000000          3           2.86\n" +
		"       3.001 0.700000000000          3           3.33\n" +
		"       3.001 0.750000000000          3           4.00\n" +
		"       4.001 0.775000000000          4           4.44\n" +
		"       4.001 1.000000000000          4\n" +
		"#[Mean    =        2.501, StdDeviation   =        1.118]\n" +
		"#[Max     =        4.001, Total count    =            4]\n" +
		"#[Buckets =           26, SubBuckets     =         2048]\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// TestGeometryMatchesLibrary: the footer's Buckets/SubBuckets equal what
// hdrhistogram-go's own PercentilesPrint prints, across geometries.
func TestGeometryMatchesLibrary(t *testing.T) {
	for _, g := range []struct {
		low, high int64
		sig       int
	}{
		{1, HistogramHighestNs, 3}, {1, 3_600_000_000_000, 3}, {1, 1000, 1}, {1000, 1 << 40, 2},
		{1, 1 << 62, 5}, {7, 123456789, 4},
	} {
		h := hdrhistogram.New(g.low, g.high, g.sig)
		recordClamped(h, 10)
		var lib bytes.Buffer
		if _, err := h.PercentilesPrint(&lib, 5, 1); err != nil {
			t.Fatal(err)
		}
		d, err := ReadHGRM(&lib) // also: we read the library's tab layout
		if err != nil {
			t.Fatal(err)
		}
		b, sb := geometry(h)
		if b != d.Buckets || sb != d.SubBuckets {
			t.Fatalf("%+v: geometry %d/%d, library %d/%d", g, b, sb, d.Buckets, d.SubBuckets)
		}
	}
}

// TestReadJavaSample reads a distribution in Java's layout (testdata,
// written to the byte in its format: 100000 values in µs, 3 digits).
func TestReadJavaSample(t *testing.T) {
	f, err := os.Open("testdata/java-floor.hgrm")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ReadHGRM(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rows) != 86 || d.TotalCount != 100000 || d.MaxUs != 412.415 || d.MeanUs != 7.664 ||
		d.StdDeviationUs != 4.218 || d.Buckets != 32 || d.SubBuckets != 2048 {
		t.Fatalf("footer or rows: %d rows, %+v", len(d.Rows), Distribution{TotalCount: d.TotalCount, MaxUs: d.MaxUs, MeanUs: d.MeanUs, Buckets: d.Buckets, SubBuckets: d.SubBuckets})
	}
	for _, tc := range []struct {
		percentile, wantUs float64
	}{
		{0, 6.143}, {50, 7.199}, {90, 7.839}, {99, 13.951}, {99.9, 52.479}, {99.99, 268.543}, {99.985, 199.807}, {100, 412.415}, {99.99999, 412.415},
	} {
		if got := d.ValueUs(tc.percentile); got != tc.wantUs {
			t.Errorf("p%v = %v, want %v", tc.percentile, got, tc.wantUs)
		}
	}
}

// TestReadOtherLayouts: the CSV form, wrk2's spectrum inside its report,
// C/Go "inf" last rows and a file without footer.
func TestReadOtherLayouts(t *testing.T) {
	cases := []struct {
		name       string
		text       string
		rows       int
		maxUs      float64
		totalCount int64
		p50Us      float64
	}{
		{"csv", `"Value","Percentile","TotalCount","1/(1-Percentile)"
1.000,0.000000000000,1,1.00
2.001,0.500000000000,2,2.00
4.003,1.000000000000,4,Infinity
`, 3, 4.003, 4, 2.001},
		{"wrk2", `Running 30s test @ http://127.0.0.1:80/
  Latency Distribution (HdrHistogram - Recorded Latency)
 50.000%    1.17ms
  Detailed Percentile spectrum:
       Value   Percentile   TotalCount 1/(1-Percentile)

       0.521     0.000000            1         1.00
       1.170     0.500000        14953         2.00
       3.559     1.000000        29906          inf
#[Mean    =        1.234, StdDeviation   =        0.456]
#[Max     =        3.558, Total count    =        29906]
#[Buckets =           27, SubBuckets     =         2048]
----------------------------------------------------------
  29906 requests in 30.00s, 9.36MB read
Requests/sec:    997.16
`, 3, 3.558, 29906, 1.170},
		{"no footer", `       Value     Percentile TotalCount 1/(1-Percentile)

       1.000 0.000000000000          1           1.00
       9.000 1.000000000000          7
`, 2, 9, 7, 9},
		{"empty histogram", `       Value     Percentile TotalCount 1/(1-Percentile)

#[Mean    =        0.000, StdDeviation   =        0.000]
#[Max     =        0.000, Total count    =            0]
#[Buckets =           26, SubBuckets     =         2048]
`, 0, 0, 0, 0},
		{"crlf", "Value Percentile TotalCount 1/(1-Percentile)\r\n\r\n1.5 0.5 1 2.00\r\n2.5 1.0 2\r\n", 2, 2.5, 2, 1.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ReadHGRM(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Rows) != tc.rows || d.MaxUs != tc.maxUs || d.TotalCount != tc.totalCount || d.ValueUs(50) != tc.p50Us {
				t.Fatalf("got %d rows max %v count %d p50 %v", len(d.Rows), d.MaxUs, d.TotalCount, d.ValueUs(50))
			}
		})
	}
}

// TestReadHGRMRejects: one case per rule of ReadHGRM.
func TestReadHGRMRejects(t *testing.T) {
	const header = "Value Percentile TotalCount 1/(1-Percentile)\n\n"
	cases := []struct {
		name string
		text string
		want error
	}{
		{"empty", "", ErrNoHeader},
		{"no header", "1.0 0.5 1 2.00\n", ErrNoHeader},
		{"interval log", "#[StartTime: 1 (seconds since epoch)]\n0.1,1.0,2.0,HISTFAAA\n", ErrNoHeader},
		{"too few fields", header + "1.0 0.5\n", ErrMalformed},
		{"too many fields", header + "1.0 0.5 1 2.0 9\n", ErrMalformed},
		{"value not a number", header + "x 0.5 1 2.0\n", ErrMalformed},
		{"value negative", header + "-1 0.5 1 2.0\n", ErrMalformed},
		{"value NaN", header + "NaN 0.5 1 2.0\n", ErrMalformed},
		{"value inf", header + "inf 0.5 1 2.0\n", ErrMalformed},
		{"percentile above 1", header + "1 1.5 1 2.0\n", ErrMalformed},
		{"percentile negative", header + "1 -0.1 1 2.0\n", ErrMalformed},
		{"percentile NaN", header + "1 NaN 1 2.0\n", ErrMalformed},
		{"count negative", header + "1 0.5 -1 2.0\n", ErrMalformed},
		{"count fractional", header + "1 0.5 1.5 2.0\n", ErrMalformed},
		{"inverse garbage", header + "1 0.5 1 abc\n", ErrMalformed},
		{"value backwards", header + "2 0.1 1 1.1\n1 0.2 2 1.2\n", ErrMalformed},
		{"percentile backwards", header + "1 0.2 1 1.2\n2 0.1 2 1.1\n", ErrMalformed},
		{"count backwards", header + "1 0.1 2 1.1\n2 0.2 1 1.2\n", ErrMalformed},
		{"footer max bad", header + "#[Max     = abc, Total count    = 1]\n", ErrMalformed},
		{"footer count negative", header + "#[Max     = 1.0, Total count    = -1]\n", ErrMalformed},
		{"footer mean NaN", header + "#[Mean    = NaN, StdDeviation   = 1]\n", ErrMalformed},
		{"line too long", header + strings.Repeat("1", HGRMLineBytesMax+1) + "\n", ErrTooLarge},
		{"too many rows", header + strings.Repeat("1 0.5 1 2.00\n", HGRMRowsMax+1), ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadHGRM(strings.NewReader(tc.text))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestReadHGRMPrefixes: every prefix of a real file is read or refused,
// never a panic, and a refusal is one of the sentinels.
func TestReadHGRMPrefixes(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHGRM(&buf, latencyLike(1000), NsPerUs); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	for i := range data {
		_, err := ReadHGRM(bytes.NewReader(data[:i]))
		if err != nil && !errors.Is(err, ErrNoHeader) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix %d: unexpected error %v", i, err)
		}
	}
}

// TestValueUs: the step lookup rules.
func TestValueUs(t *testing.T) {
	d := Distribution{
		Rows:  []Row{{1, 0, 1}, {2, 0.5, 5}, {3, 0.9, 9}, {4, 0.990625, 10}, {5, 1, 11}},
		MaxUs: 5,
	}
	cases := []struct{ percentile, want float64 }{
		{0, 1}, {0.0001, 2}, {50, 2}, {50.1, 3}, {90, 3}, {99, 4}, {99.5, 5}, {100, 5}, {150, 5}, {-1, 1},
	}
	for _, tc := range cases {
		if got := d.ValueUs(tc.percentile); got != tc.want {
			t.Errorf("ValueUs(%v) = %v, want %v", tc.percentile, got, tc.want)
		}
	}
	if got := (&Distribution{}).ValueUs(50); got != 0 {
		t.Errorf("empty: %v", got)
	}
	scaled := d.Scaled(1000)
	if scaled.ValueUs(50) != 2000 || scaled.MaxUs != 5000 || d.ValueUs(50) != 2 {
		t.Errorf("Scaled: %v %v (original %v)", scaled.ValueUs(50), scaled.MaxUs, d.ValueUs(50))
	}
}

// TestHGRMRoundTripProperty: any histogram of any values and ratio
// round-trips through the text with every row intact.
func TestHGRMRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Geometries kept small: each check scans every count several
		// times, and under -race a 60 s, 4-digit histogram takes a second.
		sig := rapid.IntRange(1, 3).Draw(t, "sig")
		highest := rapid.SampledFrom([]int64{1e6, 1e9}).Draw(t, "highest")
		h := hdrhistogram.New(1, highest, sig)
		values := rapid.SliceOfN(rapid.Int64Range(1, highest), 1, 300).Draw(t, "values")
		for _, v := range values {
			if err := h.RecordValue(v); err != nil {
				t.Fatal(err)
			}
		}
		ratio := rapid.SampledFrom([]float64{UsPerUs, NsPerUs, 1e6}).Draw(t, "ratio")
		var buf bytes.Buffer
		if err := WriteHGRM(&buf, h, ratio); err != nil {
			t.Fatal(err)
		}
		got, err := ReadHGRM(&buf)
		if err != nil {
			t.Fatal(err)
		}
		want := FromHistogram(h, ratio)
		slack := 0.5 * math.Pow10(-sig) // printed with sig decimals
		if len(got.Rows) != len(want.Rows) || got.TotalCount != int64(len(values)) {
			t.Fatalf("rows %d/%d count %d", len(got.Rows), len(want.Rows), got.TotalCount)
		}
		for i := range got.Rows {
			if math.Abs(got.Rows[i].ValueUs-want.Rows[i].ValueUs) > slack*1.0001 || got.Rows[i].TotalCount != want.Rows[i].TotalCount {
				t.Fatalf("row %d: %+v vs %+v", i, got.Rows[i], want.Rows[i])
			}
		}
		if math.Abs(got.MaxUs-want.MaxUs) > slack*1.0001 {
			t.Fatalf("max %v vs %v", got.MaxUs, want.MaxUs)
		}
	})
}

// FuzzReadHGRM: no input panics or is accepted inconsistent; what is
// accepted survives a second read of its own rows.
func FuzzReadHGRM(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteHGRM(&buf, latencyLike(100), NsPerUs)
	f.Add(buf.Bytes())
	if sample, err := os.ReadFile("testdata/java-floor.hgrm"); err == nil {
		f.Add(sample)
	}
	f.Add([]byte("\"Value\",\"Percentile\",\"TotalCount\",\"1/(1-Percentile)\"\n1,0.5,1,2\n"))
	f.Add([]byte("Value Percentile TotalCount 1/(1-Percentile)\n#[Max = 1, Total count = 2]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadHGRM(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrNoHeader) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if len(d.Rows) > HGRMRowsMax {
			t.Fatalf("%d rows", len(d.Rows))
		}
		for i, r := range d.Rows {
			if r.ValueUs < 0 || math.IsNaN(r.ValueUs) || math.IsInf(r.ValueUs, 0) || !(r.Percentile >= 0 && r.Percentile <= 1) || r.TotalCount < 0 {
				t.Fatalf("row %d accepted: %+v", i, r)
			}
			if i > 0 && (r.ValueUs < d.Rows[i-1].ValueUs || r.Percentile < d.Rows[i-1].Percentile) {
				t.Fatalf("row %d goes backwards", i)
			}
		}
		for _, p := range ComparePoints {
			if v := d.ValueUs(p.Percentile); math.IsNaN(v) || v < 0 {
				t.Fatalf("ValueUs(%v) = %v", p.Percentile, v)
			}
		}
	})
}
