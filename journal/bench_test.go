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
			j, _ := mustOpen(b, OSFS{}, b.TempDir(), Options{Policy: SyncNone})
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
				if written += size + recordHeaderBytes; written > benchResetBytes {
					b.StopTimer()
					if err := j.ResetTo(seq); err != nil {
						b.Fatal(err)
					}
					written = 0
					b.StartTimer()
				}
			}
		})
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
