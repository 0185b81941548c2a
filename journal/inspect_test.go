package journal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Records of a 40-byte payload are 64 bytes: 64 to a 4 KiB segment.
const (
	inspectPayloadBytes = 40
	inspectRecordBytes  = recordHeaderBytes + inspectPayloadBytes
	inspectSegmentBytes = 4096
)

// buildInspectJournal writes records 1..150 (segments at 1, 65 and 129),
// epoch 1 up to 70 and epoch 2 after, and a snapshot at 100, on disk.
func buildInspectJournal(t *testing.T) (dir string, want []record) {
	t.Helper()
	dir = t.TempDir()
	j, _ := mustOpen(t, OSFS{}, dir, Options{SegmentBytes: inspectSegmentBytes, Policy: SyncAlways})
	want = appendRange(t, j, 1, 1, 70, fixed(inspectPayloadBytes))
	want = append(want, appendRange(t, j, 2, 71, 150, fixed(inspectPayloadBytes))...)
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteSnapshot(100, 2, func(w io.Writer) error {
		_, err := w.Write(bytes.Repeat([]byte("state"), 100))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

type fileState struct {
	data  []byte
	mtime time.Time
	mode  os.FileMode
}

// dirState reads every file's bytes and mtime and the directory's mtime.
func dirState(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	out["."] = fileState{mtime: fi.ModTime(), mode: fi.Mode()}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fileState{data: b, mtime: fi.ModTime(), mode: fi.Mode()}
	}
	return out
}

// ageDir sets every mtime an hour back, so that any write shows.
func ageDir(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(dir, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
}

func sameDirState(t *testing.T, before, after map[string]fileState) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("directory had %d entries, now %d", len(before), len(after))
	}
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Fatalf("%s disappeared", name)
		case !bytes.Equal(a.data, b.data):
			t.Fatalf("%s: bytes changed", name)
		case !a.mtime.Equal(b.mtime):
			t.Fatalf("%s: mtime changed from %v to %v", name, b.mtime, a.mtime)
		case a.mode != b.mode:
			t.Fatalf("%s: mode changed", name)
		}
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func scanAll(t *testing.T, dir string, opts InspectOptions) ([]record, error) {
	t.Helper()
	var got []record
	err := Scan(OSFS{}, dir, opts, func(r Record) bool {
		got = append(got, record{r.Epoch, r.Seq, append([]byte(nil), r.Payload...)})
		return true
	})
	return got, err
}

func TestInspectGoodJournal(t *testing.T) {
	dir, want := buildInspectJournal(t)
	d, err := Inspect(OSFS{}, dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.FirstProblem(false); p != nil {
		t.Fatalf("problem in a good journal: %v", p)
	}
	if len(d.Segments) != 3 {
		t.Fatalf("segments %+v, want 3", d.Segments)
	}
	for i, s := range d.Segments {
		first := uint64(1 + 64*i)
		last := min(first+63, 150)
		if s.FirstSeq != first || s.LastSeq != last || s.Records != last-first+1 ||
			s.UsedBytes != int64(s.Records)*inspectRecordBytes || s.FileBytes != inspectSegmentBytes {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	if s := d.Segments[1]; s.FirstEpoch != 1 || s.LastEpoch != 2 {
		t.Fatalf("segment 2 epochs %d..%d, want 1..2", s.FirstEpoch, s.LastEpoch)
	}
	if d.FirstSeq != 1 || d.LastSeq != 150 || d.Records != 150 || d.HighestEpoch != 2 || d.DurableSeq != 150 {
		t.Fatalf("description %+v", d)
	}
	if len(d.Snapshots) != 1 || !d.Snapshots[0].Valid || d.Snapshots[0].Seq != 100 || d.Snapshots[0].Epoch != 2 ||
		d.Snapshots[0].RawBytes != 500 || d.LatestSnapshot != 100 {
		t.Fatalf("snapshots %+v", d.Snapshots)
	}
	got, err := scanAll(t, dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, want)
}

// An inspection must leave a torn tail where it is (Open would cut it):
// bytes and mtimes of every file and of the directory stay the same.
func TestInspectIsReadOnly(t *testing.T) {
	dir, want := buildInspectJournal(t)
	last := filepath.Join(dir, segmentName(129))
	tornOff := int64(150-128) * inspectRecordBytes
	writeAt(t, last, tornOff, []byte{30, 0, 0, 0, 1, 2, 3, 4, 1, 0, 0, 0}) // half a header
	ageDir(t, dir)
	before := dirState(t, dir)

	d, err := Inspect(OSFS{}, dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := scanAll(t, dir, InspectOptions{})
	if err != nil {
		t.Fatalf("Scan of a torn tail: %v", err)
	}
	sameDirState(t, before, dirState(t, dir))

	checkRecords(t, got, want)
	if len(d.Problems) != 0 || d.TornTail == nil || d.TornTail.Offset != tornOff || d.TornTail.File != segmentName(129) {
		t.Fatalf("torn tail %+v, problems %+v; want the tail at %d", d.TornTail, d.Problems, tornOff)
	}
	if d.FirstProblem(true) != nil || d.FirstProblem(false) != d.TornTail {
		t.Fatal("FirstProblem does not honour allowTornTail")
	}
	// What Inspect reports is what Open does.
	j, rec, err := Open(OSFS{}, dir, Options{SegmentBytes: inspectSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if rec.CutOffset != tornOff || rec.BytesCut != 9 {
		t.Fatalf("Open cut %d bytes at %d, want 9 at %d", rec.BytesCut, rec.CutOffset, tornOff)
	}
}

func TestReadOnlyFSRefusesWrites(t *testing.T) {
	dir, _ := buildInspectJournal(t)
	ro := ReadOnly(OSFS{})
	seg := filepath.Join(dir, segmentName(1))
	for _, flag := range []int{os.O_RDWR, os.O_WRONLY, os.O_RDONLY | os.O_CREATE, os.O_RDONLY | os.O_TRUNC} {
		if _, err := ro.OpenFile(seg, flag, 0o644); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("OpenFile flag %#x: %v, want ErrReadOnly", flag, err)
		}
	}
	f, err := ro.OpenFile(seg, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, err := range map[string]error{
		"Truncate": f.Truncate(0), "Preallocate": f.Preallocate(1 << 20), "Sync": f.Sync(),
		"Remove": ro.Remove(seg), "Rename": ro.Rename(seg, seg+".x"), "MkdirAll": ro.MkdirAll(dir+"/x", 0o755),
		"SyncDir": ro.SyncDir(dir),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("%s: %v, want ErrReadOnly", name, err)
		}
	}
	if _, err := f.WriteAt([]byte{1}, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("WriteAt: %v", err)
	}
	// Open itself fails on a read-only file system rather than recovering.
	if _, _, err := Open(ro, dir, Options{SegmentBytes: inspectSegmentBytes}); err == nil {
		t.Fatal("Open succeeded on a read-only file system")
	}
}

func TestInspectCorruptByteMidSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  uint64 // segment first seq
		seq  uint64 // record to damage
	}{
		{"rolled segment", 65, 90},
		{"last segment", 129, 140},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, want := buildInspectJournal(t)
			recOff := int64(tc.seq-tc.seg) * inspectRecordBytes
			byteOff := recOff + recordHeaderBytes + 17 // in the payload
			path := filepath.Join(dir, segmentName(tc.seg))
			b, _ := os.ReadFile(path)
			writeAt(t, path, byteOff, []byte{b[byteOff] ^ 0x40})

			d, err := Inspect(OSFS{}, dir, InspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p := d.FirstProblem(false)
			if p == nil || p.Kind != ProblemChecksum || p.File != segmentName(tc.seg) || p.Offset != recOff || p.Seq != tc.seq {
				t.Fatalf("first problem %+v, want a checksum problem in %s at %d seq %d", p, segmentName(tc.seg), recOff, tc.seq)
			}
			if d.LastSeq != tc.seq-1 || d.DurableSeq != tc.seq-1 {
				t.Fatalf("valid prefix ends at %d, want %d", d.LastSeq, tc.seq-1)
			}
			got, err := scanAll(t, dir, InspectOptions{})
			var sp *Problem
			if !errors.As(err, &sp) || !errors.Is(err, ErrCorrupt) || sp.Offset != recOff {
				t.Fatalf("Scan: %v, want the problem at %d", err, recOff)
			}
			checkRecords(t, got, want[:tc.seq-1])
		})
	}
}

func TestInspectSnapshotProblems(t *testing.T) {
	t.Run("damaged snapshot", func(t *testing.T) {
		dir, _ := buildInspectJournal(t)
		snap := filepath.Join(dir, snapshotName(100))
		writeAt(t, snap, snapshotHeaderBytes+3, []byte{0xff, 0xfe})
		d, err := Inspect(OSFS{}, dir, InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := d.FirstProblem(true)
		if p == nil || p.Kind != ProblemSnapshot || p.File != snapshotName(100) || d.Snapshots[0].Valid {
			t.Fatalf("problem %+v snapshots %+v, want the snapshot damaged", p, d.Snapshots)
		}
	})
	t.Run("broken chain", func(t *testing.T) {
		dir, _ := buildInspectJournal(t)
		j, _ := mustOpen(t, OSFS{}, dir, Options{SegmentBytes: inspectSegmentBytes})
		// A second snapshot, so Compact may remove what lies below the
		// first (it keeps the journal after the older kept snapshot).
		if err := j.WriteSnapshot(101, 2, func(w io.Writer) error {
			_, err := w.Write(bytes.Repeat([]byte("state"), 100))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n, err := j.Compact(); err != nil || n != 1 {
			t.Fatalf("Compact: %d, %v", n, err)
		}
		j.Close()
		d, err := Inspect(OSFS{}, dir, InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p := d.FirstProblem(true); p != nil {
			t.Fatalf("compacted journal with its snapshot: %v", p)
		}
		for _, seq := range []uint64{100, 101} {
			if err := os.Remove(filepath.Join(dir, snapshotName(seq))); err != nil {
				t.Fatal(err)
			}
		}
		d, err = Inspect(OSFS{}, dir, InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := d.FirstProblem(true)
		if p == nil || p.Kind != ProblemSnapshotChain || p.Seq != 65 {
			t.Fatalf("problem %+v, want a broken snapshot chain at 65", p)
		}
	})
}

// A node that finds its journal corrupt renames every file with a
// .corrupt-<time> suffix; the inspection reads that set as it would the
// live one.
func TestInspectSetAside(t *testing.T) {
	dir, want := buildInspectJournal(t)
	const set = ".corrupt-1764580000"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.Rename(p, p+set); err != nil {
			t.Fatal(err)
		}
	}
	// A new, live journal beside it, as after the node refetched.
	j, _ := mustOpen(t, OSFS{}, dir, Options{SegmentBytes: inspectSegmentBytes})
	appendRange(t, j, 3, 1, 5, fixed(8))
	j.Close()

	sets, err := Sets(OSFS{}, dir)
	if err != nil || len(sets) != 2 || sets[0] != "" || sets[1] != set {
		t.Fatalf("Sets: %q, %v", sets, err)
	}
	d, err := Inspect(OSFS{}, dir, InspectOptions{Set: set})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.FirstProblem(false); p != nil || len(d.Segments) != 3 || d.LastSeq != 150 || len(d.Snapshots) != 1 || !d.Snapshots[0].Valid {
		t.Fatalf("set aside: problem %v, %+v", p, d)
	}
	if d.Segments[0].Name != segmentName(1)+set {
		t.Fatalf("segment name %q", d.Segments[0].Name)
	}
	got, err := scanAll(t, dir, InspectOptions{Set: set})
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, want)
	live, err := Inspect(OSFS{}, dir, InspectOptions{})
	if err != nil || live.LastSeq != 5 || len(live.Segments) != 1 || len(live.Snapshots) != 0 {
		t.Fatalf("live set: %+v, %v", live, err)
	}
}
