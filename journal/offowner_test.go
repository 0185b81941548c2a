package journal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// The owner (a node's agent) does no segment file creation, preallocation,
// removal or directory sync in the steady state: a roll renames the spare
// prepared ahead (Options.PrepareAhead) and a snapshot's compaction
// removes its segments on a goroutine of its own (compactBehindAsync).

// opFS records renames and segment creations and can fail or hold the
// spare's creation and segment removals.
type opFS struct {
	FS
	mu        sync.Mutex
	renames   [][2]string
	creates   []string // segment files created with O_EXCL (at a roll)
	failSpare error
	// failPrealloc: the spare is created, and its fallocate fails (a
	// full disk).
	failPrealloc error
	failRemove   error
	holdRemove   chan struct{} // removals wait for it while non-nil
}

func (f *opFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	base := filepath.Base(name)
	f.mu.Lock()
	fail, failPrealloc := f.failSpare, f.failPrealloc
	if flag&os.O_EXCL != 0 && strings.HasSuffix(base, ".seg") {
		f.creates = append(f.creates, base)
	}
	f.mu.Unlock()
	if base == SpareSegmentName && fail != nil {
		return nil, fail
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err == nil && base == SpareSegmentName && failPrealloc != nil {
		return noRoomFile{File: file, err: failPrealloc}, nil
	}
	return file, err
}

// noRoomFile is a file whose fallocate fails.
type noRoomFile struct {
	File
	err error
}

func (f noRoomFile) Preallocate(int64) error { return f.err }

func (f *opFS) Rename(oldName, newName string) error {
	f.mu.Lock()
	f.renames = append(f.renames, [2]string{filepath.Base(oldName), filepath.Base(newName)})
	f.mu.Unlock()
	return f.FS.Rename(oldName, newName)
}

func (f *opFS) Remove(name string) error {
	f.mu.Lock()
	hold, fail := f.holdRemove, f.failRemove
	f.mu.Unlock()
	if !strings.HasSuffix(name, ".seg") {
		return f.FS.Remove(name)
	}
	if hold != nil {
		<-hold
	}
	if fail != nil {
		return fail
	}
	return f.FS.Remove(name)
}

func (f *opFS) counts() (renames [][2]string, creates []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.renames), slices.Clone(f.creates)
}

func (f *opFS) set(fn func(f *opFS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// waitSpare waits for the preparer, as a roll long after the last does.
func waitSpare(j *Journal) {
	if j.spareDone != nil {
		<-j.spareDone
	}
}

func hasFile(t *testing.T, fsys FS, dir, name string) bool {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(names, name)
}

// TestPrepareAheadRollRenamesTheSpare: with PrepareAhead every roll
// renames the spare to the new segment's name and a new spare is
// prepared; the log reads back whole, before and after a reopen, and a
// closed journal leaves no spare behind.
func TestPrepareAheadRollRenamesTheSpare(t *testing.T) {
	forEachFS(t, func(t *testing.T, base FS, dir string) {
		defer goleak.VerifyNone(t)
		fsys := &opFS{FS: base}
		opts := Options{SegmentBytes: recSegBytes, PrepareAhead: true, Policy: SyncGroup}
		j, _ := mustOpen(t, fsys, dir, opts)
		var want []record
		for seq := uint64(1); seq <= 400; seq++ {
			if (seq-1)%20 == 0 {
				waitSpare(j)
			}
			want = append(want, appendRange(t, j, 1, seq, seq, fixed(40))...)
		}
		waitSpare(j)
		renames, creates := fsys.counts()
		if len(j.segs) < 4 || len(renames) != len(j.segs) || len(creates) != 0 {
			t.Fatalf("%d segments from %d renames and %d creations at a roll: want every one renamed", len(j.segs), len(renames), len(creates))
		}
		for i, r := range renames {
			if r != [2]string{SpareSegmentName, j.segs[i].name} {
				t.Fatalf("rename %d: %v, want the spare to %s", i, r, j.segs[i].name)
			}
		}
		if !hasFile(t, fsys, dir, SpareSegmentName) {
			t.Fatal("no spare prepared after the last roll")
		}
		checkRecords(t, readAll(t, j), want)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if hasFile(t, fsys, dir, SpareSegmentName) {
			t.Fatal("Close left the spare")
		}
		j, _ = mustOpen(t, fsys, dir, opts)
		defer j.Close()
		checkRecords(t, readAll(t, j), want)
	})
}

// TestPrepareAheadLeftoverSpare: a spare left by an earlier process (here
// holding what looks like a record) is no segment to Open, is truncated
// and preallocated again before its use, and is kept by SetAside.
func TestPrepareAheadLeftoverSpare(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		defer goleak.VerifyNone(t)
		j, _ := mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes})
		want := appendRange(t, j, 1, 1, 50, fixed(40))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		stray := make([]byte, 64)
		encodeRecord(stray, 1, 51, make([]byte, 64-recordHeaderBytes))
		f, err := fsys.OpenFile(filepath.Join(dir, SpareSegmentName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(stray, 0); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()

		// Without PrepareAhead it is left alone.
		j, rec := mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes})
		if rec.LastSeq != 50 {
			t.Fatalf("recovered to %d: the spare was taken for a segment", rec.LastSeq)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		if !hasFile(t, fsys, dir, SpareSegmentName) {
			t.Fatal("a journal without PrepareAhead removed the spare")
		}

		j, _ = mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes, PrepareAhead: true})
		waitSpare(j)
		if j.spare.err != nil {
			t.Fatal(j.spare.err)
		}
		got := make([]byte, len(stray))
		if _, err := j.spare.f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if size, _ := j.spare.f.Size(); size != recSegBytes || slices.ContainsFunc(got, func(b byte) bool { return b != 0 }) {
			t.Fatalf("leftover spare not truncated and preallocated again: size %d, head %x", size, got[:16])
		}
		want = append(want, appendRange(t, j, 1, 51, 200, fixed(40))...)
		checkRecords(t, readAll(t, j), want)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}

		f, err = fsys.OpenFile(filepath.Join(dir, SpareSegmentName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		if _, err := SetAside(fsys, dir, 1); err != nil {
			t.Fatal(err)
		}
		if !hasFile(t, fsys, dir, SpareSegmentName) {
			t.Fatal("SetAside moved the spare")
		}
	})
}

