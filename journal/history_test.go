package journal

import (
	"os"
	"testing"
)

// A history id (and a fence) round-trips, a directory without one reads 0, a corrupt
// file is an error, and setting aside a corrupt journal keeps the id.
func TestHistoryID(t *testing.T) {
	for _, fsys := range []FS{NewMemFS(), OSFS{}} {
		dir := "/j"
		if _, ok := fsys.(OSFS); ok {
			dir = t.TempDir()
		}
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if id, err := ReadHistoryID(fsys, dir); id != 0 || err != nil {
			t.Fatalf("no file: %#x %v", id, err)
		}
		if err := WriteHistoryID(fsys, dir, 0); err == nil {
			t.Fatal("id 0 written")
		}
		for _, want := range []uint64{0xfeedface00000001, 7} {
			if err := WriteHistoryID(fsys, dir, want); err != nil {
				t.Fatal(err)
			}
			if id, err := ReadHistoryID(fsys, dir); id != want || err != nil {
				t.Fatalf("read %#x %v, want %#x", id, err, want)
			}
		}
		if e, err := ReadFence(fsys, dir); e != 0 || err != nil {
			t.Fatalf("no fence: %d %v", e, err)
		}
		if err := WriteFence(fsys, dir, 3); err != nil {
			t.Fatal(err)
		}
		if _, err := SetAside(fsys, dir, 1); err != nil {
			t.Fatal(err)
		}
		if id, err := ReadHistoryID(fsys, dir); id != 7 || err != nil {
			t.Fatalf("after SetAside: %#x %v", id, err)
		}
		if e, err := ReadFence(fsys, dir); e != 3 || err != nil {
			t.Fatalf("fence after SetAside: %d %v", e, err)
		}
		f, err := fsys.OpenFile(dir+"/"+HistoryFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("not hex\n"))
		f.Close()
		if _, err := ReadHistoryID(fsys, dir); err == nil {
			t.Fatal("corrupt id read without error")
		}
	}
}
