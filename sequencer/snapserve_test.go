package sequencer

import (
	"bytes"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

const (
	testChunkBytes = 100
	testBurst      = 4
)

// snapState is a snapshot's state of n bytes, distinct per seq.
func snapState(seq uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq*7 + uint64(i)*13)
	}
	return b
}

func newTestServer(budget *SnapshotBudget) *SnapshotServer {
	return NewSnapshotServer(SnapshotServerConfig{Every: 1000, ChunkBytes: testChunkBytes, Burst: testBurst, Budget: budget})
}

var testOrigin = wire.Origin{Stream: 9, Node: 1, Epoch: 3}

func TestSnapshotServerAnswer(t *testing.T) {
	cases := []struct {
		name        string
		held        uint64 // 0: none
		offset, seq uint64 // the request
		applied     uint64
		want        SnapshotAnswer
	}{
		{name: "resume any offset", held: 500, offset: 300, seq: 500, applied: 900, want: SnapshotServe},
		{name: "resume with nothing held", offset: 300, seq: 500, applied: 900, want: SnapshotServe},
		{name: "standby at our applied seq", held: 500, seq: 900, applied: 900, want: SnapshotNotBehind},
		{name: "standby past us", held: 500, seq: 950, applied: 900, want: SnapshotNotBehind},
		{name: "nothing held", seq: 100, applied: 900, want: SnapshotCutFirst},
		{name: "held not past the standby", held: 500, seq: 500, applied: 900, want: SnapshotCutFirst},
		{name: "held behind the standby", held: 500, seq: 600, applied: 900, want: SnapshotCutFirst},
		{name: "held past the standby, fresh", held: 500, seq: 100, applied: 900, want: SnapshotServe},
		{name: "held Every/2 behind: still fresh", held: 500, seq: 100, applied: 1000, want: SnapshotServe},
		{name: "held more than Every/2 behind: stale", held: 500, seq: 100, applied: 1001, want: SnapshotCutFirst},
		{name: "empty standby, fresh held", held: 800, seq: 0, applied: 900, want: SnapshotServe},
	}
	for _, c := range cases {
		s := newTestServer(nil)
		if c.held != 0 {
			s.Hold(c.held, 1, snapState(c.held, 250))
		}
		req := wire.SnapshotRequest{SnapshotSeq: c.seq, Offset: c.offset}
		if got := s.Answer(&req, c.applied); got != c.want {
			t.Errorf("%s: Answer = %d, want %d", c.name, got, c.want)
		}
	}
}

// served is one burst's chunks, decoded.
func serveBurst(t testing.TB, s *SnapshotServer, req wire.SnapshotRequest, node uint32, nowNs int64) ([]wire.SnapshotChunk, ChunkStatus) {
	t.Helper()
	var out []wire.SnapshotChunk
	if !s.Begin(&req, node) {
		return nil, ChunkDone
	}
	last := ChunkDone
	for s.Serving() {
		frame, st, err := s.Next(testOrigin, nowNs, nil)
		last = st
		if st != ChunkReady {
			if (st == ChunkFailed) != (err != nil) {
				t.Fatalf("status %d with error %v", st, err)
			}
			break
		}
		f, _, err := wire.Parse(frame)
		if err != nil {
			t.Fatalf("chunk frame does not parse: %v", err)
		}
		c, err := wire.DecodeSnapshotChunk(&f)
		if err != nil {
			t.Fatal(err)
		}
		c.Data = bytes.Clone(c.Data)
		out = append(out, c)
	}
	if _, st, _ := s.Next(testOrigin, nowNs, nil); st != ChunkDone {
		t.Fatalf("Next after the burst: %d", st)
	}
	return out, last
}

