package journal

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// snapFS is a real or in-memory FS that records the order snapshot files
// are created in, can fail their creation, and can hold the first one's
// creation until released (a disk as slow as the test likes).
type snapFS struct {
	FS
	mu      sync.Mutex
	created []uint64 // seqs of the snapshot files created, in order
	fail    error    // returned for every snapshot file while set
	hold    chan struct{}
	held    chan struct{} // closed when the held write waits
	once    sync.Once
}

func (f *snapFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if base, ok := strings.CutSuffix(name, ".snap.tmp"); ok {
		seq, _ := parseSnapshotName(base[len(base)-20:] + ".snap")
		f.mu.Lock()
		f.created = append(f.created, seq)
		fail, hold := f.fail, f.hold
		f.mu.Unlock()
		if fail != nil {
			return nil, fail
		}
		if hold != nil {
			f.once.Do(func() { close(f.held) })
			<-hold
		}
	}
	return f.FS.OpenFile(name, flag, perm)
}

func (f *snapFS) createdSeqs() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created)
}

// counterClock ticks once per reading, so a duration measured across any
// work is positive and one not measured stays 0.
type counterClock struct{ ns int64 }

func (c *counterClock) now() int64 { c.ns++; return c.ns }

// writerJournal opens a journal of 300 records in small segments, so a
// compaction behind a snapshot removes some.
func writerJournal(t *testing.T, fsys FS, dir string) *Journal {
	t.Helper()
	j, _ := mustOpen(t, fsys, dir, Options{SegmentBytes: recSegBytes})
	appendRange(t, j, 1, 1, 300, fixed(40))
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	return j
}

func checkWrites(t *testing.T, got []SnapshotWrite, seqs ...uint64) {
	t.Helper()
	if len(got) != len(seqs) {
		t.Fatalf("finished %d snapshots, want %v", len(got), seqs)
	}
	for i, w := range got {
		if w.Seq != seqs[i] || w.Err != nil || w.CompactErr != nil || !bytes.Equal(w.Data, snapshotState(w.Seq)) {
			t.Fatalf("finished[%d] = seq %d err %v compact %v, want seq %d written", i, w.Seq, w.Err, w.CompactErr, seqs[i])
		}
	}
}

// forEachMode runs f with an inline writer and one that writes on its
// own goroutine, on a MemFS and on real files.
func forEachMode(t *testing.T, f func(t *testing.T, inline bool, fsys *snapFS, dir string)) {
	for _, inline := range []bool{true, false} {
		name := "goroutine"
		if inline {
			name = "inline"
		}
		t.Run(name, func(t *testing.T) {
			forEachFS(t, func(t *testing.T, fsys FS, dir string) {
				defer goleak.VerifyNone(t)
				f(t, inline, &snapFS{FS: fsys}, dir)
			})
		})
	}
}

// TestSnapshotWriterWritesInOrder: snapshots handed to Cut are written in
// the order cut, each compacts the journal behind the older snapshot kept,
// and Finish leaves nothing waiting.
func TestSnapshotWriterWritesInOrder(t *testing.T) {
	forEachMode(t, func(t *testing.T, inline bool, fsys *snapFS, dir string) {
		j := writerJournal(t, fsys, dir)
		defer j.Close()
		clk := &counterClock{}
		w := NewSnapshotWriter(j, SnapshotWriterOptions{Inline: inline, NowNs: clk.now})
		var got []SnapshotWrite
		for _, seq := range []uint64{100, 200} {
			wait, done := w.Cut(seq, 1, snapshotState(seq))
			if wait != 0 || len(done) != 0 {
				t.Fatalf("Cut(%d) with %d waiting: waited %d, finished %d", seq, w.Waiting(), wait, len(done))
			}
		}
		if w.Waiting() != 2 {
			t.Fatalf("waiting %d after two cuts", w.Waiting())
		}
		got = append(got, w.Start()...)
		got = append(got, w.Finish()...)
		checkWrites(t, got, 100, 200)
		if got[0].Removed != 0 || got[1].Removed == 0 {
			t.Fatalf("compactions removed %d then %d segments: want none behind the first (one snapshot), some behind the second", got[0].Removed, got[1].Removed)
		}
		if got[0].WriteNs <= 0 || got[1].WriteNs <= 0 {
			t.Fatalf("write durations %d, %d", got[0].WriteNs, got[1].WriteNs)
		}
		if j.First() <= 1 || w.Waiting() != 0 {
			t.Fatalf("journal first %d, waiting %d", j.First(), w.Waiting())
		}
		if c := fsys.createdSeqs(); !slices.Equal(c, []uint64{100, 200}) {
			t.Fatalf("snapshot files created in the order %v", c)
		}
		if seq, _, data, err := readSnap(t, j); err != nil || seq != 200 || !bytes.Equal(data, snapshotState(200)) {
			t.Fatalf("latest snapshot %d: %v", seq, err)
		}
	})
}

