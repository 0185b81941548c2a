package replica

import (
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/standby"
	"github.com/seqbus/seqbus/wire"
)

// TestFollowerScenarios plays testdata/follower/*.txt: the standby side
// (replica.Follower) fed as node feeds it, the harness carrying out each
// FollowerReady the way node does (go test ./replica -rewrite
// regenerates the expectations).
func TestFollowerScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/follower/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no follower scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &fharness{harness: harness{t: t}}
			runScenarioWith(t, path, h.run)
		})
	}
}

// fharness plays a standby's runtime around a Follower.
type fharness struct {
	harness
	f     *Follower
	snap  []byte // the snapshot the primary serves
	snapS uint64
}

var castagnoliTest = crc32.MakeTable(crc32.Castagnoli)

// testPayload is the message the harness's primary sequenced at seq.
func testPayload(seq uint64) []byte { return []byte(fmt.Sprintf("m%d", seq)) }

func testFollowerConfig(pending int) FollowerConfig {
	return FollowerConfig{
		Window:     standby.Config{MaxPending: pending, MaxMessageBytes: 64},
		Nak:        standby.NakConfig{Seed: 1},
		Fetch:      standby.FetchConfig{TimeoutNs: 20_000_000},
		Standby:    StandbyConfig{AckIntervalNs: 50_000_000},
		ChunkBurst: 2,
		ChunkBytes: 4,
	}
}

