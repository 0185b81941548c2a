package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Percentile-distribution (.hgrm) format limits and conventions.
const (
	// TicksPerHalfDistance is how many rows the writer prints for every
	// halving of the distance to 100%: 5 is what HdrHistogram's Java tools
	// (and wrk2) print, so files diff and plot like theirs.
	TicksPerHalfDistance = 5

	// NsPerUs is the value-unit ratio for histograms that record
	// nanoseconds: WriteHGRM divides by it to print microseconds.
	NsPerUs = 1000.0
	// UsPerUs is the ratio for histograms that already record microseconds.
	UsPerUs = 1.0

	// HGRMRowsMax bounds the rows ReadHGRM accepts. A histogram of 10^12
	// values prints about 5·2·log2(10^12) ≈ 400 rows at 5 ticks per half
	// distance, so a file with more is not one; beyond it ReadHGRM returns
	// ErrTooLarge instead of growing without bound.
	HGRMRowsMax = 1 << 16
	// HGRMLineBytesMax bounds one line; longer lines are ErrTooLarge.
	HGRMLineBytesMax = 4096
)

// hgrmHeaderFields are the four column titles, in every tool's output.
var hgrmHeaderFields = [4]string{"Value", "Percentile", "TotalCount", "1/(1-Percentile)"}

// Row is one line of a percentile distribution: TotalCount values were at
// or below ValueUs, which is the value at Percentile.
type Row struct {
	ValueUs float64 `json:"value_us"`
	// Percentile is a fraction in 0..1, as the file prints it (0.99 is p99).
	Percentile float64 `json:"percentile"`
	TotalCount int64   `json:"total_count"`
}

// Distribution is a percentile distribution as an .hgrm file holds it: the
// rows and the footer. Values are in the file's unit; files this package
// writes are in microseconds, and so, by convention, are the files the
// lead's tools compare (Java tools print whatever unit ratio they were
// given: rescale with Scaled if a file is in another unit).
type Distribution struct {
	Rows           []Row   `json:"rows"`
	MeanUs         float64 `json:"mean_us"`
	StdDeviationUs float64 `json:"std_deviation_us"`
	MaxUs          float64 `json:"max_us"`
	TotalCount     int64   `json:"total_count"`
	// Buckets and SubBuckets are the histogram's geometry from the footer
	// (0 when the file had none, as in the CSV form).
	Buckets    int `json:"buckets"`
	SubBuckets int `json:"sub_buckets"`
}

// ValueUs returns the value at percentile (0..100, as hdrhistogram's
// ValueAtPercentile takes it): the value of the first row at or above that
// percentile. Between the printed ticks it is therefore an upper bound,
// exact at the ticks (p50 and p90 are ticks; p99 reads the 99.0625% row,
// p99.9 the 99.902% row); at or above 100, and past the last row, it is the
// maximum. An empty distribution returns 0.
func (d *Distribution) ValueUs(percentile float64) float64 {
	if len(d.Rows) == 0 {
		return d.MaxUs
	}
	if percentile >= 100 {
		return d.MaxUs
	}
	fraction := percentile / 100
	// The file prints percentiles with 12 decimals: a tick that is exactly
	// the asked percentile may print a hair below it.
	const printedSlack = 1e-10
	i := sort.Search(len(d.Rows), func(i int) bool { return d.Rows[i].Percentile >= fraction-printedSlack })
	if i == len(d.Rows) {
		return d.MaxUs
	}
	return d.Rows[i].ValueUs
}

// Scaled returns a copy with every value multiplied by factor, for files
// written in another unit (factor 1000 reads a millisecond file as µs).
func (d *Distribution) Scaled(factor float64) Distribution {
	out := *d
	out.Rows = make([]Row, len(d.Rows))
	for i, r := range d.Rows {
		r.ValueUs *= factor
		out.Rows[i] = r
	}
	out.MeanUs *= factor
	out.StdDeviationUs *= factor
	out.MaxUs *= factor
	return out
}

// FromHistogram builds the Distribution that WriteHGRM would print for h,
// without printing it: the same rows (5 ticks per half distance), values
// divided by valueUnitRatio (NsPerUs for a nanosecond histogram).
func FromHistogram(h *hdrhistogram.Histogram, valueUnitRatio float64) Distribution {
	checkRatio(valueUnitRatio)
	buckets, subBuckets := geometry(h)
	d := Distribution{
		MeanUs:         h.Mean() / valueUnitRatio,
		StdDeviationUs: h.StdDev() / valueUnitRatio,
		MaxUs:          float64(h.Max()) / valueUnitRatio,
		TotalCount:     h.TotalCount(),
		Buckets:        buckets,
		SubBuckets:     subBuckets,
	}
	if h.TotalCount() == 0 {
		return d
	}
	for _, b := range h.CumulativeDistributionWithTicks(TicksPerHalfDistance) {
		d.Rows = append(d.Rows, Row{
			ValueUs:    float64(b.ValueAt) / valueUnitRatio,
			Percentile: b.Quantile / 100,
			TotalCount: b.Count,
		})
	}
	return d
}