func TestSnapshotServerBursts(t *testing.T) {
	data := snapState(500, 950) // 10 chunks, the last of 50 bytes
	crc := crc32.Checksum(data, castagnoli)
	cases := []struct {
		name        string
		seq, offset uint64 // the request
		wantOffsets []uint64
	}{
		{name: "from 0", seq: 0, offset: 0, wantOffsets: []uint64{0, 100, 200, 300}},
		{name: "resume", seq: 500, offset: 300, wantOffsets: []uint64{300, 400, 500, 600}},
		{name: "resume mid-chunk", seq: 500, offset: 850, wantOffsets: []uint64{850}},
		{name: "the end", seq: 500, offset: 800, wantOffsets: []uint64{800, 900}},
		{name: "at the end: one empty chunk", seq: 500, offset: 950, wantOffsets: []uint64{950}},
		{name: "past the end: restart", seq: 500, offset: 951, wantOffsets: []uint64{0, 100, 200, 300}},
		{name: "another snapshot: restart", seq: 400, offset: 300, wantOffsets: []uint64{0, 100, 200, 300}},
	}
	for _, c := range cases {
		s := newTestServer(nil)
		s.Hold(500, 2, data)
		got, _ := serveBurst(t, s, wire.SnapshotRequest{SnapshotSeq: c.seq, Offset: c.offset}, 2, 10)
		if len(got) != len(c.wantOffsets) {
			t.Errorf("%s: %d chunks, want offsets %v", c.name, len(got), c.wantOffsets)
			continue
		}
		for i, ch := range got {
			end := min(ch.Offset+testChunkBytes, uint64(len(data)))
			if ch.Offset != c.wantOffsets[i] || ch.SnapshotSeq != 500 || ch.Total != 950 || ch.Checksum != crc ||
				ch.Origin != testOrigin || !bytes.Equal(ch.Data, data[ch.Offset:end]) {
				t.Errorf("%s: chunk %d: offset %d (want %d) seq %d total %d crc %x (want %x) %d bytes",
					c.name, i, ch.Offset, c.wantOffsets[i], ch.SnapshotSeq, ch.Total, ch.Checksum, crc, len(ch.Data))
			}
		}
	}
}

// TestSnapshotServerBudget: a standby asking again and again is served
// the budget's copies of the snapshot per window; the first refusal is
// flagged once, later ones not; another standby has its own budget.
func TestSnapshotServerBudget(t *testing.T) {
	s := newTestServer(NewSnapshotBudget(2, 1000))
	s.Hold(500, 2, snapState(500, 400)) // 4 chunks: one burst each
	req := wire.SnapshotRequest{SnapshotSeq: 500}
	var statuses []ChunkStatus
	sent := 0
	for range 4 {
		got, st := serveBurst(t, s, req, 2, 10)
		sent += len(got)
		statuses = append(statuses, st)
	}
	want := []ChunkStatus{ChunkReady, ChunkReady, ChunkRefusedFirst, ChunkRefused}
	if sent != 8 || s.Served(2) != 8 || !slices.Equal(statuses, want) {
		t.Fatalf("sent %d (served %d), bursts ended %v, want 8 and %v", sent, s.Served(2), statuses, want)
	}
	if got, st := serveBurst(t, s, req, 3, 10); len(got) != 4 || st != ChunkReady {
		t.Fatalf("another standby: %d chunks, %d", len(got), st)
	}
	if got, st := serveBurst(t, s, req, 2, 1010); len(got) != 4 || st != ChunkReady {
		t.Fatalf("the next window: %d chunks, %d", len(got), st)
	}
}

func TestSnapshotServerHoldAndDrop(t *testing.T) {
	s := newTestServer(nil)
	if _, ok := s.Latest(); ok || s.Begin(&wire.SnapshotRequest{}, 2) || s.Serving() {
		t.Fatal("a new server holds a snapshot")
	}
	s.Hold(500, 2, snapState(500, 250))
	s.Hold(400, 2, snapState(400, 250)) // written late: the newer stays
	if seq, ok := s.Latest(); !ok || seq != 500 || s.Chunks() != 3 {
		t.Fatalf("latest %d %v, %d chunks", seq, ok, s.Chunks())
	}
	s.Hold(600, 3, snapState(600, 1000))
	if seq, _ := s.Latest(); seq != 600 || s.Chunks() != 10 {
		t.Fatalf("latest %d, %d chunks", seq, s.Chunks())
	}
	s.Drop()
	if _, ok := s.Latest(); ok || s.Begin(&wire.SnapshotRequest{}, 2) {
		t.Fatal("held a snapshot after Drop")
	}
}

func TestSnapshotServerChunkEncodeFails(t *testing.T) {
	s := NewSnapshotServer(SnapshotServerConfig{Every: 1000, ChunkBytes: wire.MaxFrameLen, Burst: testBurst})
	s.Hold(500, 2, snapState(500, 2*wire.MaxFrameLen))
	if !s.Begin(&wire.SnapshotRequest{}, 2) {
		t.Fatal("nothing held")
	}
	if _, st, err := s.Next(testOrigin, 10, nil); st != ChunkFailed || err == nil || s.Serving() {
		t.Fatalf("a chunk past the frame limit: status %d err %v serving %v", st, err, s.Serving())
	}
}