func (h *fharness) run(w *strings.Builder, line string) {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	fmt.Fprintf(w, "> %s\n", line)
	switch cmd {
	case "follower":
		h.f = NewFollower(testFollowerConfig(int(h.u64(a, "pending", 64))))
		h.epoch = h.u64(a, "epoch", 1)
		h.applied = h.u64(a, "start", 0)
		if err := h.f.Reset(h.applied); err != nil {
			h.t.Fatal(err)
		}
		if !a.has("unaddressed") {
			h.f.Addressed()
		}
	case "addressed":
		h.f.Addressed()
	case "data", "retransmit":
		typ := wire.TypeData
		if cmd == "retransmit" {
			typ = wire.TypeRetransmit
		}
		seq, n := h.u64(a, "seq", 1), h.u64(a, "n", 1)
		epoch := h.u64(a, "epoch", h.epoch)
		if v := h.f.Standby().Fence(epoch, h.epoch, false); v != Pass {
			fmt.Fprintf(w, "drop: %s\n", v) // node counts it and drops the frame
			return
		}
		msgs := make([][]byte, n)
		for i := range msgs {
			msgs[i] = testPayload(seq + uint64(i))
		}
		b, err := wire.AppendData(nil, typ, wire.Origin{Node: 2, Epoch: epoch}, seq, msgs...)
		if err != nil {
			h.t.Fatal(err)
		}
		fr, _, err := wire.Parse(b)
		if err != nil {
			h.t.Fatal(err)
		}
		h.f.Data(&fr, h.nowNs)
		h.drain(w)
	case "heartbeat":
		h.f.Heartbeat(h.u64(a, "seq", 0))
	case "durable":
		h.f.Durable(h.u64(args{"": fields[1]}, "", 0))
		return
	case "durable-ack":
		h.f.DurableAck(h.u64(args{"": fields[1]}, "", 0), h.nowNs)
	case "end-batch":
		h.f.EndBatch(h.nowNs)
	case "tick":
		h.nowNs += h.dur(args{"d": fields[1]}, "d", 0)
		h.f.Tick(h.nowNs)
	case "need-snapshot":
		h.f.NeedSnapshot(h.nowNs)
	case "primary-changed":
		h.f.PrimaryChanged(h.nowNs)
	case "hold-acks":
		h.f.HoldAcks(fields[1] == "on")
	case "caught-up":
		fmt.Fprintf(w, "caught-up=%v\n", h.f.CaughtUp())
		return
	case "hash":
		// A state hash at seq: ours (local) or the primary's HASH frame.
		seq, hash := h.u64(a, "seq", 0), h.u64(a, "hash", 0)
		var ok bool
		if a.has("local") {
			ok = h.f.LocalHash(seq, hash)
		} else {
			ok = h.f.RemoteHash(seq, hash)
		}
		fmt.Fprintf(w, "match=%v diverged=%v\n", ok, h.f.Diverged())
		return
	case "reset-hashes":
		h.f.ResetHashes()
	case "snapshot":
		// What the primary serves: size bytes, its state at seq.
		h.snapS = h.u64(a, "seq", 0)
		h.snap = make([]byte, h.u64(a, "size", 8))
		for i := range h.snap {
			h.snap[i] = byte('a' + i%26)
		}
		return
	case "chunk":
		off := h.u64(a, "offset", 0)
		for range h.u64(a, "n", 1) {
			end := min(off+4, uint64(len(h.snap)))
			c := wire.SnapshotChunk{SnapshotSeq: h.snapS, Total: uint64(len(h.snap)), Offset: off,
				Checksum: crc32.Checksum(h.snap, castagnoliTest), Data: h.snap[off:end]}
			if a.has("corrupt") && end == uint64(len(h.snap)) {
				c.Data = append([]byte(nil), c.Data...)
				c.Data[0] ^= 1
			}
			h.f.Chunk(&c, h.nowNs)
			off = end
			h.ready(w)
		}
		return
	case "state":
		fmt.Fprintf(w, "applied=%d highest=%d fetching=%v catching-up=%v ack-sent=%d rejects=%+v\n",
			h.f.Applied(), h.f.Highest(), h.f.Fetching(), h.f.CatchingUp(), h.f.Standby().AckSent(), h.f.Rejects())
		return
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	h.ready(w)
}

// drain takes every entry Next hands out, as node journals and applies
// them, checking each is the next seq with its own payload.
func (h *fharness) drain(w *strings.Builder) {
	var from, to uint64
	flush := func() {
		if from != 0 {
			if from == to {
				fmt.Fprintf(w, "apply %d\n", from)
			} else {
				fmt.Fprintf(w, "apply %d..%d\n", from, to)
			}
		}
	}
	for {
		seq, p, ok := h.f.Next()
		if !ok {
			break
		}
		if seq != h.applied+1 {
			fmt.Fprintf(w, "OUT OF ORDER: %d after %d\n", seq, h.applied)
		}
		if string(p) != string(testPayload(seq)) {
			fmt.Fprintf(w, "WRONG PAYLOAD at %d: %q\n", seq, p)
		}
		h.applied = seq
		if to+1 != seq || from == 0 {
			flush()
			from = seq
		}
		to = seq
	}
	flush()
}

// ready prints and carries out the Follower's Ready, as node does.
func (h *fharness) ready(w *strings.Builder) {
	if !h.f.HasReady() {
		return
	}
	rd := h.f.Ready()
	var b strings.Builder
	flag := func(on bool, s string) {
		if on {
			b.WriteString(" " + s)
		}
	}
	flag(rd.FetchStarted, "fetch-started")
	flag(rd.FetchRestarted, "fetch-restarted")
	flag(rd.NotAhead, "not-ahead")
	if rd.FetchErr != nil {
		fmt.Fprintf(&b, " fetch-error=%q", rd.FetchErr)
	}
	if rd.Install != nil {
		fmt.Fprintf(&b, " install=%d(%d bytes)", rd.InstallSeq, len(rd.Install))
	}
	flag(rd.CatchUpStarted, "catch-up-started")
	flag(rd.CaughtUp, "caught-up")
	if rd.HasNak {
		b.WriteString(" nak=[")
		for i, r := range rd.Nak.Ranges[:rd.Nak.N] {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d-%d", r.From, r.To)
		}
		fmt.Fprintf(&b, "](ack %d)", rd.Nak.Ack)
	}
	if rd.HasRequest {
		fmt.Fprintf(&b, " request=(snapshot %d offset %d)", rd.Request.SnapshotSeq, rd.Request.Offset)
	}
	if rd.HasAck {
		fmt.Fprintf(&b, " ack=%d", rd.Ack)
	}
	fmt.Fprintf(w, "ready:%s\n", b.String())
	h.f.Advance()
	if rd.Install != nil {
		if string(rd.Install) != string(h.snap) {
			fmt.Fprintln(w, "INSTALL DATA DIFFERS")
		}
		h.applied = rd.InstallSeq // the engine restored from it
		h.f.Install(rd.InstallSeq)
		h.drain(w)
		h.f.Installed()
		h.ready(w)
	}
}
