package bench

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// writeIntervals logs n one-second intervals; interval i holds i+1 values
// of (i+1) µs, so each slice's count and max say which intervals it took.
func writeIntervals(t *testing.T, n int, startUnixMs int64) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	log, err := NewIntervalLog(&buf, startUnixMs, "test run")
	if err != nil {
		t.Fatal(err)
	}
	h := newLatencyHistogram()
	for i := 0; i < n; i++ {
		h.Reset()
		for k := 0; k <= i; k++ {
			recordClamped(h, int64(i+1)*1000)
		}
		if err := log.Write(h, int64(i)*1e9, int64(i+1)*1e9); err != nil {
			t.Fatal(err)
		}
	}
	return &buf
}

func TestIntervalLogSlice(t *testing.T) {
	const start = 1_700_000_000_250 // a start that is not a whole second
	cases := []struct {
		fromSec, toSec float64
		intervals      int
		count          int64
		maxNs          int64
	}{
		{0, math.Inf(1), 5, 1 + 2 + 3 + 4 + 5, 5000},
		{0, 1, 1, 1, 1000},
		{1, 3, 2, 2 + 3, 3000},
		{4, 100, 1, 5, 5000},
		{5, 100, 0, 0, 0},
	}
	for _, tc := range cases {
		buf := writeIntervals(t, 5, start)
		h, intervals, dropped, err := SliceIntervalLog(buf, tc.fromSec, tc.toSec)
		if err != nil {
			t.Fatal(err)
		}
		if intervals != tc.intervals || dropped != 0 {
			t.Fatalf("[%v,%v): %d intervals (%d dropped), want %d", tc.fromSec, tc.toSec, intervals, dropped, tc.intervals)
		}
		if tc.intervals == 0 {
			if h != nil {
				t.Fatalf("[%v,%v): histogram for no intervals", tc.fromSec, tc.toSec)
			}
			continue
		}
		if h.TotalCount() != tc.count || !h.ValuesAreEquivalent(h.Max(), tc.maxNs) {
			t.Fatalf("[%v,%v): count %d max %d, want %d %d", tc.fromSec, tc.toSec, h.TotalCount(), h.Max(), tc.count, tc.maxNs)
		}
	}
}

// TestIntervalLogReadByLibrary: hdrhistogram-go's own reader (the Java
// format's reader) reads our log: same intervals, absolute times.
func TestIntervalLogReadByLibrary(t *testing.T) {
	const start = 1_700_000_000_250
	buf := writeIntervals(t, 3, start)
	text := buf.String()
	for _, want := range []string{"#[test run]", "#[Histogram log format version 1.3]", "#[StartTime: 1700000000.250 (seconds since epoch), 2023-11-14T22:13:20.250Z]", "#[BaseTime: 1700000000 ", `"StartTimestamp"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("header lacks %q:\n%s", want, text)
		}
	}
	r := hdrhistogram.NewHistogramLogReader(strings.NewReader(text))
	for i := 0; i < 3; i++ {
		h, err := r.NextIntervalHistogram()
		if err != nil || h == nil {
			t.Fatalf("interval %d: %v %v", i, h, err)
		}
		if h.TotalCount() != int64(i+1) {
			t.Fatalf("interval %d: count %d", i, h.TotalCount())
		}
		if wantMs := int64(start) + int64(i)*1000; h.StartTimeMs() != wantMs {
			t.Fatalf("interval %d: start %d ms, want %d", i, h.StartTimeMs(), wantMs)
		}
	}
}

func TestIntervalLogRejects(t *testing.T) {
	if _, err := NewIntervalLog(&bytes.Buffer{}, -1, ""); !errors.Is(err, ErrConfig) {
		t.Fatalf("negative start: %v", err)
	}
	if _, err := NewIntervalLog(&bytes.Buffer{}, 0, "a\nb"); !errors.Is(err, ErrConfig) {
		t.Fatalf("comment with newline: %v", err)
	}
	log, _ := NewIntervalLog(&bytes.Buffer{}, 0, "")
	if err := log.Write(newLatencyHistogram(), 10, 5); !errors.Is(err, ErrConfig) {
		t.Fatalf("end before start: %v", err)
	}
	for name, text := range map[string]string{
		"three fields": "1.0,2.0,3.0\n",
		"bad stamp":    "x,1.0,2.0,HISTFAAA\n",
		"bad payload":  "1.0,1.0,2.0,notbase64\n",
		"tag only":     "Tag=abc\n",
	} {
		if _, _, _, err := SliceIntervalLog(strings.NewReader(text), 0, math.Inf(1)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	long := strings.Repeat("1", IntervalLineBytesMax+1)
	if _, _, _, err := SliceIntervalLog(strings.NewReader(long), 0, 1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long line: %v", err)
	}
}
