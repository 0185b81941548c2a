package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func snapshotState(seq uint64) []byte {
	return bytes.Repeat([]byte("state at "+strings.Repeat("x", int(seq%7))), int(seq))
}

func writeSnap(t *testing.T, j *Journal, seq, epoch uint64) {
	t.Helper()
	err := j.WriteSnapshot(seq, epoch, func(w io.Writer) error {
		_, err := w.Write(snapshotState(seq))
		return err
	})
	if err != nil {
		t.Fatalf("WriteSnapshot(%d): %v", seq, err)
	}
}

func readSnap(t *testing.T, j *Journal) (uint64, uint64, []byte, error) {
	t.Helper()
	seq, epoch, r, err := j.OpenLatestSnapshot()
	if err != nil {
		return 0, 0, nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return seq, epoch, data, err
}

func TestSnapshotRoundTripAndRetention(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		j, _ := mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes})
		defer j.Close()
		if _, _, _, err := j.OpenLatestSnapshot(); !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("got %v", err)
		}
		for _, seq := range []uint64{100, 200, 300} {
			writeSnap(t, j, seq, seq/100)
		}
		seq, epoch, data, err := readSnap(t, j)
		if err != nil || seq != 300 || epoch != 3 || !bytes.Equal(data, snapshotState(300)) {
			t.Fatalf("read (%d, %d, %d bytes, %v)", seq, epoch, len(data), err)
		}
		names, _ := fsys.ReadDir(dir)
		if strings.Join(names, ",") != snapshotName(200)+","+snapshotName(300) {
			t.Fatalf("kept %v, want the newest %d", names, SnapshotsKept)
		}
		// A failing writer leaves nothing behind.
		boom := errors.New("engine failed")
		if err := j.WriteSnapshot(400, 4, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if names2, _ := fsys.ReadDir(dir); len(names2) != len(names) {
			t.Fatalf("failed snapshot left files: %v", names2)
		}
	})
}

func TestSnapshotCorruption(t *testing.T) {
	fsys := NewMemFS()
	j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: recSegBytes})
	defer j.Close()
	writeSnap(t, j, 200, 2)
	writeSnap(t, j, 300, 3)
	p300 := filepath.Join(testDir, snapshotName(300))
	good, _ := fsys.ReadFileForTest(p300)
	for pos := 0; pos < len(good); pos++ {
		bad := append([]byte(nil), good...)
		bad[pos] ^= 0x10
		fsys.WriteFileForTest(p300, bad)
		seq, _, data, err := readSnap(t, j)
		if err != nil || seq != 200 || !bytes.Equal(data, snapshotState(200)) {
			t.Fatalf("flip at %d: fell back to (%d, %v), want the previous snapshot", pos, seq, err)
		}
	}
	// The reader itself checks the decompressed bytes: forge a file whose
	// file checksum is right but whose recorded raw CRC is not.
	forged := append([]byte(nil), good...)
	tr := len(forged) - snapshotTrailerBytes
	binary.LittleEndian.PutUint32(forged[tr+16:], binary.LittleEndian.Uint32(forged[tr+16:])^1)
	binary.LittleEndian.PutUint32(forged[tr+20:], crc32.Checksum(forged[:tr+20], castagnoli))
	fsys.WriteFileForTest(p300, forged)
	if _, _, _, err := readSnap(t, j); !isCorrupt(err) {
		t.Fatalf("forged raw checksum read back: %v", err)
	}
	// Both damaged: ErrCorrupt.
	p200 := filepath.Join(testDir, snapshotName(200))
	b200, _ := fsys.ReadFileForTest(p200)
	b200[40] ^= 1
	fsys.WriteFileForTest(p200, b200)
	fsys.WriteFileForTest(p300, good[:len(good)-1])
	if _, _, _, err := j.OpenLatestSnapshot(); !isCorrupt(err) {
		t.Fatalf("got %v", err)
	}
}

