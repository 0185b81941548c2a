package status

import (
	"fmt"
	"strings"
	"testing"
)

// TestDropWatch: a watched drop counter that rose warns at once, then at
// most once a minute with the drops since its last warning; one that
// did not rise says nothing.
func TestDropWatch(t *testing.T) {
	var w dropWatch
	var got []string
	warn := func(msg string, args ...any) { got = append(got, fmt.Sprint(msg, args)) }
	st := &Status{}
	step := func(uptimeSec int64, unknown, noMAC uint64) {
		st.UptimeNs, st.Node.DropUnknownNode, st.Node.DropNoMAC = uptimeSec*1e9, unknown, noMAC
		w.note(st, warn)
	}
	step(1, 0, 0)
	if len(got) != 0 {
		t.Fatalf("warned with nothing dropped: %q", got)
	}
	step(2, 5, 0)
	step(3, 9, 0)  // within the minute: quiet
	step(70, 9, 0) // did not rise: quiet
	step(71, 12, 2)
	if len(got) != 3 || !strings.Contains(got[0], "wrong --id") || !strings.Contains(got[0], "since_last_warning 5") ||
		!strings.Contains(got[1], "since_last_warning 7 total 12") || !strings.Contains(got[2], "without --key") {
		t.Fatalf("warnings %q", got)
	}
}
