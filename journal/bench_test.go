package journal

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchResetBytes bounds the disk a benchmark uses: past it the journal is
// reset (outside the timer).
const benchResetBytes = 256 << 20

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{32, 256, 1024} {
		b.Run(fmt.Sprintf("none/%dB", size), func(b *testing.B) {
			benchAppend(b, Options{Policy: SyncNone}, size, 0)
		})
	}
}

// BenchmarkAppendBuffered is the node's form: appends encoded into the
// write buffer (its default size), written once a pass (here every 32
// records, a flat-out pass's size), durable at once under SyncNone.
func BenchmarkAppendBuffered(b *testing.B) {
	for _, size := range []int{32, 256} {
		b.Run(fmt.Sprintf("none/%dB", size), func(b *testing.B) {
			benchAppend(b, Options{Policy: SyncNone, WriteBufferBytes: 256 << 10}, size, 32)
		})
	}
}

// benchAppend appends b.N records of size bytes under opts, flushing
// every flushEvery records (0: never; write-through writes each), and
// resets the journal (outside the timer) past benchResetBytes.
func benchAppend(b *testing.B, opts Options, size, flushEvery int) {
	j, _ := mustOpen(b, OSFS{}, b.TempDir(), opts)
	defer j.Close()
	payload := make([]byte, size)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	written := 0
	seq := uint64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq++
		if err := j.Append(1, seq, payload, int64(i)); err != nil {
			b.Fatal(err)
		}
		if flushEvery > 0 && seq%uint64(flushEvery) == 0 {
			if err := j.Flush(); err != nil {
				b.Fatal(err)
			}
		}
		if written += size + recordHeaderBytes; written > benchResetBytes {
			b.StopTimer()
			if err := j.ResetTo(seq); err != nil {
				b.Fatal(err)
			}
			written = 0
			b.StartTimer()
		}
	}
}

// BenchmarkSyncAlways appends and fsyncs every record on the real file
// system: ns/fsync is the latency of one fdatasync.
func BenchmarkSyncAlways(b *testing.B) {
	j, _ := mustOpen(b, OSFS{}, b.TempDir(), Options{Policy: SyncAlways})
	defer j.Close()
	payload := make([]byte, 64)
	var syncNs time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq := uint64(i + 1)
		if err := j.Append(1, seq, payload, int64(i)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := j.Sync(); err != nil {
			b.Fatal(err)
		}
		syncNs += time.Since(start)
	}
	b.ReportMetric(float64(syncNs.Nanoseconds())/float64(b.N), "ns/fsync")
}