func TestCompact(t *testing.T) {
	fsys := NewMemFS()
	opts := Options{SegmentBytes: recSegBytes}
	j, _ := mustOpen(t, fsys, testDir, opts)
	want := appendRange(t, j, 1, 1, 300, varied)
	if n, err := j.Compact(); n != 0 || err != nil {
		t.Fatalf("compact without snapshot: %d %v", n, err)
	}
	segs := len(j.segs)
	snapSeq := j.segs[2].lastSeq + 5 // inside segment 3
	// One snapshot: the state before it is the empty one, from seq 1.
	writeSnap(t, j, 10, 1)
	if n, err := j.Compact(); n != 0 || err != nil || j.First() != 1 {
		t.Fatalf("compact with one snapshot: %d %v, first %d", n, err, j.First())
	}
	writeSnap(t, j, snapSeq, 1)
	// Two: the journal continues from the older (10), so nothing goes.
	if n, err := j.Compact(); n != 0 || err != nil {
		t.Fatalf("compact below snapshot 10: %d %v", n, err)
	}
	writeSnap(t, j, snapSeq+1, 1) // prunes 10: snapSeq is the older now
	n, err := j.Compact()
	if err != nil || n != 3 {
		t.Fatalf("Compact = %d, %v; want 3 of %d", n, err, segs)
	}
	if j.First() > snapSeq+1 || j.First() != j.segs[0].firstSeq {
		t.Fatalf("First = %d, snapshot at %d", j.First(), snapSeq)
	}
	if err := j.ReadFrom(1, func(_, _ uint64, _ []byte) bool { return true }); !errors.Is(err, ErrCompacted) {
		t.Fatalf("ReadFrom below first: %v", err)
	}
	first := j.First()
	j.Close()
	fsys.Crash(3)
	j, rec := mustOpen(t, fsys, testDir, opts)
	defer j.Close()
	if rec.FirstSeq != first || rec.LastSeq != 300 {
		t.Fatalf("recovery after compaction %+v", rec)
	}
	checkRecords(t, readAll(t, j), want[first-1:])
	// The journal keeps everything after the older snapshot: what it
	// removes is bounded by snapSeq+1, not by the newest.
	writeSnap(t, j, 10_000, 1)
	if n, err := j.Compact(); err != nil || n != 0 || j.First() != first {
		t.Fatalf("compact with an older snapshot kept: removed %d, %v, first %d want %d", n, err, j.First(), first)
	}
	// A third snapshot prunes snapSeq's; the older kept one is then
	// 10,000, past everything, and the segment being written is never
	// removed.
	writeSnap(t, j, 10_001, 1)
	if _, err := j.Compact(); err != nil || len(j.segs) != 1 {
		t.Fatalf("compact all: %v, %d segments", err, len(j.segs))
	}
	appendRange(t, j, 1, 301, 302, varied)
}

func TestDropSnapshotsAboveAndEpochAt(t *testing.T) {
	fs := NewMemFS()
	j, _, err := Open(fs, "/j", Options{Policy: SyncAlways, SegmentBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 30; seq++ {
		epoch := uint64(1)
		if seq > 20 {
			epoch = 2
		}
		if err := j.Append(epoch, seq, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
	}
	writeSnap(t, j, 10, 1)
	writeSnap(t, j, 25, 2)
	if err := j.DropSnapshotsAbove(20); err != nil {
		t.Fatal(err)
	}
	if seq, _, _, err := readSnap(t, j); err != nil || seq != 10 {
		t.Fatalf("latest snapshot after drop: %d %v", seq, err)
	}
	for _, c := range []struct {
		seq, epoch uint64
		ok         bool
	}{{5, 1, true}, {20, 1, true}, {21, 2, true}, {30, 2, true}, {31, 0, false}, {0, 0, false}} {
		if e, ok := j.EpochAt(c.seq); e != c.epoch || ok != c.ok {
			t.Fatalf("EpochAt(%d) = %d %v, want %d %v", c.seq, e, ok, c.epoch, c.ok)
		}
	}
}
