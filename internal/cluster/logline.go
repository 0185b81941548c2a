package cluster

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// LogLine is one parsed line of a node's or the witness's log (slog's
// text format): its time and its key=value fields.
type LogLine struct {
	At     time.Time
	Fields map[string]string
}

// FindLog returns the first line of log whose msg starts with msg,
// logged at or after after (zero: any; log times have millisecond
// precision, so a line up to 1 ms before counts), parsed. Values are
// key=value or key="quoted value".
func FindLog(log, msg string, after time.Time) (LogLine, bool) {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg="+msg) && !strings.Contains(line, `msg="`+msg) {
			continue
		}
		l := parseLogLine(line)
		if !after.IsZero() && l.At.Before(after.Add(-time.Millisecond)) {
			continue
		}
		return l, true
	}
	return LogLine{}, false
}

// FindLogFile is FindLog on the file at path (false when it cannot be
// read).
func FindLogFile(path, msg string, after time.Time) (LogLine, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return LogLine{}, false
	}
	return FindLog(string(b), msg, after)
}

// Duration parses the logged duration field key (0 when missing).
func (l LogLine) Duration(key string) time.Duration {
	d, _ := time.ParseDuration(l.Fields[key])
	return d
}

func parseLogLine(line string) LogLine {
	l := LogLine{Fields: map[string]string{}}
	rest := line
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			if uq, err := strconv.QuotedPrefix(after); err == nil {
				val, _ = strconv.Unquote(uq)
				rest = after[len(uq):]
			} else {
				val, rest = after, ""
			}
		} else {
			val, rest, _ = strings.Cut(after, " ")
		}
		l.Fields[key] = val
	}
	if ts, err := time.Parse(time.RFC3339Nano, l.Fields["time"]); err == nil {
		l.At = ts
	}
	return l
}
