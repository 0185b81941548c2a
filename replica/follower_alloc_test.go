package replica

import (
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// The follower's message path does not allocate: a DATA frame in order,
// one ahead of a gap and the frame filling it, their entries, the NAK
// and the ack of the batch.
func TestFollowerNoAllocations(t *testing.T) {
	f := NewFollower(testFollowerConfig(256))
	if err := f.Reset(0); err != nil {
		t.Fatal(err)
	}
	f.Addressed()
	msg := make([]byte, 32)
	var frames [3][]byte
	var seq uint64
	build := func() {
		for i, first := range []uint64{seq + 1, seq + 4, seq + 2} {
			n := 1
			if i > 0 {
				n = 2
			}
			msgs := [][]byte{msg, msg}[:n]
			b, err := wire.AppendData(frames[i][:0], wire.TypeData, wire.Origin{Node: 2, Epoch: 1}, first, msgs...)
			if err != nil {
				t.Fatal(err)
			}
			frames[i] = b
		}
	}
	var now int64
	var sink uint64
	build()
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range frames {
			fr, _, err := wire.Parse(frames[i])
			if err != nil {
				t.Fatal(err)
			}
			f.Data(&fr, now)
			for {
				s, p, ok := f.Next()
				if !ok {
					break
				}
				sink += s + uint64(len(p))
			}
		}
		now += 2_000_000
		seq += 5
		f.Durable(seq)
		f.EndBatch(now)
		if f.HasReady() {
			rd := f.Ready()
			sink += rd.Ack
			f.Advance()
		}
		build() // the same buffers: no allocation
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
	if f.Applied() != seq || f.Standby().AckSent() != seq {
		t.Fatalf("applied %d ack %d, want %d", f.Applied(), f.Standby().AckSent(), seq)
	}
}
