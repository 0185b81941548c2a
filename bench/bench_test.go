package bench

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/seqbus/seqbus/bus"
)

// benchPingPong runs b.N recorded round trips in one PingPong and reports
// its percentiles; ns/op is the mean round trip.
func benchPingPong(b *testing.B, hops int, idle bus.Idle) {
	cfg := PingPongConfig{Hops: hops, Count: max(b.N, 1), Warmup: 500, Idle: idle}
	b.ReportAllocs()
	b.ResetTimer()
	res, err := PingPong(context.Background(), cfg)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	h := res.Histogram
	b.ReportMetric(float64(h.ValueAtPercentile(50))/NsPerUs, "p50-µs")
	b.ReportMetric(float64(h.ValueAtPercentile(99))/NsPerUs, "p99-µs")
	b.ReportMetric(float64(h.ValueAtPercentile(99.9))/NsPerUs, "p999-µs")
}

// BenchmarkPingPong2Hop: client → echo → client on loopback.
func BenchmarkPingPong2Hop(b *testing.B) {
	b.Run("backoff", func(b *testing.B) { benchPingPong(b, 2, bus.DefaultIdle) })
	b.Run("block", func(b *testing.B) { benchPingPong(b, 2, bus.Idle{Kind: bus.IdleBlock}) })
	b.Run("busy-spin", func(b *testing.B) { benchPingPong(b, 2, bus.Idle{Kind: bus.IdleBusySpin}) })
}

// BenchmarkPingPong4Hop: client → A → B → A → client. No busy-spin case:
// three spinners on two cores starve each other.
func BenchmarkPingPong4Hop(b *testing.B) {
	b.Run("backoff", func(b *testing.B) { benchPingPong(b, 4, bus.DefaultIdle) })
	b.Run("block", func(b *testing.B) { benchPingPong(b, 4, bus.Idle{Kind: bus.IdleBlock}) })
}

func BenchmarkWriteHGRM(b *testing.B) {
	h := latencyLike(100_000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := WriteHGRM(io.Discard, h, NsPerUs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadHGRM(b *testing.B) {
	var buf bytes.Buffer
	if err := WriteHGRM(&buf, latencyLike(100_000), NsPerUs); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ReadHGRM(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
