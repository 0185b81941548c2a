package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestRefetchMarkerSurvivesReopen: the marker set is there after the
// journal is closed and reopened, and (MemFS) after any crash, since it
// was fsynced with its directory; Open ignores it; cleared, it is gone
// for good, and clearing a missing one is no error.
func TestRefetchMarkerSurvivesReopen(t *testing.T) {
	forEachCrash(t, func(t *testing.T, fsys FS, dir string, seed uint64) {
		j, _ := mustOpen(t, fsys, dir, Options{})
		appendRange(t, j, 1, 1, 5, fixed(8))
		if HasRefetchMarker(fsys, dir) {
			t.Fatal("a new journal directory has the marker")
		}
		if err := SetRefetchMarker(fsys, dir, true); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		crash(fsys, seed)
		if !HasRefetchMarker(fsys, dir) {
			t.Fatal("the marker did not survive the reopen")
		}
		j, _ = mustOpen(t, fsys, dir, Options{})
		if _, last := j.Last(); last != 5 {
			t.Fatalf("with the marker, Open found the journal up to %d, want 5", last)
		}
		j.Close()
		if err := SetRefetchMarker(fsys, dir, true); err != nil {
			t.Fatalf("setting a set marker: %v", err)
		}
		if err := SetRefetchMarker(fsys, dir, false); err != nil {
			t.Fatal(err)
		}
		crash(fsys, seed+1)
		if HasRefetchMarker(fsys, dir) {
			t.Fatal("the marker cleared came back")
		}
		if err := SetRefetchMarker(fsys, dir, false); err != nil {
			t.Fatalf("clearing a missing marker: %v", err)
		}
	})
}

// forEachCrash runs f on the real file system once and on a fresh MemFS
// for each of several crash seeds: a crash keeps a seeded random prefix of
// what was not synced, so one seed could keep it all and hide a missing
// fsync.
func forEachCrash(t *testing.T, f func(t *testing.T, fsys FS, dir string, seed uint64)) {
	t.Run("osfs", func(t *testing.T) { f(t, OSFS{}, t.TempDir(), 0) })
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("memfs-%d", seed), func(t *testing.T) { f(t, NewMemFS(), testDir, seed) })
	}
}

// crash loses what a MemFS did not sync; the real FS keeps everything.
func crash(fsys FS, seed uint64) {
	if m, ok := fsys.(*MemFS); ok {
		m.Crash(seed)
	}
}

