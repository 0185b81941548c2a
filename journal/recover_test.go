package journal

import (
	"errors"
	"path/filepath"
	"testing"
)

const recSegBytes = 4096

// buildSegment returns the bytes of a one-segment journal holding n
// records, the records, and the end offset of each record.
func buildSegment(t tb, n uint64) ([]byte, []record, []int) {
	t.Helper()
	fsys := NewMemFS()
	j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: recSegBytes})
	want := appendRange(t, j, 1, 1, n, varied)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := fsys.ReadFileForTest(segPath(1))
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]int, n)
	off := 0
	for i, r := range want {
		off += recordHeaderBytes + len(r.payload)
		ends[i] = off
	}
	return data, want, ends
}

func openBytes(t tb, data []byte) (*Journal, Recovery, error) {
	t.Helper()
	fsys := NewMemFS()
	if err := fsys.MkdirAll(testDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFileForTest(segPath(1), data); err != nil {
		t.Fatal(err)
	}
	return Open(fsys, testDir, Options{SegmentBytes: recSegBytes})
}

// TestRecoverTornTailEveryOffset cuts the segment at every byte offset of its
// last records, both as a short file and as a preallocated file whose tail
// reads as zeros, and checks that exactly the whole records survive and the
// journal accepts the next seq.
func TestRecoverTornTailEveryOffset(t *testing.T) {
	const n = 20
	data, want, ends := buildSegment(t, n)
	for cut := ends[n-4]; cut <= ends[n-1]; cut++ {
		kept := 0
		for kept < n && ends[kept] <= cut {
			kept++
		}
		short := append([]byte(nil), data[:cut]...)
		zeroed := make([]byte, recSegBytes)
		copy(zeroed, data[:cut])
		for name, file := range map[string][]byte{"short": short, "zeroed": zeroed} {
			j, rec, err := openBytes(t, file)
			if err != nil {
				t.Fatalf("%s cut %d: %v", name, cut, err)
			}
			checkRecords(t, readAll(t, j), want[:kept])
			wantCut := int64(0)
			for i := ends[kept-1]; i < cut; i++ {
				if data[i] != 0 {
					wantCut = int64(i + 1 - ends[kept-1])
				}
			}
			if rec.BytesCut != wantCut || rec.LastSeq != uint64(kept) || j.Durable() != uint64(kept) {
				t.Fatalf("%s cut %d: recovery %+v, want %d bytes cut", name, cut, rec, wantCut)
			}
			more := appendRange(t, j, 1, uint64(kept+1), uint64(kept+2), fixed(3))
			checkRecords(t, readAll(t, j), append(append([]record(nil), want[:kept]...), more...))
			j.Close()
		}
	}
}

// TestRecoverBitFlips flips one bit of every byte of the last records. A
// damaged last record is a torn tail and is cut; a damaged record with
// valid records after it is mid-log corruption. No damaged record is ever
// returned.
func TestRecoverBitFlips(t *testing.T) {
	const n = 20
	data, want, ends := buildSegment(t, n)
	for pos := ends[n-4]; pos < ends[n-1]+8; pos++ {
		damaged := append([]byte(nil), data...)
		damaged[pos] ^= 1 << (pos % 8)
		victim := 0
		for victim < n && ends[victim] <= pos {
			victim++
		}
		j, rec, err := openBytes(t, damaged)
		switch {
		case victim < n-1:
			if !isCorrupt(err) {
				t.Fatalf("flip at %d (record %d of %d): err %v, want ErrCorrupt", pos, victim+1, n, err)
			}
			var ce *CorruptError
			errors.As(err, &ce)
			if ce.Offset != int64(ends[victim-1]) || ce.Seq != uint64(victim+1) {
				t.Fatalf("flip at %d: corrupt error %+v", pos, ce)
			}
		case err != nil:
			t.Fatalf("flip at %d: %v", pos, err)
		default:
			checkRecords(t, readAll(t, j), want[:min(victim, n)])
			if rec.BytesCut == 0 {
				t.Fatalf("flip at %d: nothing reported cut", pos)
			}
			j.Close()
		}
	}
}

func TestRecoverMidLogCorruption(t *testing.T) {
	opts := Options{SegmentBytes: recSegBytes}
	build := func() (*MemFS, []string) {
		fsys := NewMemFS()
		j, _ := mustOpen(t, fsys, testDir, opts)
		appendRange(t, j, 1, 1, 300, varied)
		j.Close()
		names, _ := fsys.ReadDir(testDir)
		return fsys, names
	}
	t.Run("bit flip in a rolled segment", func(t *testing.T) {
		fsys, names := build()
		p := filepath.Join(testDir, names[1])
		data, _ := fsys.ReadFileForTest(p)
		data[100] ^= 0x40
		fsys.WriteFileForTest(p, data)
		_, _, err := Open(fsys, testDir, opts)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != names[1] || ce.Offset > 100 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("flip in the last record of a rolled segment", func(t *testing.T) {
		fsys, names := build()
		j, _ := mustOpen(t, fsys, testDir, opts)
		end := j.segs[0].endOffset
		j.Close()
		p := filepath.Join(testDir, names[0])
		data, _ := fsys.ReadFileForTest(p)
		data[end-1] ^= 1
		fsys.WriteFileForTest(p, data)
		if _, _, err := Open(fsys, testDir, opts); !isCorrupt(err) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("garbage after the end of a rolled segment", func(t *testing.T) {
		fsys, names := build()
		p := filepath.Join(testDir, names[0])
		data, _ := fsys.ReadFileForTest(p)
		data[len(data)-1] = 1
		fsys.WriteFileForTest(p, data)
		if _, _, err := Open(fsys, testDir, opts); !isCorrupt(err) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing middle segment", func(t *testing.T) {
		fsys, names := build()
		fsys.Remove(filepath.Join(testDir, names[1]))
		_, _, err := Open(fsys, testDir, opts)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != names[2] {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("zeroed header in the middle of the last segment", func(t *testing.T) {
		fsys, names := build()
		last := names[len(names)-1]
		p := filepath.Join(testDir, last)
		data, _ := fsys.ReadFileForTest(p)
		clear(data[0:recordHeaderBytes])
		fsys.WriteFileForTest(p, data)
		if _, _, err := Open(fsys, testDir, opts); !isCorrupt(err) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("ReadFrom re-verifies", func(t *testing.T) {
		fsys, names := build()
		j, _ := mustOpen(t, fsys, testDir, opts)
		defer j.Close()
		p := filepath.Join(testDir, names[0])
		data, _ := fsys.ReadFileForTest(p)
		data[30] ^= 1
		fsys.WriteFileForTest(p, data) // damage after Open
		err := j.ReadFrom(1, func(_, _ uint64, _ []byte) bool { return true })
		if !isCorrupt(err) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestRecoverEmptyLastSegment(t *testing.T) {
	fsys := NewMemFS()
	opts := Options{SegmentBytes: recSegBytes}
	j, _ := mustOpen(t, fsys, testDir, opts)
	want := appendRange(t, j, 1, 1, 100, varied)
	j.Close()
	// A crash right after a roll: the new segment exists, zero-filled.
	next := want[len(want)-1].seq + 1
	fsys.WriteFileForTest(segPath(next), make([]byte, recSegBytes))
	j, rec := mustOpen(t, fsys, testDir, opts)
	defer j.Close()
	if !rec.RemovedEmpty || rec.LastSeq != 100 {
		t.Fatalf("recovery %+v", rec)
	}
	want = append(want, appendRange(t, j, 1, 101, 150, varied)...)
	checkRecords(t, readAll(t, j), want)
}

// TestCrashKeepsDurable crashes a MemFS at many seeds under each crash-safe
// policy: everything Durable() reported survives, nothing else is invented.
func TestCrashKeepsDurable(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncGroup, SyncAlways} {
		for seed := uint64(0); seed < 60; seed++ {
			fsys := NewMemFS()
			opts := Options{SegmentBytes: recSegBytes, Policy: policy, GroupRecords: 5, GroupWindowNs: 30}
			j, _ := mustOpen(t, fsys, testDir, opts)
			var want []record
			for seq := uint64(1); seq <= 120+seed; seq++ {
				p := payloadFor(seq, varied(seq+seed))
				if err := j.Append(1+seq/50, seq, p, int64(seq*7)); err != nil {
					t.Fatal(err)
				}
				want = append(want, record{1 + seq/50, seq, p})
				if (seq+seed)%3 == 0 && j.SyncDue(int64(seq*7)) {
					if err := j.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			durable := j.Durable()
			fsys.Crash(seed)
			j2, rec, err := Open(fsys, testDir, opts)
			if err != nil {
				t.Fatalf("%v seed %d: %v", policy, seed, err)
			}
			got := readAll(t, j2)
			if uint64(len(got)) < durable || rec.LastSeq != uint64(len(got)) {
				t.Fatalf("%v seed %d: recovered %d records, durable was %d (%+v)", policy, seed, len(got), durable, rec)
			}
			checkRecords(t, got, want[:len(got)])
			j2.Close()
		}
	}
}

func FuzzRecover(f *testing.F) {
	data, _, ends := buildSegment(f, 12)
	f.Add(data[:ends[11]])
	f.Add(data[:ends[5]+7])
	f.Add(data)
	flipped := append([]byte(nil), data[:ends[11]]...)
	flipped[ends[3]+5] ^= 4
	f.Add(flipped)
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, rec, err := openBytes(t, data)
		if err != nil {
			if !isCorrupt(err) {
				t.Fatalf("Open returned a non-corruption error: %v", err)
			}
			return
		}
		defer j.Close()
		got := readAll(t, j) // ReadFrom re-verifies every CRC
		if uint64(len(got)) != rec.RecordsKept {
			t.Fatalf("read %d records, recovery says %d", len(got), rec.RecordsKept)
		}
		for i, r := range got {
			if r.seq != uint64(i+1) {
				t.Fatalf("record %d has seq %d", i, r.seq)
			}
			if i > 0 && r.epoch < got[i-1].epoch {
				t.Fatalf("epoch decreases at %d", i)
			}
		}
		if err := j.Append(rec.HighestEpoch, rec.LastSeq+1, []byte("next"), 0); err != nil {
			t.Fatal(err)
		}
	})
}
