package standby

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"pgregory.net/rapid"

	"github.com/seqbus/seqbus/wire"
)

func chunks(snap []byte, seq uint64, size int) []wire.SnapshotChunk {
	sum := crc32.Checksum(snap, castagnoli)
	var out []wire.SnapshotChunk
	for off := 0; off < len(snap) || off == 0; off += size {
		end := min(off+size, len(snap))
		out = append(out, wire.SnapshotChunk{SnapshotSeq: seq, Total: uint64(len(snap)), Offset: uint64(off), Checksum: sum, Data: snap[off:end]})
		if end == len(snap) {
			break
		}
	}
	return out
}

func TestFetchInOrderResumeAndVerify(t *testing.T) {
	snap := bytes.Repeat([]byte("state!"), 100)
	cs := chunks(snap, 77, 64)
	f := NewFetch(FetchConfig{TimeoutNs: 100})
	req := f.Start(0)
	if req.Offset != 0 || !f.Active() {
		t.Fatalf("start %+v", req)
	}
	var got []byte
	// Chunk 1 lost: chunk 2 is out of order and ignored.
	if d, _, _ := f.OnChunk(&cs[1], 1); d != nil {
		t.Fatal("accepted chunk 1 before chunk 0")
	}
	d, _, err := f.OnChunk(&cs[0], 2)
	if err != nil || d == nil {
		t.Fatal(err)
	}
	got = append(got, d...)
	if _, ok := f.Poll(50); ok {
		t.Fatal("re-asked before the timeout")
	}
	req, ok := f.Poll(102)
	if !ok || req.Offset != 64 || req.SnapshotSeq != 77 {
		t.Fatalf("resume request %+v %v", req, ok)
	}
	for i := 1; i < len(cs); i++ {
		d, done, err := f.OnChunk(&cs[i], 200)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d...)
		if done != (i == len(cs)-1) {
			t.Fatalf("chunk %d done=%v", i, done)
		}
	}
	if !bytes.Equal(got, snap) || f.Active() || f.Seq() != 77 {
		t.Fatal("snapshot not reassembled")
	}
}

func TestFetchChecksumFailureRestarts(t *testing.T) {
	snap := []byte("0123456789")
	cs := chunks(snap, 5, 4)
	cs[1].Data = []byte("XXXX")
	f := NewFetch(FetchConfig{})
	f.Start(0)
	var err error
	for i := range cs {
		_, _, err = f.OnChunk(&cs[i], 1)
	}
	if !errors.Is(err, ErrSnapshotChecksum) || f.Offset() != 0 || !f.Active() {
		t.Fatalf("err %v offset %d active %v", err, f.Offset(), f.Active())
	}
}

func TestFetchNewerSnapshotRestarts(t *testing.T) {
	a := chunks([]byte("aaaaaaaa"), 1, 4)
	b := chunks([]byte("bbbbbbbbbbbb"), 2, 4)
	f := NewFetch(FetchConfig{})
	f.Start(0)
	f.OnChunk(&a[0], 1)
	if d, _, _ := f.OnChunk(&b[1], 1); d != nil {
		t.Fatal("accepted a mid-chunk of another snapshot")
	}
	var got []byte
	for i := range b {
		d, _, err := f.OnChunk(&b[i], 1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d...)
	}
	if string(got) != "bbbbbbbbbbbb" || f.Seq() != 2 || f.Stats().Restarts != 1 {
		t.Fatalf("got %q seq %d stats %+v", got, f.Seq(), f.Stats())
	}
}

func TestFetchTooLarge(t *testing.T) {
	f := NewFetch(FetchConfig{MaxBytes: 10})
	f.Start(0)
	c := wire.SnapshotChunk{Total: 11, Data: []byte("x")}
	if _, _, err := f.OnChunk(&c, 0); !errors.Is(err, ErrSnapshotTooLarge) || f.Active() {
		t.Fatalf("%v", err)
	}
}

