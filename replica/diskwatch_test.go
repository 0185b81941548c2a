package replica

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// A disk that makes nothing durable for the timeout while something
// waits is stalled, once; its first progress recovers it; a disk with
// nothing waiting never stalls, however long.
func TestDiskWatch(t *testing.T) {
	const ms = int64(1_000_000)
	w := NewDiskWatch(200 * ms)
	for at := int64(0); at < 900*ms; at += 10 * ms { // ticks, idle: nothing waits
		w.Observe(10, 10, at)
	}
	steps := []struct {
		written, durable uint64
		at               int64
		want             DiskEvent
		stalled          bool
	}{
		{10, 10, 900 * ms, DiskSteady, false},     // caught up
		{12, 10, 901 * ms, DiskSteady, false},     // a write waits from here
		{14, 11, 950 * ms, DiskSteady, false},     // progress: the wait restarts
		{15, 11, 1000 * ms, DiskSteady, false},    // 50 ms without progress
		{15, 11, 1049 * ms, DiskSteady, false},    // 99 ms
		{15, 11, 1099 * ms, DiskSteady, false},    // 149 ms
		{15, 11, 1149 * ms, DiskSteady, false},    // 199 ms
		{15, 11, 1150 * ms, DiskStalled, true},    // 200 ms: stalled
		{16, 11, 1190 * ms, DiskSteady, true},     // reported once
		{16, 13, 1200 * ms, DiskRecovered, false}, // progress recovers it
		{16, 16, 1210 * ms, DiskSteady, false},
		{20, 16, 1220 * ms, DiskSteady, false},
		{20, 5, 1230 * ms, DiskSteady, false}, // the journal cut back: the watch starts over
		{20, 5, 1280 * ms, DiskSteady, false},
		{20, 5, 1330 * ms, DiskSteady, false},
		{20, 5, 1380 * ms, DiskSteady, false},
		{20, 5, 1429 * ms, DiskSteady, false}, // 199 ms since the cut
		{20, 5, 1430 * ms, DiskStalled, true},
		{20, 9, 1440 * ms, DiskRecovered, false},
		{21, 9, 1450 * ms, DiskSteady, false}, // waits from 1440 ms, the progress
		{21, 9, 1720 * ms, DiskSteady, false}, // a 270 ms gap (paused): the wait restarts here
		{21, 9, 1760 * ms, DiskSteady, false},
		{21, 9, 1810 * ms, DiskSteady, false},
		{21, 9, 1860 * ms, DiskSteady, false},
		{21, 9, 1910 * ms, DiskSteady, false},
		{21, 9, 1920 * ms, DiskStalled, true}, // 200 ms of the node's own running
	}
	for i, s := range steps {
		got := w.Observe(s.written, s.durable, s.at)
		if got != s.want || w.Stalled() != s.stalled {
			t.Fatalf("step %d (%+v): %v, stalled %v; want %v, %v", i, s, got, w.Stalled(), s.want, s.stalled)
		}
	}
	if got := w.WaitedNs(1950 * ms); got != 230*ms {
		t.Fatalf("waited %d ns at 1.95 s, want 230 ms", got)
	}
}

// Against a model over random watermarks and times: the watch is
// stalled exactly when something written has waited the timeout since
// durable last moved, it fell behind, or the node last went a quarter of
// the timeout unobserved, and the events are the edges of that.
func TestDiskWatchProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		timeout := rapid.Int64Range(1, 1_000).Draw(rt, "timeout")
		w := NewDiskWatch(timeout)
		var written, durable uint64
		var now, since int64 = 0, -1 // since: when the model's wait began (-1: none)
		stalled, first := false, true
		for i := range rapid.IntRange(1, 200).Draw(rt, "steps") {
			dt := rapid.Int64Range(0, 2*timeout).Draw(rt, "dt")
			now += dt
			gap := !first && dt > timeout/4
			first = false
			written += rapid.Uint64Range(0, 3).Draw(rt, "w")
			prev := durable
			if rapid.Bool().Draw(rt, "progress") {
				durable = min(written, durable+rapid.Uint64Range(0, 3).Draw(rt, "d"))
			}
			progress := durable > prev
			switch {
			case durable >= written:
				since = -1
			case progress || since < 0 || gap:
				since = now
			}
			want := DiskSteady
			if stalled && progress {
				stalled, want = false, DiskRecovered
			} else if !stalled && since >= 0 && now-since >= timeout {
				stalled, want = true, DiskStalled
			}
			if got := w.Observe(written, durable, now); got != want || w.Stalled() != stalled {
				rt.Fatalf("step %d: written %d durable %d at %d: %v stalled %v, want %v %v", i, written, durable, now, got, w.Stalled(), want, stalled)
			}
		}
	})
}

// TestDiskWatchScenarios plays testdata/diskwatch/*.txt: the disk watch
// fed as node feeds it at its ticks (watch timeout=D; at T written=W
// durable=D: an Observe at T from the watch's start; want-lead: what
// WantLead says of a primary with this disk). go test ./replica -rewrite
// regenerates the expectations.
func TestDiskWatchScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/diskwatch/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no disk watch scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &harness{t: t}
			var w DiskWatch
			runScenarioWith(t, path, func(out *strings.Builder, line string) {
				fields := strings.Fields(line)
				a := parseArgs(fields[1:])
				switch fields[0] {
				case "watch":
					w = NewDiskWatch(h.dur(a, "timeout", 200_000_000))
				case "at":
					at, err := time.ParseDuration(fields[1])
					if err != nil {
						t.Fatalf("at %q: %v", fields[1], err)
					}
					ev := w.Observe(h.u64(a, "written", 0), h.u64(a, "durable", 0), int64(at))
					fmt.Fprintf(out, "%s: %v stalled=%v waited=%v\n", fields[1], ev, w.Stalled(), time.Duration(w.WaitedNs(int64(at))))
				case "want-lead":
					fmt.Fprintf(out, "want-lead=%v\n", WantLead(w.Stalled(), false, true, false))
				default:
					t.Fatalf("unknown command %q", line)
				}
			})
		})
	}
}
