package demo

import (
	"strings"
	"testing"
	"time"
)

// The demo's progress line gives p99 in whole µs, above a millisecond
// too (a Duration's %v printed "p99=1.5ms").
func TestProgressLineMicros(t *testing.T) {
	for _, c := range []struct {
		p99  time.Duration
		want string
	}{
		{1500 * time.Microsecond, "p99=1500µs"},
		{412 * time.Microsecond, "p99=412µs"},
		{2*time.Second + 400*time.Nanosecond, "p99=2000000µs"},
		{0, "p99=0µs"},
	} {
		line := progressLine(2500*time.Millisecond, 3000, 1, 2, 7000, c.p99)
		if !strings.HasSuffix(line, c.want) || !strings.HasPrefix(line, "  2.5s") {
			t.Errorf("p99 %v: %q, want it to end %q", c.p99, line, c.want)
		}
	}
}

// Between the kill and the promotion no node leads: the line says so
// instead of naming "node0" at epoch 0, and a half second without an
// answer has no p99 (not "0µs").
func TestProgressLineNoPrimary(t *testing.T) {
	line := progressLine(3500*time.Millisecond, 0, 0, 0, 0, 0)
	if !strings.Contains(line, "primary=none") || strings.Contains(line, "node0") || !strings.HasSuffix(line, "p99=-") {
		t.Errorf("no primary: %q", line)
	}
	led := progressLine(3500*time.Millisecond, 2000, 2, 2, 22413, 900*time.Microsecond)
	if !strings.Contains(led, "primary=node2 epoch=2 released=22413") || !strings.HasSuffix(led, "p99=900µs") {
		t.Errorf("a primary: %q", led)
	}
	if a, b := strings.Index(line, "p99="), strings.Index(led, "p99="); a != b {
		t.Errorf("the p99 column moves: at %d and %d\n%s\n%s", a, b, line, led)
	}
}
