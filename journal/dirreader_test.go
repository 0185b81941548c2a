package journal

import (
	"fmt"
	"io"
	"slices"
	"testing"
)

// TestDirReader: the read-only view lists the snapshots kept newest first,
// opens each, and scans the records in order, while the journal is open.
func TestDirReader(t *testing.T) {
	fsys := NewMemFS()
	j, _, err := Open(fsys, "/j", Options{Policy: SyncAlways, SegmentBytes: MinSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for seq := uint64(1); seq <= 300; seq++ {
		if err := j.Append(1, seq, []byte(fmt.Sprint("record ", seq)), 0); err != nil {
			t.Fatal(err)
		}
		if seq%100 == 0 {
			if err := j.WriteSnapshot(seq, 1, func(w io.Writer) error { _, err := fmt.Fprint(w, "state at ", seq); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := DirReader{FS: fsys, Dir: "/j"}
	seqs, err := d.SnapshotSeqs()
	if err != nil || !slices.Equal(seqs, []uint64{300, 200}) {
		t.Fatalf("SnapshotSeqs = %v, %v", seqs, err)
	}
	r, err := d.OpenSnapshot(200)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(b) != "state at 200" {
		t.Fatalf("snapshot 200: %q, %v", b, err)
	}
	if _, err := d.OpenSnapshot(100); err == nil { // pruned: the journal keeps two
		t.Fatal("opened a pruned snapshot")
	}
	next := uint64(1)
	err = d.Scan(func(seq uint64, payload []byte) bool {
		if seq != next || string(payload) != fmt.Sprint("record ", seq) {
			t.Fatalf("record %d: %q, want seq %d", seq, payload, next)
		}
		next++
		return seq < 250
	})
	if err != nil || next != 251 {
		t.Fatalf("Scan stopped at %d: %v", next, err)
	}
}