// TestSnapshotServerZeroAllocs: serving a chunk into the caller's buffer
// allocates nothing (the standby's budget entry exists after its first).
func TestSnapshotServerZeroAllocs(t *testing.T) {
	s := NewSnapshotServer(SnapshotServerConfig{Every: 1000, ChunkBytes: wire.MaxSnapshotData(wire.DefaultDatagramLen), Burst: 32,
		Budget: NewSnapshotBudget(1<<30, 0)})
	s.Hold(500, 2, snapState(500, 1<<20))
	buf := make([]byte, 0, wire.MaxFrameLen)
	req := wire.SnapshotRequest{SnapshotSeq: 500}
	s.Begin(&req, 2)
	s.Next(testOrigin, 1, buf)
	chunks := 0
	allocs := testing.AllocsPerRun(100, func() {
		s.Begin(&req, 2)
		for s.Serving() {
			if _, st, _ := s.Next(testOrigin, 1, buf[:0]); st != ChunkReady {
				t.Fatalf("status %d", st)
			}
			chunks++
		}
	})
	if allocs != 0 || chunks == 0 {
		t.Fatalf("%v allocations per burst of %d chunks", allocs, testBurst)
	}
}

// FuzzSnapshotServer feeds arbitrary SNAPSHOT_REQUEST frames (as a
// hostile or confused standby could send) with arbitrary applied seqs and
// times: nothing panics, a frame that is not a request is refused by the
// decoder, and every chunk served parses, lies inside the snapshot, holds
// its bytes, starts where the request asked (or at 0 for another
// snapshot) and follows the previous one; a burst is at most Burst long.
func FuzzSnapshotServer(f *testing.F) {
	for _, r := range []wire.SnapshotRequest{
		{SnapshotSeq: 0}, {SnapshotSeq: 499}, {SnapshotSeq: 500, Offset: 300}, {SnapshotSeq: 500, Offset: 950},
		{SnapshotSeq: 500, Offset: 951}, {SnapshotSeq: 400, Offset: 100}, {SnapshotSeq: 1 << 63, Offset: 1<<64 - 1},
	} {
		r.Origin = wire.Origin{Stream: 9, Node: 2, Epoch: 3}
		f.Add(r.Append(nil), uint64(900), int64(10))
	}
	f.Add([]byte{1, 2, 3}, uint64(0), int64(-5))
	data := snapState(500, 950)
	f.Fuzz(func(t *testing.T, frame []byte, applied uint64, nowNs int64) {
		fr, _, err := wire.Parse(frame)
		if err != nil {
			return
		}
		req, err := wire.DecodeSnapshotRequest(&fr)
		if err != nil {
			return
		}
		s := newTestServer(NewSnapshotBudget(1, 1000))
		s.Hold(500, 2, data)
		for round := range 3 { // the third is past the budget of one copy
			if a := s.Answer(&req, applied); a > SnapshotCutFirst {
				t.Fatalf("answer %d", a)
			}
			got, _ := serveBurst(t, s, req, fr.Node, nowNs)
			if len(got) > testBurst {
				t.Fatalf("round %d: a burst of %d chunks", round, len(got))
			}
			want := req.Offset
			if req.SnapshotSeq != 500 || req.Offset > uint64(len(data)) {
				want = 0
			}
			for _, c := range got {
				if c.Offset != want || c.Total != uint64(len(data)) || c.Offset+uint64(len(c.Data)) > c.Total ||
					!bytes.Equal(c.Data, data[c.Offset:c.Offset+uint64(len(c.Data))]) {
					t.Fatalf("round %d: chunk at %d (want %d) of %d bytes, total %d", round, c.Offset, want, len(c.Data), c.Total)
				}
				want += uint64(len(c.Data))
			}
			if s.Served(fr.Node) > s.Chunks() {
				t.Fatalf("served %d chunks of a %d-chunk snapshot under a budget of one copy", s.Served(fr.Node), s.Chunks())
			}
		}
	})
}

// TestSnapshotServerChecksumOfTheSnapshotHeld: the checksum, computed at
// the first chunk served rather than at Hold, is always the one of the
// snapshot held when the chunk is served, across a replacement.
func TestSnapshotServerChecksumOfTheSnapshotHeld(t *testing.T) {
	s := newTestServer(nil)
	for i, seq := range []uint64{500, 600, 700} {
		data := snapState(seq, 300+100*i)
		s.Hold(seq, 2, data)
		if i == 1 {
			continue // held and replaced unserved
		}
		got, _ := serveBurst(t, s, wire.SnapshotRequest{}, 2, int64(i))
		if len(got) == 0 || got[0].SnapshotSeq != seq || got[0].Checksum != crc32.Checksum(data, castagnoli) {
			t.Fatalf("snapshot %d: %d chunks, first of seq %d with checksum %x, want %x", seq, len(got), got[0].SnapshotSeq, got[0].Checksum, crc32.Checksum(data, castagnoli))
		}
	}
}

// BenchmarkSnapshotServerHold is a runtime's cost, on its agent, of
// holding each snapshot it writes for serving (a 4 MiB state).
func BenchmarkSnapshotServerHold(b *testing.B) {
	s := newTestServer(nil)
	data := snapState(1, 4<<20)
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		s.Hold(uint64(i+1), 2, data)
	}
}