// TestSetAsideThenOpenEmpty: a corrupt journal that Open refuses is set
// aside, every file renamed with the suffix of the time given (the marker
// and a set put aside before are left alone), durably; Open then finds an
// empty journal, and Sets names the set for the tools.
func TestSetAsideThenOpenEmpty(t *testing.T) {
	forEachCrash(t, func(t *testing.T, fsys FS, dir string, seed uint64) {
		j, _ := mustOpen(t, fsys, dir, Options{SegmentBytes: 4 << 10})
		appendRange(t, j, 1, 1, 400, fixed(40))
		if err := j.WriteSnapshot(200, 1, func(w io.Writer) error { _, err := w.Write([]byte("state")); return err }); err != nil {
			t.Fatal(err)
		}
		j.Close()
		damageFirstSegment(t, fsys, dir)
		if _, _, err := Open(fsys, dir, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open of the damaged journal: %v, want ErrCorrupt", err)
		}
		old := dir + "/" + segmentName(1) + AsideMarker + "1"
		f, err := fsys.OpenFile(old, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := SetRefetchMarker(fsys, dir, true); err != nil {
			t.Fatal(err)
		}
		before, _ := fsys.ReadDir(dir)

		moved, err := SetAside(fsys, dir, 1764580000)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(before) - 2; moved != want || want < 3 {
			t.Fatalf("set aside %d files of %v, want %d (all but the marker and the old set)", moved, before, want)
		}
		crash(fsys, seed)
		after, _ := fsys.ReadDir(dir)
		for _, name := range before {
			switch {
			case name == RefetchMarker || strings.HasSuffix(old, name):
				if !slices.Contains(after, name) {
					t.Errorf("%s was renamed; it should stay", name)
				}
			case !slices.Contains(after, name+AsideMarker+"1764580000"):
				t.Errorf("%s not set aside durably: %v", name, after)
			}
		}
		j, rec, err := Open(fsys, dir, Options{})
		if err != nil {
			t.Fatalf("Open after set-aside: %v", err)
		}
		defer j.Close()
		if _, last := j.Last(); last != 0 || rec.RecordsKept != 0 {
			t.Fatalf("Open after set-aside found records up to %d (%d kept), want an empty journal", last, rec.RecordsKept)
		}
		sets, err := Sets(fsys, dir)
		if err != nil || !slices.Contains(sets, AsideMarker+"1764580000") {
			t.Fatalf("Sets = %v, %v: the new set is missing", sets, err)
		}
	})
}

// damageFirstSegment flips a byte inside the first record of segment 1.
func damageFirstSegment(t *testing.T, fsys FS, dir string) {
	t.Helper()
	f, err := fsys.OpenFile(dir+"/"+segmentName(1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 30); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, 30); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// failFS fails the operations named in fail with errInjected.
type failFS struct {
	FS
	fail map[string]bool
}

var errInjected = errors.New("injected fault")

func (f *failFS) err(op string) error {
	if f.fail[op] {
		return errInjected
	}
	return nil
}

func (f *failFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.err("open"); err != nil {
		return nil, err
	}
	return f.FS.OpenFile(name, flag, perm)
}

func (f *failFS) Remove(name string) error {
	if err := f.err("remove"); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *failFS) Rename(oldName, newName string) error {
	if err := f.err("rename"); err != nil {
		return err
	}
	return f.FS.Rename(oldName, newName)
}

func (f *failFS) ReadDir(dir string) ([]string, error) {
	if err := f.err("readdir"); err != nil {
		return nil, err
	}
	return f.FS.ReadDir(dir)
}

func (f *failFS) SyncDir(dir string) error {
	if err := f.err("syncdir"); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

// TestAsideErrorsReported: every failing step of the marker and the
// set-aside is returned to the caller (which then refuses to lead), never
// swallowed; a failed file fsync too (MemFS.SetSyncError).
func TestAsideErrorsReported(t *testing.T) {
	forEachFS(t, func(t *testing.T, base FS, dir string) {
		j, _ := mustOpen(t, base, dir, Options{})
		appendRange(t, j, 1, 1, 3, fixed(8))
		j.Close()
		for _, op := range []string{"open", "syncdir"} {
			fsys := &failFS{FS: base, fail: map[string]bool{op: true}}
			if err := SetRefetchMarker(fsys, dir, true); !errors.Is(err, errInjected) {
				t.Errorf("set marker with %s failing: %v", op, err)
			}
		}
		for _, op := range []string{"remove", "syncdir"} {
			fsys := &failFS{FS: base, fail: map[string]bool{op: true}}
			if err := SetRefetchMarker(fsys, dir, false); !errors.Is(err, errInjected) {
				t.Errorf("clear marker with %s failing: %v", op, err)
			}
		}
		if HasRefetchMarker(&failFS{FS: base, fail: map[string]bool{"readdir": true}}, dir) {
			t.Error("an unreadable directory reports the marker")
		}
		for _, op := range []string{"readdir", "rename", "syncdir"} {
			fsys := &failFS{FS: base, fail: map[string]bool{op: true}}
			moved, err := SetAside(fsys, dir, 5)
			if !errors.Is(err, errInjected) {
				t.Errorf("set aside with %s failing: %v", op, err)
			}
			if op != "syncdir" && moved != 0 {
				t.Errorf("set aside with %s failing moved %d files", op, moved)
			}
		}
		if m, ok := base.(*MemFS); ok {
			m.SetSyncError(errInjected)
			if err := SetRefetchMarker(m, dir, true); !errors.Is(err, errInjected) {
				t.Errorf("set marker with fsync failing: %v", err)
			}
			m.SetSyncError(nil)
		}
	})
}

// TestSetAsideLeavesLock: the lock file a running node holds stays under
// its name, so the next process meets the lock the running one holds.
func TestSetAsideLeavesLock(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{LockFileName, segmentName(1)} {
		if err := os.WriteFile(dir+"/"+name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if moved, err := SetAside(OSFS{}, dir, 7); err != nil || moved != 1 {
		t.Fatalf("SetAside: moved %d, %v; want the segment only", moved, err)
	}
	if _, err := os.Stat(dir + "/" + LockFileName); err != nil {
		t.Fatalf("the lock file was moved: %v", err)
	}
}
