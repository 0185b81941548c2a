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
