package status

import (
	"sync"
	"testing"
	"time"
)

func latencyCount(l *Latency) int64 {
	var st Status
	l.Fill(&st)
	return st.LatencyUs["count"]
}

// A reader sees what was recorded up to the last Rotate whose interval
// it folded; a Rotate before the fold keeps recording into the same
// interval, and nothing is lost either way.
func TestLatencyRotateAndFold(t *testing.T) {
	l := NewLatency()
	record := func(n int, v int64) {
		for range n {
			if err := l.RecordValue(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	var st Status
	if l.Fill(&st); st.LatencyUs != nil {
		t.Fatalf("empty histogram filled %v", st.LatencyUs)
	}
	record(10, 100)
	if got := latencyCount(l); got != 0 {
		t.Fatalf("before any Rotate a reader sees %d, want 0", got)
	}
	l.Rotate()
	record(5, 1000)
	l.Rotate() // the first interval is not folded yet: no hand-over
	if got := latencyCount(l); got != 10 {
		t.Fatalf("after the first hand-over a reader sees %d, want 10", got)
	}
	l.Rotate()
	if got := latencyCount(l); got != 15 {
		t.Fatalf("after the second hand-over a reader sees %d, want 15", got)
	}
	l.Rotate() // nothing recorded: nothing handed
	st = Status{}
	l.Fill(&st)
	if st.LatencyUs["p50"] != 100 || st.LatencyUs["max"] < 1000 || st.LatencyUs["max"] > 1010 {
		t.Fatalf("percentiles %v, want p50 100 and max 1000 (1 %%)", st.LatencyUs)
	}
	b := l.Buckets([]float64{100, 500, 2000})
	if b.Count != 15 || b.Cumulative[0] != 10 || b.Cumulative[1] != 10 || b.Cumulative[2] != 15 {
		t.Fatalf("buckets %+v, want 10, 10, 15 of 15", b)
	}
}

// The recording side (one goroutine under a lock of its own, as the
// node's agent records under the node's lock) and readers on other
// goroutines never share a histogram (the race detector checks it);
// readers see a count that only grows and never passes what was
// recorded, and in the end everything.
func TestLatencyConcurrentReaders(t *testing.T) {
	l := NewLatency()
	const total = 20_000
	var mu sync.Mutex // the node's lock
	recorded := 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for {
				var st Status
				l.Fill(&st)
				got := st.LatencyUs["count"]
				mu.Lock()
				max := int64(recorded)
				mu.Unlock()
				if got < last || got > max {
					t.Errorf("a reader saw %d after %d with %d recorded", got, last, max)
					return
				}
				last = got
				_ = l.Buckets([]float64{50, 500})
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	for i := range total {
		mu.Lock()
		_ = l.RecordValue(int64(1 + i%3000))
		recorded++
		if i%97 == 0 {
			l.Rotate()
		}
		mu.Unlock()
	}
	close(done)
	wg.Wait()
	for range 3 { // at most one interval waits for a fold: two rounds hand it all over
		mu.Lock()
		l.Rotate()
		mu.Unlock()
		if latencyCount(l) == total {
			return
		}
	}
	t.Fatalf("readers see %d of %d recorded after the last rotations", latencyCount(l), total)
}

// The recording side never waits for a reader: RecordValue and Rotate
// complete while a reader holds the histogram's lock (a scrape walking
// the buckets), so the agent, which records under the node's lock, is
// never held up by one.
func TestLatencyRecordingNeverWaitsForAReader(t *testing.T) {
	l := NewLatency()
	_ = l.RecordValue(10)
	l.Rotate()
	l.mu.Lock() // a reader in the middle of its walk
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			_ = l.RecordValue(int64(i + 1))
			l.Rotate()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the recording side waited for a reader's lock")
	}
	l.mu.Unlock()
	for range 2 {
		l.Rotate()
		if latencyCount(l) == 1001 {
			return
		}
	}
	t.Fatalf("a reader sees %d of 1001", latencyCount(l))
}