// TestSnapshotWriterThirdWaitsInline: under Inline nothing is written
// until Start; a third Cut writes the two waiting first and says it
// waited.
func TestSnapshotWriterThirdWaitsInline(t *testing.T) {
	defer goleak.VerifyNone(t)
	fsys := &snapFS{FS: NewMemFS()}
	j := writerJournal(t, fsys, testDir)
	defer j.Close()
	w := NewSnapshotWriter(j, SnapshotWriterOptions{Inline: true, NowNs: (&counterClock{}).now})
	w.Cut(100, 1, snapshotState(100))
	w.Cut(200, 1, snapshotState(200))
	if c := fsys.createdSeqs(); len(c) != 0 {
		t.Fatalf("written before Start: %v", c)
	}
	wait, done := w.Cut(300, 1, snapshotState(300))
	checkWrites(t, done, 100, 200)
	if wait <= 0 || w.Waiting() != 1 {
		t.Fatalf("third cut waited %d, %d waiting after it", wait, w.Waiting())
	}
	checkWrites(t, w.Start(), 300)
}

// TestSnapshotWriterBoundOfTwo: while the disk holds the first write, a
// second Cut queues at once and a third waits for the first write to
// finish (and only the first), then queues.
func TestSnapshotWriterBoundOfTwo(t *testing.T) {
	defer goleak.VerifyNone(t)
	fsys := &snapFS{FS: OSFS{}, hold: make(chan struct{}), held: make(chan struct{})}
	j := writerJournal(t, fsys, t.TempDir())
	defer j.Close()
	w := NewSnapshotWriter(j, SnapshotWriterOptions{NowNs: (&counterClock{}).now})
	w.Cut(100, 1, snapshotState(100))
	if done := w.Start(); len(done) != 0 {
		t.Fatalf("Start finished %d off the owner", len(done))
	}
	<-fsys.held
	if wait, done := w.Cut(200, 1, snapshotState(200)); wait != 0 || len(done) != 0 || w.Waiting() != 2 {
		t.Fatalf("second cut: waited %d, finished %d, waiting %d", wait, len(done), w.Waiting())
	}
	type cutResult struct {
		wait int64
		done []SnapshotWrite
	}
	third := make(chan cutResult)
	go func() {
		wait, done := w.Cut(300, 1, snapshotState(300))
		third <- cutResult{wait, slices.Clone(done)}
	}()
	select {
	case <-third:
		t.Fatal("a third cut returned while the disk held the first write")
	case <-time.After(20 * time.Millisecond): // a wrong early return shows up here; a right one never does
	}
	close(fsys.hold)
	r := <-third
	checkWrites(t, r.done, 100)
	if r.wait <= 0 || w.Waiting() != 2 {
		t.Fatalf("third cut waited %d, %d waiting after it", r.wait, w.Waiting())
	}
	if c := fsys.createdSeqs(); !slices.Equal(c, []uint64{100}) {
		t.Fatalf("written during the third cut: %v (only the first may be)", c)
	}
	checkWrites(t, w.Finish(), 200, 300)
}

// TestSnapshotWriterPoll: Poll finishes a completed write without
// waiting, and only once.
func TestSnapshotWriterPoll(t *testing.T) {
	defer goleak.VerifyNone(t)
	fsys := &snapFS{FS: OSFS{}}
	j := writerJournal(t, fsys, t.TempDir())
	defer j.Close()
	w := NewSnapshotWriter(j, SnapshotWriterOptions{})
	w.Cut(100, 1, snapshotState(100))
	w.Start()
	var got []SnapshotWrite
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write never finished")
		}
		got = append(got, w.Poll()...)
	}
	checkWrites(t, got, 100)
	if done := w.Poll(); len(done) != 0 || w.Waiting() != 0 {
		t.Fatalf("a second Poll finished %d, waiting %d", len(done), w.Waiting())
	}
}

