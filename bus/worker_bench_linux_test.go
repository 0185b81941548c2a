//go:build linux

package bus

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/seqbus/seqbus/internal/monotime"
)

// BenchmarkWorkerHandoff: an agent-like locked thread kicks a Worker and
// waits, spinning and yielding with raw system calls (its P stays its
// own, as the runner's), until the job has run: the fsync thread's
// hand-off under fsync group, without the fsync. Reported as the HDR
// percentiles of one kick → job seen round trip.
func BenchmarkWorkerHandoff(b *testing.B) {
	var done atomic.Uint64
	w := NewWorker(func() { done.Add(1) })
	w.Start()
	defer w.Stop()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := hdrhistogram.New(1, 100_000_000, 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		want := done.Load() + 1
		start := monotime.Now()
		w.Kick()
		for spins := 0; done.Load() < want; spins++ {
			if spins > 64 {
				unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			}
		}
		_ = h.RecordValue(monotime.Now() - start)
		// The agent between commands: the worker goes back to waiting.
		for j := 0; j < 2000; j++ {
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(h.ValueAtQuantile(50))/1e3, "p50-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99))/1e3, "p99-µs")
	b.ReportMetric(float64(h.ValueAtQuantile(99.9))/1e3, "p99.9-µs")
}

// BenchmarkLoopHandoff: a Loop's handler hands each datagram to a
// waiting goroutine over a channel, the way an application's callback
// would; one round trip is send → handler → the waiter runs. Per idle
// strategy.
func BenchmarkLoopHandoff(b *testing.B) {
	for _, kind := range []string{"block", "backoff", "yield", "spin"} {
		b.Run(kind, func(b *testing.B) {
			idle, err := ParseIdle(kind)
			if err != nil {
				b.Fatal(err)
			}
			tx, rx := benchPair(b)
			got := make(chan struct{}, 1)
			l, err := StartLoop(rx, LoopConfig{Idle: idle}, func([][]byte, []int, []netip.AddrPort) { got <- struct{}{} })
			if err != nil {
				b.Fatal(err)
			}
			defer l.Stop()
			msg := [][]byte{make([]byte, 32)}
			to := rx.LocalAddr()
			h := hdrhistogram.New(1, 100_000_000, 3)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := monotime.Now()
				if err := tx.Send(msg, to); err != nil {
					b.Fatal(err)
				}
				<-got
				_ = h.RecordValue(monotime.Now() - start)
				time.Sleep(50 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(h.ValueAtQuantile(50))/1e3, "p50-µs")
			b.ReportMetric(float64(h.ValueAtQuantile(99))/1e3, "p99-µs")
		})
	}
}