// TestPropertyFetchReassembles: whatever the loss, duplication and
// reordering of chunks, what Fetch hands out, written at its offsets, is
// exactly the snapshot, and it completes once every chunk got through.
func TestPropertyFetchReassembles(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap := rapid.SliceOfN(rapid.Byte(), 0, 2000).Draw(t, "snap")
		cs := chunks(snap, 9, rapid.IntRange(1, 300).Draw(t, "chunk"))
		f := NewFetch(FetchConfig{TimeoutNs: 10})
		f.Start(0)
		out := make([]byte, len(snap))
		now := int64(0)
		for rounds := 0; rounds < 10_000 && f.Active(); rounds++ {
			now += 11
			req, _ := f.Poll(now)
			// The primary answers a request with a burst from its offset,
			// through a network that drops, duplicates and reorders.
			burst := []wire.SnapshotChunk{}
			for i := range cs {
				if cs[i].Offset >= req.Offset && len(burst) < 4 {
					burst = append(burst, cs[i])
				}
			}
			for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(burst)-1), 0, 8).Draw(t, "deliver") {
				d, done, err := f.OnChunk(&burst[i], now)
				if err != nil {
					t.Fatal(err)
				}
				copy(out[burst[i].Offset:], d)
				if done {
					break
				}
			}
		}
		if f.Active() {
			return // the network never delivered in order within the bound: fine
		}
		if !bytes.Equal(out, snap) {
			t.Fatal("reassembled snapshot differs")
		}
	})
}

func TestHashCheck(t *testing.T) {
	var h HashCheck
	if !h.Local(64, 1) || !h.Remote(64, 1) {
		t.Fatal("equal hashes reported a mismatch")
	}
	if !h.Remote(128, 2) {
		t.Fatal("a remote hash without local reported a mismatch")
	}
	if h.Local(128, 3) {
		t.Fatal("a divergence was not detected")
	}
	if st := h.Stats(); st.Matched != 1 || st.Mismatched != 1 || st.LastMismatchSeq != 128 {
		t.Fatalf("%+v", st)
	}
	// An old entry is overwritten by a newer one in the same slot, counted.
	h.Local(192, 1)
	h.Local(192+HashRing, 1)
	if h.Stats().Expired != 1 {
		t.Fatalf("%+v", h.Stats())
	}
}

func TestFetchNeedsRequestAtBurstBoundary(t *testing.T) {
	cs := chunks(bytes.Repeat([]byte("z"), 100), 3, 10)
	f := NewFetch(FetchConfig{})
	f.Start(0)
	var asked []uint64
	for i := range cs {
		f.OnChunk(&cs[i], 1)
		if req, ok := f.NeedsRequest(4, 10, 1); ok {
			asked = append(asked, req.Offset)
		}
	}
	if len(asked) != 2 || asked[0] != 40 || asked[1] != 80 {
		t.Fatalf("asked at %v, want [40 80]", asked)
	}
}

// TestFetchAfterRefusesSnapshotNotAhead (issue 15 item 4): the request from
// offset 0 carries the applied seq, and a snapshot offered at or below it
// stops the transfer at its first chunk instead of downloading it whole.
func TestFetchAfterRefusesSnapshotNotAhead(t *testing.T) {
	snap := bytes.Repeat([]byte("state!"), 100)
	f := NewFetch(FetchConfig{TimeoutNs: 100})
	req := f.StartAfter(500, 0)
	if req.Offset != 0 || req.SnapshotSeq != 500 {
		t.Fatalf("request %+v: want offset 0 carrying applied 500", req)
	}
	if req, _ := f.Poll(1000); req.SnapshotSeq != 500 || req.Offset != 0 {
		t.Fatalf("re-ask %+v", req)
	}
	old := chunks(snap, 400, 64)
	d, done, err := f.OnChunk(&old[0], 1001)
	if !errors.Is(err, ErrSnapshotNotAhead) || d != nil || done || f.Active() {
		t.Fatalf("snapshot 400 offered to a standby at 500: data %v done %v err %v active %v", d != nil, done, err, f.Active())
	}
	if f.Stats().NotAhead != 1 {
		t.Fatalf("stats %+v", f.Stats())
	}
	// A snapshot ahead is fetched as before; resumes name it.
	f.StartAfter(500, 2000)
	cs := chunks(snap, 600, 64)
	if d, _, err := f.OnChunk(&cs[0], 2001); d == nil || err != nil {
		t.Fatalf("snapshot 600: %v", err)
	}
	if req, ok := f.Poll(3000); !ok || req.SnapshotSeq != 600 || req.Offset != 64 {
		t.Fatalf("resume %+v", req)
	}
}