// BenchmarkGroupCommit runs the two-goroutine setup: the benchmark loop
// appends, a syncer goroutine fsyncs whenever the group policy says so.
// It reports the fsync latency and how many records each fsync covered.
func BenchmarkGroupCommit(b *testing.B) {
	j, _ := mustOpen(b, OSFS{}, b.TempDir(), Options{Policy: SyncGroup})
	defer j.Close()
	payload := make([]byte, 64)
	epochStart := time.Now()
	now := func() int64 { return int64(time.Since(epochStart)) }
	var stop atomic.Bool
	var syncs, syncNs atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if !j.SyncDue(now()) {
				time.Sleep(20 * time.Microsecond)
				continue
			}
			start := time.Now()
			if err := j.Sync(); err != nil {
				b.Error(err)
				return
			}
			syncNs.Add(int64(time.Since(start)))
			syncs.Add(1)
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := j.Append(1, uint64(i+1), payload, now()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	if n := syncs.Load(); n > 0 {
		b.ReportMetric(float64(syncNs.Load())/float64(n), "ns/fsync")
		b.ReportMetric(float64(b.N)/float64(n), "records/fsync")
	}
}

func BenchmarkReadFrom(b *testing.B) {
	j, _ := mustOpen(b, OSFS{}, b.TempDir(), Options{SegmentBytes: 4 << 20, Policy: SyncNone})
	defer j.Close()
	const n = 100_000
	payload := make([]byte, 64)
	for seq := uint64(1); seq <= n; seq++ {
		if err := j.Append(1, seq, payload, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from := uint64(i*7919)%n + 1
		if err := j.ReadFrom(from, func(_, seq uint64, _ []byte) bool { return seq < from+31 }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoll times the append that rolls to a new 64 MiB segment: the
// owner's (a node's agent's) cost at each roll, once per SegmentBytes of
// log, with the segment created at the roll (inline) or prepared ahead
// (Options.PrepareAhead). Between rolls (outside the timer) the previous
// segments are removed, so the disk holds two or three, what was
// appended is synced under group (as the fsync thread keeps it), and the
// spare is left time to be ready, as it is in a node, where rolls are
// seconds apart.
func BenchmarkRoll(b *testing.B) {
	for _, p := range []SyncPolicy{SyncNone, SyncGroup} {
		for _, ahead := range []bool{false, true} {
			name := p.String() + "/inline"
			if ahead {
				name = p.String() + "/ahead"
			}
			b.Run(name, func(b *testing.B) {
				benchRoll(b, Options{Policy: p, WriteBufferBytes: 64 << 10, PrepareAhead: ahead})
			})
		}
	}
}

func benchRoll(b *testing.B, opts Options) {
	j, _ := mustOpen(b, OSFS{}, b.TempDir(), opts)
	defer j.Close()
	payload := make([]byte, 32)
	seq := uint64(1)
	if err := j.Append(1, seq, payload, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for len(j.segs) > 1 {
			if err := j.fs.Remove(j.path(j.segs[0].name)); err != nil {
				b.Fatal(err)
			}
			j.segs = j.segs[1:]
		}
		// The segment is full: the next record does not fit.
		j.segs[0].endOffset = j.opts.SegmentBytes - 8
		if err := j.Flush(); err != nil {
			b.Fatal(err)
		}
		if j.opts.Policy != SyncNone {
			if err := j.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		if j.spareDone != nil {
			<-j.spareDone
		}
		time.Sleep(20 * time.Millisecond) // the disk settles, as between rolls
		seq++
		b.StartTimer()
		if err := j.Append(1, seq, payload, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotDone times the owner's (a node's agent's) Poll that
// finds a snapshot write finished: whatever the writer does on the owner
// after each snapshot, the compaction behind it included (here one 64
// MiB segment a snapshot, for a state of stateBytes that does not
// compress). The write itself and the appends are outside the timer.
func BenchmarkSnapshotDone(b *testing.B) {
	for _, stateBytes := range []int{64 << 10, 4 << 20} {
		b.Run(fmt.Sprintf("state=%dKiB", stateBytes>>10), func(b *testing.B) {
			j, _ := mustOpen(b, OSFS{}, b.TempDir(), Options{Policy: SyncNone, WriteBufferBytes: 64 << 10})
			defer j.Close()
			w := NewSnapshotWriter(j, SnapshotWriterOptions{})
			state := make([]byte, stateBytes)
			for i := range state {
				state[i] = byte(i*7919>>3 ^ i>>11) // does not compress much
			}
			payload := make([]byte, 32)
			seq := uint64(0)
			fill := func() { // one record, then the segment counts as full
				seq++
				if err := j.Append(1, seq, payload, 0); err != nil {
					b.Fatal(err)
				}
				j.segs[len(j.segs)-1].endOffset = j.opts.SegmentBytes - 8
			}
			removed := 0
			b.ResetTimer()
			for i := 0; i < b.N+2; i++ {
				b.StopTimer()
				fill() // rolled: the previous segment lies below this snapshot
				w.Cut(seq, 1, state)
				w.Start()
				time.Sleep(50 * time.Millisecond) // written, not yet seen
				if i >= 2 {
					b.StartTimer() // the first two have nothing to compact behind
				}
				done := w.Poll()
				b.StopTimer()
				for len(done) == 0 { // the disk was slower than the sleep
					time.Sleep(time.Millisecond)
					done = w.Poll()
				}
				if done[0].Err != nil || done[0].CompactErr != nil {
					b.Fatal(done[0].Err, done[0].CompactErr)
				}
				removed += done[0].Removed
			}
			b.ReportMetric(float64(removed)/float64(b.N), "segments/op")
		})
	}
}