// TestSnapshotWriterAbandon: Abandon waits for the write under way and
// forgets the rest: nothing is reported, the journal is not compacted
// behind the written one, the waiting one is never written.
func TestSnapshotWriterAbandon(t *testing.T) {
	forEachMode(t, func(t *testing.T, inline bool, fsys *snapFS, dir string) {
		j := writerJournal(t, fsys, dir)
		defer j.Close()
		for _, seq := range []uint64{50, 100} { // so a compaction behind 200 would remove segments
			writeSnap(t, j, seq, 1)
		}
		first := j.First()
		w := NewSnapshotWriter(j, SnapshotWriterOptions{Inline: inline})
		var release chan struct{}
		if !inline {
			// Held on the disk until Cut(300) has polled it: a write that
			// finished first would be reported (and compacted behind) by
			// that Cut, not abandoned (CI saw it once).
			release = make(chan struct{})
			fsys.mu.Lock()
			fsys.hold, fsys.held = release, make(chan struct{})
			fsys.mu.Unlock()
		}
		w.Cut(200, 1, snapshotState(200))
		if !inline {
			w.Start() // under way when abandoned
			<-fsys.held
		}
		if _, done := w.Cut(300, 1, snapshotState(300)); len(done) != 0 {
			t.Fatalf("Cut(300) finished %+v while the write of 200 was held", done)
		}
		if release != nil {
			close(release)
		}
		w.Abandon()
		if w.Waiting() != 0 || len(w.Poll()) != 0 || len(w.Finish()) != 0 {
			t.Fatalf("after Abandon: waiting %d", w.Waiting())
		}
		want := []uint64{50, 100, 200}
		if inline {
			want = []uint64{50, 100} // nothing had started
		}
		// writeSnap's files go through the same FS.
		if c := fsys.createdSeqs(); !slices.Equal(c, want) {
			t.Fatalf("snapshot files created %v, want %v", c, want)
		}
		if j.First() != first {
			t.Fatalf("journal compacted from %d to %d behind an abandoned snapshot", first, j.First())
		}
	})
}

// TestSnapshotWriterErrorCompactsNothing: a failed write is reported with
// its error, and the journal is not compacted behind it (it would be
// behind a snapshot that does not exist); the next one compacts.
func TestSnapshotWriterErrorCompactsNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, inline bool, fsys *snapFS, dir string) {
		j := writerJournal(t, fsys, dir)
		defer j.Close()
		for _, seq := range []uint64{50, 100} {
			writeSnap(t, j, seq, 1)
		}
		first := j.First()
		boom := errors.New("disk full")
		fsys.mu.Lock()
		fsys.fail = boom
		fsys.mu.Unlock()
		w := NewSnapshotWriter(j, SnapshotWriterOptions{Inline: inline})
		w.Cut(200, 1, snapshotState(200))
		got := append(slices.Clone(w.Start()), w.Finish()...)
		if len(got) != 1 || got[0].Seq != 200 || !errors.Is(got[0].Err, boom) || got[0].Removed != 0 {
			t.Fatalf("failed write reported as %+v", got)
		}
		if j.First() != first {
			t.Fatalf("journal compacted from %d to %d after a failed write", first, j.First())
		}
		fsys.mu.Lock()
		fsys.fail = nil
		fsys.mu.Unlock()
		w.Cut(200, 1, snapshotState(200))
		got = append(slices.Clone(w.Start()), w.Finish()...)
		checkWrites(t, got, 200)
		if got[0].Removed == 0 || j.First() == first {
			t.Fatalf("the retried write compacted %d segments (first %d)", got[0].Removed, j.First())
		}
	})
}

// TestSnapshotNeverPastTheJournal: a snapshot the writer wrote is never
// past the journal's end after a crash, in either mode: after a power
// loss under group and always (the writer syncs the journal before the
// snapshot), after a process crash under none (it writes the owner's
// buffer first; none promises nothing across a power loss). Before, a
// crash could keep the snapshot and lose the records under it, and a
// restarted node then held their state with no record of their outputs
// (sim seeds 603850 and 700134).
func TestSnapshotNeverPastTheJournal(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncNone, SyncGroup, SyncAlways} {
		for _, inline := range []bool{true, false} {
			for seed := uint64(0); seed < 20; seed++ {
				fsys := NewMemFS()
				opts := Options{SegmentBytes: recSegBytes, Policy: policy, WriteBufferBytes: 1 << 16}
				j, _ := mustOpen(t, fsys, testDir, opts)
				appendRange(t, j, 1, 1, 20, fixed(40))
				if err := j.Flush(); err != nil { // written, not synced
					t.Fatal(err)
				}
				appendRange(t, j, 1, 21, 40+seed, fixed(40)) // left in the owner's buffer
				snap := 40 + seed
				w := NewSnapshotWriter(j, SnapshotWriterOptions{Inline: inline})
				w.Cut(snap, 1, snapshotState(snap))
				got := append([]SnapshotWrite(nil), w.Start()...)
				if got = append(got, w.Finish()...); len(got) != 1 || got[0].Err != nil {
					t.Fatalf("%v inline %v seed %d: finished %+v", policy, inline, seed, got)
				}
				if policy != SyncNone {
					fsys.Crash(seed) // a power loss
				} // else a process crash: the journal is abandoned, not closed
				j2, _, err := Open(fsys, testDir, opts)
				if err != nil {
					t.Fatalf("%v inline %v seed %d: reopen: %v", policy, inline, seed, err)
				}
				if s, _, r, err := j2.OpenLatestSnapshot(); err == nil {
					r.Close()
					if _, last := j2.Last(); last < s {
						t.Fatalf("%v inline %v seed %d: the snapshot at %d survived the crash, the journal ends at %d", policy, inline, seed, s, last)
					}
				}
				j2.Close()
			}
		}
	}
}