func checkRatio(valueUnitRatio float64) {
	if !(valueUnitRatio > 0) || math.IsInf(valueUnitRatio, 0) {
		// A programmer error: the ratio is a constant of the caller's.
		panic(fmt.Sprintf("bench: value unit ratio %v is not a positive number", valueUnitRatio))
	}
}

// geometry recomputes the histogram's bucket and sub-bucket counts, which
// hdrhistogram-go does not export but the .hgrm footer prints. It follows
// hdrhistogram-go's (and Java's) construction; TestGeometryMatchesLibrary
// checks it against the library's own PercentilesPrint footer.
func geometry(h *hdrhistogram.Histogram) (buckets, subBuckets int) {
	sig := int(h.SignificantFigures())
	largestSingleUnit := 2 * math.Pow10(sig)
	subBucketCountMagnitude := int(math.Ceil(math.Log2(largestSingleUnit)))
	subBucketHalfCountMagnitude := max(subBucketCountMagnitude, 1) - 1
	unitMagnitude := max(int(math.Floor(math.Log2(float64(max(h.LowestTrackableValue(), 1))))), 0)
	subBucketCount := 1 << (subBucketHalfCountMagnitude + 1)
	smallestUntrackable := int64(subBucketCount) << unitMagnitude
	buckets = 1
	for smallestUntrackable <= h.HighestTrackableValue() {
		if smallestUntrackable > math.MaxInt64/2 {
			buckets++
			break
		}
		smallestUntrackable <<= 1
		buckets++
	}
	return buckets, subBucketCount
}

// WriteHGRM writes h as HdrHistogram's percentile distribution text, byte
// for byte the layout of Java's outputPercentileDistribution (what
// plotFiles.html, HistogramLogAnalyzer and wrk2 users read): the header,
// one row per tick at 5 ticks per half distance with values divided by
// valueUnitRatio and printed with as many decimals as h has significant
// digits, the 100% row without its infinite last column, and the
// Mean/Max/Buckets footer. Record nanoseconds and pass NsPerUs to print µs.
func WriteHGRM(w io.Writer, h *hdrhistogram.Histogram, valueUnitRatio float64) error {
	checkRatio(valueUnitRatio)
	decimals := int(h.SignificantFigures())
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%12s %14s %10s %14s\n\n", hgrmHeaderFields[0], hgrmHeaderFields[1], hgrmHeaderFields[2], hgrmHeaderFields[3])
	if h.TotalCount() > 0 {
		for _, b := range h.CumulativeDistributionWithTicks(TicksPerHalfDistance) {
			value := float64(b.ValueAt) / valueUnitRatio
			fraction := b.Quantile / 100
			if b.Quantile == 100 {
				fmt.Fprintf(bw, "%12.*f %2.12f %10d\n", decimals, value, fraction, b.Count)
				continue
			}
			fmt.Fprintf(bw, "%12.*f %2.12f %10d %14.2f\n", decimals, value, fraction, b.Count, 1/(1-fraction))
		}
	}
	buckets, subBuckets := geometry(h)
	fmt.Fprintf(bw, "#[Mean    = %12.*f, StdDeviation   = %12.*f]\n", decimals, h.Mean()/valueUnitRatio, decimals, h.StdDev()/valueUnitRatio)
	fmt.Fprintf(bw, "#[Max     = %12.*f, Total count    = %12d]\n", decimals, float64(h.Max())/valueUnitRatio, h.TotalCount())
	fmt.Fprintf(bw, "#[Buckets = %12d, SubBuckets     = %12d]\n", buckets, subBuckets)
	return bw.Flush()
}

