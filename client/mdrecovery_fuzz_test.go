package client

import (
	"encoding/binary"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// FuzzMDRecovery drives the consumer's recovery core with any sequence of
// updates, answers, snapshot chunks and ticks: it never panics, and what
// it delivers is in strictly increasing MD seq order, once each.
func FuzzMDRecovery(f *testing.F) {
	f.Add([]byte{0, 1, 0, 4, 1, 0, 3, 2, 5, 3, 9})
	f.Add([]byte{0, 1, 0, 200, 4, 1, 2, 0, 3, 0, 2, 0, 0, 3, 50})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var last uint64
		var asked int
		r := NewMDRecovery(MDRecoveryConfig{
			Servers: 1 + len(ops)%3, FromStart: len(ops)%2 == 0, RetryNs: 10, ProbeNs: 40, WaitNs: 200, MaxRetries: 2,
			Send: func(int, wire.MDRequest) { asked++ },
			Deliver: func(seq uint64, _ []byte, _ bool) {
				if seq <= last {
					t.Fatalf("delivered %d after %d", seq, last)
				}
				last = seq
			},
		})
		now := int64(0)
		for len(ops) >= 3 {
			op, a, b := ops[0], uint64(ops[1]), uint64(ops[2])
			ops = ops[3:]
			now += int64(b % 16)
			switch op % 5 {
			case 0, 1:
				seq := a + b<<8
				if seq == 0 {
					seq = 1
				}
				r.Update(seq, mdPayload(seq+uint64(op/5%2)), op%5 == 1, now)
			case 2:
				r.Status(wire.MDStatus{First: r.Next(), Code: wire.MDStatusCode(a % 5), Oldest: b, Newest: a + b}, now)
			case 3:
				var lv [2]wire.MDLevel
				r.SnapshotChunk(&wire.MDSnapshot{MDSeq: a + b, Chunk: uint16(a % 4), Chunks: uint16(b % 4), Levels: lv[:a%3]}, now)
			case 4:
				r.Tick(now + int64(binary.LittleEndian.Uint16([]byte{byte(a), byte(b)})))
			}
		}
		if tr := r.Tracker(); tr.Updates > 0 && last == 0 {
			t.Fatalf("%+v but nothing delivered", tr)
		}
	})
}
