package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// BenchmarkReplicated measures replicated, gated throughput on loopback: a
// static primary and one standby in this process, commands of the given
// size packed into COMMAND frames by a raw sender, at most ~1 MB of
// commands (32k at most) ahead of the released watermark. It reports commands/s applied on the
// standby and the primary's assign -> release latency percentiles (µs).
// Commands larger than the engine's are replicated and answered with a
// reject: the bus's cost is what is measured.
func BenchmarkReplicated(b *testing.B) {
	for _, size := range []int{32, 256, 1024} {
		for _, policy := range []journal.SyncPolicy{journal.SyncNone, journal.SyncGroup} {
			b.Run(fmt.Sprintf("size=%d/fsync=%s", size, policy), func(b *testing.B) {
				// At most ~1 MB of commands unreleased: more overflows the
				// standby's socket buffer and measures NAK repair instead.
				benchReplicated(b, size, policy, uint64(min(32_000, (1<<20)/size)))
			})
		}
	}
}

// BenchmarkReplicatedLatency is the same path with at most 64 commands in
// flight, so the assign -> release percentiles show the path, not a queue.
func BenchmarkReplicatedLatency(b *testing.B) {
	for _, policy := range []journal.SyncPolicy{journal.SyncNone, journal.SyncGroup} {
		b.Run(fmt.Sprintf("size=32/fsync=%s", policy), func(b *testing.B) {
			benchReplicated(b, 32, policy, 64)
		})
	}
}

func benchReplicated(b *testing.B, size int, policy journal.SyncPolicy, window uint64) {
	c := newCluster(b, 2)
	defer c.closeAll()
	for id := uint32(1); id <= 2; id++ {
		c.start(id, func(cfg *nodeconfig.Config) { cfg.Journal.Policy = policy; cfg.Journal.SegmentBytes = 64 << 20 })
	}
	snd, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer snd.Close()
	body := make([]byte, size-engine.CommandHeaderLen)
	batch := wire.NewBatch(0)
	frames := make([][]byte, 0, 64)
	arena := make([]byte, 0, 64*wire.DefaultDatagramLen)
	primary, standby := c.nodes[1], c.nodes[2]
	b.ResetTimer()
	start := time.Now()
	var id uint64
	for id < uint64(b.N) {
		if id-primary.Released() > window {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		frames, arena = frames[:0], arena[:0]
		for len(frames) < 16 && id < uint64(b.N) && id-primary.Released() < window {
			batch.Reset(wire.TypeCommand, wire.Origin{Node: 9}, 1)
			for id < uint64(b.N) {
				cmd := engine.AppendCommand(nil, 9, id+1, body)
				if !batch.Add(cmd) {
					break
				}
				id++
			}
			f := batch.Bytes()
			arena = append(arena, f...)
			frames = append(frames, arena[len(arena)-len(f):])
		}
		if err := snd.Send(frames, c.addrs[1]); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for standby.Status().Applied < uint64(b.N) { // every 200 µs: cheap enough
		if time.Now().After(deadline) {
			b.Fatalf("standby applied %d of %d", standby.Status().Applied, b.N)
		}
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	st := primary.Status()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
	b.ReportMetric(float64(st.LatencyUs["p50"]), "p50-us")
	b.ReportMetric(float64(st.LatencyUs["p99"]), "p99-us")
	b.ReportMetric(float64(st.LatencyUs["p99.9"]), "p999-us")
	ss := standby.Status()
	b.ReportMetric(float64(ss.Node.NaksSent), "naks")
	b.ReportMetric(float64(ss.Multicast.ReceiveOverflows), "mc-overflows")
}