// TestPrepareAheadFailureFallsBack: when the spare cannot be prepared the
// roll creates its segment itself, as without PrepareAhead, and nothing
// is lost.
func TestPrepareAheadFailureFallsBack(t *testing.T) {
	forEachFS(t, func(t *testing.T, base FS, dir string) {
		defer goleak.VerifyNone(t)
		fsys := &opFS{FS: base, failSpare: errors.New("no space for a spare")}
		j, _ := mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes, PrepareAhead: true})
		defer j.Close()
		var want []record
		for seq := uint64(1); seq <= 300; seq++ {
			waitSpare(j)
			want = append(want, appendRange(t, j, 1, seq, seq, fixed(40))...)
		}
		renames, creates := fsys.counts()
		if len(renames) != 0 || len(creates) != len(j.segs) || len(j.segs) < 3 {
			t.Fatalf("%d segments, %d renames, %d created at the roll", len(j.segs), len(renames), len(creates))
		}
		checkRecords(t, readAll(t, j), want)
	})
}

// TestSpareErrorWarnsAndRetries: a spare that cannot be prepared is
// reported with the room left in the current segment (the roll that will
// need the disk), its file is not left holding what its fallocate took,
// the preparation is retried SpareRetryNs after the failure and not
// before, and the error stands until a retry succeeds.
func TestSpareErrorWarnsAndRetries(t *testing.T) {
	forEachFS(t, func(t *testing.T, base FS, dir string) {
		defer goleak.VerifyNone(t)
		full := errors.New("no space left on device")
		fsys := &opFS{FS: base, failPrealloc: full}
		j, _ := mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes, PrepareAhead: true})
		defer j.Close()
		appendRange(t, j, 1, 1, 1, fixed(40))
		waitSpare(j)
		room, err := j.SpareError(0)
		if !errors.Is(err, full) || room <= 0 || room >= recSegBytes {
			t.Fatalf("failed spare: room %d of %d, err %v; want the fallocate's error and the segment's room", room, recSegBytes, err)
		}
		if hasFile(t, fsys, dir, SpareSegmentName) {
			t.Fatal("a spare whose fallocate failed was left on disk")
		}
		fsys.set(func(f *opFS) { f.failPrealloc = nil })
		done := j.spareDone
		if _, err := j.SpareError(SpareRetryNs - 1); !errors.Is(err, full) || j.spareDone != done {
			t.Fatalf("before the retry time: err %v, retried %v", err, j.spareDone != done)
		}
		if _, err := j.SpareError(SpareRetryNs); !errors.Is(err, full) || j.spareDone == done {
			t.Fatalf("at the retry time: err %v (want it to stand while the retry runs), retried %v", err, j.spareDone != done)
		}
		waitSpare(j)
		if _, err := j.SpareError(SpareRetryNs + 1); err != nil {
			t.Fatalf("after a successful retry: %v", err)
		}
		if !hasFile(t, fsys, dir, SpareSegmentName) {
			t.Fatal("the retried spare is not on disk")
		}
	})
}

