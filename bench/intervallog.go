package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Interval log limits.
const (
	// IntervalLineBytesMax bounds one interval log line. A compressed
	// interval of a nanosecond histogram is a few kilobytes; a line longer
	// than this is not one, and SliceIntervalLog returns ErrTooLarge.
	IntervalLineBytesMax = 1 << 20
	// absoluteTimestampSecMin: a timestamp above a year of seconds is
	// taken as absolute (seconds since the epoch), as Java's reader does.
	absoluteTimestampSecMin = 365 * 24 * 3600.0
)

// IntervalLog writes an HdrHistogram interval log (format 1.3, the one
// Java's HistogramLogProcessor and HistogramLogAnalyzer read) through
// hdrhistogram-go's HistogramLogWriter, so a long run can be cut by time
// afterwards (SliceIntervalLog). Histograms written to it must record
// nanoseconds: the per-interval max column is printed in milliseconds (the
// writer's fixed ns→ms ratio, Java's convention too).
//
// Timestamps are relative to a whole-second base time written in the
// header, so they keep millisecond precision over long runs.
type IntervalLog struct {
	w          *hdrhistogram.HistogramLogWriter
	baseUnixMs int64 // whole seconds
	startNs    int64 // the run's start as an offset from baseUnixMs (the sub-second part)
}

// NewIntervalLog writes the log header: the comment (if any), the format
// version, the start time and base time, and the column legend. startUnixMs
// is the wall-clock start of the run (time.Now().UnixMilli() at the caller);
// interval offsets passed to Write are nanoseconds from that instant.
func NewIntervalLog(w io.Writer, startUnixMs int64, comment string) (*IntervalLog, error) {
	if startUnixMs < 0 {
		return nil, fmt.Errorf("%w: start time %d ms is before the epoch", ErrConfig, startUnixMs)
	}
	if strings.ContainsAny(comment, "\r\n") {
		return nil, fmt.Errorf("%w: interval log comment has a line break", ErrConfig)
	}
	base := startUnixMs - startUnixMs%1000
	l := &IntervalLog{
		w:          hdrhistogram.NewHistogramLogWriter(w),
		baseUnixMs: base,
		startNs:    (startUnixMs - base) * 1e6,
	}
	l.w.SetBaseTime(base)
	if comment != "" {
		if err := l.w.OutputComment("[" + comment + "]"); err != nil {
			return nil, err
		}
	}
	for _, step := range []func() error{
		l.w.OutputLogFormatVersion,
		// Java's layout, to the millisecond: the library's OutputStartTime
		// prints whole seconds only, which would shift every offset.
		func() error {
			iso := time.UnixMilli(startUnixMs).UTC().Format("2006-01-02T15:04:05.000Z07:00")
			return l.w.OutputComment(fmt.Sprintf("[StartTime: %d.%03d (seconds since epoch), %s]", startUnixMs/1000, startUnixMs%1000, iso))
		},
		func() error { return l.w.OutputBaseTime(base) },
		l.w.OutputLegend,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Write appends one interval: h holds the values recorded between
// startOffsetNs and endOffsetNs after the run's start. It stamps h's start
// and end times (milliseconds since the epoch) and keeps h's tag, which
// must not contain commas, spaces or line breaks.
func (l *IntervalLog) Write(h *hdrhistogram.Histogram, startOffsetNs, endOffsetNs int64) error {
	if startOffsetNs < 0 || endOffsetNs < startOffsetNs {
		return fmt.Errorf("%w: interval %d..%d ns", ErrConfig, startOffsetNs, endOffsetNs)
	}
	h.SetStartTimeMs(l.baseUnixMs + (l.startNs+startOffsetNs)/1e6)
	h.SetEndTimeMs(l.baseUnixMs + (l.startNs+endOffsetNs)/1e6)
	return l.w.OutputIntervalHistogram(h)
}

// SliceIntervalLog reads an interval log (ours or Java's) and merges the
// intervals that start within [fromSec, toSec) seconds of the log's start
// time into one histogram; it returns that histogram (nil when no interval
// matched) and the number of intervals merged. Values a merge cannot hold
// (different geometry, out of range) are counted in dropped.
func SliceIntervalLog(r io.Reader, fromSec, toSec float64) (merged *hdrhistogram.Histogram, intervals int, dropped int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var startSec, baseSec float64
	var sawStart, sawBase bool
	for lineNumber := 1; ; lineNumber++ {
		line, err := readLine(br, IntervalLineBytesMax)
		if errors.Is(err, io.EOF) {
			return merged, intervals, dropped, nil
		}
		if err != nil {
			return nil, 0, 0, err
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, `"`):
			continue // blank or the legend
		case strings.HasPrefix(line, "#[StartTime: "):
			startSec, sawStart = leadingSeconds(line[len("#[StartTime: "):])
			continue
		case strings.HasPrefix(line, "#[BaseTime: "):
			baseSec, sawBase = leadingSeconds(line[len("#[BaseTime: "):])
			continue
		case strings.HasPrefix(line, "#"):
			continue
		}
		if strings.HasPrefix(line, "Tag=") {
			_, rest, ok := strings.Cut(line, ",")
			if !ok {
				return nil, 0, 0, fmt.Errorf("%w: interval log line %d: tag without fields", ErrMalformed, lineNumber)
			}
			line = rest
		}
		fields := strings.SplitN(line, ",", 4)
		if len(fields) != 4 {
			return nil, 0, 0, fmt.Errorf("%w: interval log line %d: %d fields, want 4", ErrMalformed, lineNumber, len(fields))
		}
		stampSec, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(stampSec) || math.IsInf(stampSec, 0) {
			return nil, 0, 0, fmt.Errorf("%w: interval log line %d: timestamp %q", ErrMalformed, lineNumber, fields[0])
		}
		// Relative timestamps count from the base time (or, without one,
		// the start time); absolute ones are seconds since the epoch.
		absoluteSec := stampSec
		if stampSec < absoluteTimestampSecMin {
			switch {
			case sawBase:
				absoluteSec += baseSec
			case sawStart:
				absoluteSec += startSec
			}
		}
		if !sawStart {
			startSec, sawStart = absoluteSec, true
		}
		// Timestamps carry milliseconds; rounding to them removes the
		// float error of subtracting two epoch-sized numbers, so an
		// interval that starts on a boundary falls on the boundary.
		offsetSec := math.Round((absoluteSec-startSec)*1000) / 1000
		if offsetSec < fromSec || offsetSec >= toSec {
			continue
		}
		h, err := hdrhistogram.Decode([]byte(fields[3]))
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%w: interval log line %d: %v", ErrMalformed, lineNumber, err)
		}
		intervals++
		if merged == nil {
			merged = h
			continue
		}
		dropped += merged.Merge(h)
	}
}

// leadingSeconds parses the number at the start of s ("1700000000.123 (seconds…").
func leadingSeconds(s string) (float64, bool) {
	number, _, _ := strings.Cut(s, " ")
	f, err := strconv.ParseFloat(number, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// readLine reads one line of at most limitBytes without its line break;
// a longer line is ErrTooLarge. It returns io.EOF only when nothing is left.
func readLine(br *bufio.Reader, limitBytes int) (string, error) {
	var b strings.Builder
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && b.Len() > 0 {
				return b.String(), nil
			}
			return "", err
		}
		if b.Len()+len(chunk) > limitBytes {
			return "", fmt.Errorf("%w: interval log line longer than %d bytes", ErrTooLarge, limitBytes)
		}
		b.Write(chunk)
		if !isPrefix {
			return b.String(), nil
		}
	}
}