// ReadHGRM reads a percentile distribution written by WriteHGRM or by any
// HdrHistogram tool in the same format: Java's, C's and Go's
// PercentilesPrint (spaces or tabs), the CSV form ("Value","Percentile",…),
// and wrk2's "Detailed Percentile spectrum" (lines before the header and
// after the footer are ignored). The last column may be a number, "inf",
// "Infinity" or absent. Without a footer, MaxUs and TotalCount come from the
// last row.
//
// It reads untrusted input: every failure is an error (ErrNoHeader,
// ErrMalformed, ErrTooLarge), never a panic, and memory is bounded by
// HGRMRowsMax and HGRMLineBytesMax.
func ReadHGRM(r io.Reader) (Distribution, error) {
	var d Distribution
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), HGRMLineBytesMax)
	var (
		lineNumber int
		inRows     bool // the header was seen
		inFooter   bool // a footer line was seen; rows are over
		csv        bool
		sawMax     bool
		sawCount   bool
	)
	for sc.Scan() {
		lineNumber++
		line := strings.TrimSpace(sc.Text())
		if !inRows {
			if isHeader(line) {
				inRows = true
				csv = strings.Contains(line, ",")
			}
			continue
		}
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			inFooter = true
			found, err := readFooter(line, &d)
			if err != nil {
				return Distribution{}, fmt.Errorf("%w: line %d: %v", ErrMalformed, lineNumber, err)
			}
			sawMax = sawMax || found&footerMax != 0
			sawCount = sawCount || found&footerCount != 0
			continue
		}
		if inFooter {
			break // wrk2 prints more text after the footer
		}
		if len(d.Rows) >= HGRMRowsMax {
			return Distribution{}, fmt.Errorf("%w: more than %d rows", ErrTooLarge, HGRMRowsMax)
		}
		row, err := readRow(line, csv)
		if err != nil {
			return Distribution{}, fmt.Errorf("%w: line %d: %v", ErrMalformed, lineNumber, err)
		}
		if n := len(d.Rows); n > 0 {
			prev := d.Rows[n-1]
			if row.ValueUs < prev.ValueUs || row.Percentile < prev.Percentile || row.TotalCount < prev.TotalCount {
				return Distribution{}, fmt.Errorf("%w: line %d: row goes backwards", ErrMalformed, lineNumber)
			}
		}
		d.Rows = append(d.Rows, row)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Distribution{}, fmt.Errorf("%w: line %d longer than %d bytes", ErrTooLarge, lineNumber+1, HGRMLineBytesMax)
		}
		return Distribution{}, err
	}
	if !inRows {
		return Distribution{}, ErrNoHeader
	}
	if n := len(d.Rows); n > 0 {
		last := d.Rows[n-1]
		if !sawMax {
			d.MaxUs = last.ValueUs
		}
		if !sawCount {
			d.TotalCount = last.TotalCount
		}
	}
	return d, nil
}

// isHeader reports whether line is the column header, in either the
// space/tab-separated or the CSV form.
func isHeader(line string) bool {
	fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
	if len(fields) != len(hgrmHeaderFields) {
		return false
	}
	for i, f := range fields {
		if strings.Trim(f, `"`) != hgrmHeaderFields[i] {
			return false
		}
	}
	return true
}

func readRow(line string, csv bool) (Row, error) {
	var fields []string
	if csv {
		fields = strings.Split(line, ",")
	} else {
		fields = strings.Fields(line)
	}
	if len(fields) != 3 && len(fields) != 4 {
		return Row{}, fmt.Errorf("%d fields, want 3 or 4", len(fields))
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(fields[0]), 64)
	if err != nil || math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return Row{}, fmt.Errorf("value %q is not a finite non-negative number", fields[0])
	}
	percentile, err := strconv.ParseFloat(strings.TrimSpace(fields[1]), 64)
	if err != nil || !(percentile >= 0 && percentile <= 1) {
		return Row{}, fmt.Errorf("percentile %q is not in 0..1", fields[1])
	}
	count, err := strconv.ParseInt(strings.TrimSpace(fields[2]), 10, 64)
	if err != nil || count < 0 {
		return Row{}, fmt.Errorf("total count %q is not a non-negative integer", fields[2])
	}
	if len(fields) == 4 {
		// 1/(1-Percentile) carries nothing the percentile does not; it is
		// checked only so that a garbled line is not taken for a row.
		if _, err := strconv.ParseFloat(strings.TrimSpace(fields[3]), 64); err != nil {
			return Row{}, fmt.Errorf("1/(1-Percentile) %q is not a number", fields[3])
		}
	}
	return Row{ValueUs: value, Percentile: percentile, TotalCount: count}, nil
}

// Footer keys readFooter found, as bits.
const (
	footerMax = 1 << iota
	footerCount
)

// readFooter reads one "#[Key = value, Key = value]" line into d. Comment
// lines of other shapes are ignored; a known key with a bad value is an
// error.
func readFooter(line string, d *Distribution) (found int, err error) {
	body, ok := strings.CutPrefix(line, "#[")
	if !ok {
		return 0, nil
	}
	body, ok = strings.CutSuffix(body, "]")
	if !ok {
		return 0, nil
	}
	for _, part := range strings.Split(body, ",") {
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "Mean", "StdDeviation", "Max":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return found, fmt.Errorf("%s %q is not a finite non-negative number", key, value)
			}
			switch key {
			case "Mean":
				d.MeanUs = f
			case "StdDeviation":
				d.StdDeviationUs = f
			default:
				d.MaxUs = f
				found |= footerMax
			}
		case "Total count", "Buckets", "SubBuckets":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return found, fmt.Errorf("%s %q is not a non-negative integer", key, value)
			}
			switch key {
			case "Total count":
				d.TotalCount = n
				found |= footerCount
			case "Buckets":
				d.Buckets = int(min(n, math.MaxInt32))
			default:
				d.SubBuckets = int(min(n, math.MaxInt32))
			}
		}
	}
	return found, nil
}