// TestCompactionRemovesOffTheOwner: a snapshot's compaction drops its
// segments from the journal at once (First moves, reads start there) and
// removes their files on another goroutine; while that removal is under
// way the next compaction removes nothing; a failed removal puts the
// segments back and reports its error with the next snapshot; Close
// waits for a removal under way.
func TestCompactionRemovesOffTheOwner(t *testing.T) {
	forEachFS(t, func(t *testing.T, base FS, dir string) {
		defer goleak.VerifyNone(t)
		fsys := &opFS{FS: base}
		j := writerJournal(t, fsys, dir)
		w := NewSnapshotWriter(j, SnapshotWriterOptions{})
		writeSnap(t, j, 100, 1)
		firstSeg := j.segs[0].name
		hold := make(chan struct{})
		fsys.set(func(f *opFS) { f.holdRemove = hold })
		w.Cut(200, 1, snapshotState(200))
		got := slices.Clone(w.Finish())
		checkWrites(t, got, 200)
		if got[0].Removed == 0 || j.First() <= 1 {
			t.Fatalf("compaction removed %d, first %d", got[0].Removed, j.First())
		}
		if !hasFile(t, fsys, dir, firstSeg) {
			t.Fatal("the held removal removed the file: it ran on the owner")
		}
		first := j.First()
		if err := j.ReadFrom(first, func(uint64, uint64, []byte) bool { return false }); err != nil {
			t.Fatalf("read from the new first: %v", err)
		}
		if err := j.ReadFrom(first-1, func(uint64, uint64, []byte) bool { return false }); !errors.Is(err, ErrCompacted) {
			t.Fatalf("read below the new first: %v", err)
		}
		w.Cut(250, 1, snapshotState(250))
		got = slices.Clone(w.Finish())
		if len(got) != 1 || got[0].Err != nil || got[0].Removed != 0 || got[0].CompactErr != nil || j.First() != first {
			t.Fatalf("compaction during a removal: %d finished (removed %d), first %d (was %d)", len(got), got[0].Removed, j.First(), first)
		}
		close(hold)
		fsys.set(func(f *opFS) { f.holdRemove = nil })

		// A failed removal: its segments come back, the error with the
		// next snapshot, and the one after compacts them.
		if err := j.waitRemoval(); err != nil {
			t.Fatal(err)
		}
		if hasFile(t, fsys, dir, firstSeg) {
			t.Fatal("the released removal left the file")
		}
		appendRange(t, j, 1, 301, 500, fixed(40))
		writeSnap(t, j, 400, 1)
		segs := len(j.segs)
		boom := errors.New("unlink refused")
		fsys.set(func(f *opFS) { f.failRemove = boom })
		w.Cut(450, 1, snapshotState(450))
		got = slices.Clone(w.Finish())
		if len(got) != 1 || got[0].Removed == 0 {
			t.Fatalf("compaction behind 400: %d finished, nothing removed", len(got))
		}
		dropped := got[0].Removed
		<-j.removing.done // failed; not yet collected
		w.Cut(460, 1, snapshotState(460))
		got = slices.Clone(w.Finish())
		if len(got) != 1 || !errors.Is(got[0].CompactErr, boom) || got[0].Removed != 0 || len(j.segs) != segs {
			t.Fatalf("after a failed removal of %d: %d finished, compaction error %v, %d segments (want %d back)", dropped, len(got), got[0].CompactErr, len(j.segs), segs)
		}
		fsys.set(func(f *opFS) { f.failRemove = nil })
		w.Cut(470, 1, snapshotState(470))
		got = slices.Clone(w.Finish())
		checkWrites(t, got, 470)
		if got[0].Removed < dropped {
			t.Fatalf("the next compaction removed %d, want at least the %d put back", got[0].Removed, dropped)
		}
		first = j.First()
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j, _ = mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes})
		defer j.Close()
		if j.First() != first {
			t.Fatalf("reopened at %d, the closed journal started at %d", j.First(), first)
		}
	})
}
