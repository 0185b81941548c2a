package replica

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// followerInvariants drives a Follower with the input sequence ops
// encodes, as node would, and fails when it panics, when the entries it
// hands out are not contiguous with their own payloads, or when an ack
// goes above durable or above what was applied.
func followerInvariants(t *testing.T, ops []byte) {
	f := NewFollower(testFollowerConfig(64))
	if err := f.Reset(0); err != nil {
		t.Fatal(err)
	}
	f.Addressed()
	var applied, durable uint64
	var now int64
	snap := []byte("snapshot-state-of-seq")
	var snapSeq uint64
	crc := crc32.Checksum(snap, castagnoliTest)
	buf := make([]byte, 0, wire.MaxFrameLen)
	next := func(i int) byte {
		if i < len(ops) {
			return ops[i]
		}
		return 0
	}
	drain := func() {
		for {
			seq, p, ok := f.Next()
			if !ok {
				return
			}
			if seq != applied+1 {
				t.Fatalf("entry %d after %d: not contiguous", seq, applied)
			}
			if string(p) != string(testPayload(seq)) {
				t.Fatalf("entry %d carries %q", seq, p)
			}
			applied = seq
		}
	}
	var ready func()
	ready = func() {
		if !f.HasReady() {
			return
		}
		rd := f.Ready()
		if rd.HasAck && (rd.Ack > durable || rd.Ack > applied) {
			t.Fatalf("ack %d with durable %d, applied %d", rd.Ack, durable, applied)
		}
		if rd.HasNak && rd.Nak.N == 0 {
			t.Fatal("a NAK with no range")
		}
		f.Advance()
		if rd.Install != nil {
			if rd.InstallSeq <= applied {
				t.Fatalf("install of %d with %d applied", rd.InstallSeq, applied)
			}
			applied = rd.InstallSeq
			durable = applied // the journal is reset to the snapshot
			f.Install(rd.InstallSeq)
			drain()
			f.Installed()
			ready()
		}
	}
	for i := 0; i < len(ops); i += 3 {
		op, x, y := ops[i], next(i+1), next(i+2)
		switch op % 9 {
		case 0, 1: // DATA or RETRANSMIT around the window
			typ := wire.TypeData
			if op%9 == 1 {
				typ = wire.TypeRetransmit
			}
			seq := max(applied+uint64(x)%90, 11) - 10
			msgs := make([][]byte, 1+int(y)%4)
			for k := range msgs {
				msgs[k] = testPayload(seq + uint64(k))
			}
			b, err := wire.AppendData(buf[:0], typ, wire.Origin{Node: 2, Epoch: 1}, seq, msgs...)
			if err != nil {
				t.Fatal(err)
			}
			fr, _, err := wire.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			f.Data(&fr, now)
			drain()
		case 2:
			f.Heartbeat(applied + uint64(x)%100)
		case 3: // durable never above what was journaled
			durable = max(durable, min(applied, durable+uint64(x)%8))
			f.Durable(durable)
		case 4:
			f.EndBatch(now)
		case 5:
			now += int64(x) * 100_000
			f.Tick(now)
		case 6:
			f.NeedSnapshot(now)
		case 7: // a chunk of the primary's snapshot, at some offset
			if snapSeq <= applied || x%4 == 0 {
				snapSeq = applied + uint64(y)%100
			}
			off := uint64(x%6) * 4
			if off > uint64(len(snap)) {
				off = 0
			}
			end := min(off+4, uint64(len(snap)))
			c := wire.SnapshotChunk{SnapshotSeq: snapSeq, Total: uint64(len(snap)), Offset: off, Checksum: crc, Data: snap[off:end]}
			f.Chunk(&c, now)
		case 8:
			f.PrimaryChanged(now)
		}
		ready()
		if f.Applied() != applied {
			t.Fatalf("the follower says %d applied, the entries %d", f.Applied(), applied)
		}
	}
}

func FuzzFollower(fz *testing.F) {
	fz.Add([]byte{0, 1, 0, 4, 0, 0, 0, 20, 0, 5, 30, 0})
	fz.Add([]byte{0, 90, 3, 7, 0, 0, 7, 4, 0, 7, 8, 0, 7, 12, 0, 7, 16, 0, 7, 20, 0, 4, 0, 0})
	fz.Fuzz(func(t *testing.T, ops []byte) { followerInvariants(t, ops) })
}

// TestFollowerRandomInputs runs the fuzz target's invariants over random
// input sequences, so that go test exercises them beyond the seeds.
func TestFollowerRandomInputs(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		ops := make([]byte, 3*(50+r.IntN(400)))
		for i := range ops {
			ops[i] = byte(r.UintN(256))
		}
		followerInvariants(t, ops)
	}
}
