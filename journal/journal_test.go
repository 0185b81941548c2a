package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		j, rec := mustOpen(t, fsys, dir, Options{SegmentBytes: 1 << 20})
		if rec.RecordsKept != 0 || rec.LastSeq != 0 {
			t.Fatalf("fresh recovery: %+v", rec)
		}
		want := appendRange(t, j, 1, 1, 50, varied)
		want = append(want, appendRange(t, j, 3, 51, 60, fixed(0))...)
		checkRecords(t, readAll(t, j), want)
		if e, s := j.Last(); e != 3 || s != 60 {
			t.Fatalf("Last = (%d, %d)", e, s)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j, rec = mustOpen(t, fsys, dir, Options{SegmentBytes: 1 << 20})
		defer j.Close()
		if rec.RecordsKept != 60 || rec.FirstSeq != 1 || rec.LastSeq != 60 || rec.HighestEpoch != 3 || rec.BytesCut != 0 {
			t.Fatalf("recovery: %+v", rec)
		}
		checkRecords(t, readAll(t, j), want)
		if j.Durable() != 60 {
			t.Fatalf("Durable after open = %d", j.Durable())
		}
		// ReadFrom from the middle, and stopping early.
		var seqs []uint64
		if err := j.ReadFrom(55, func(_, seq uint64, _ []byte) bool { seqs = append(seqs, seq); return seq < 57 }); err != nil {
			t.Fatal(err)
		}
		if len(seqs) != 3 || seqs[0] != 55 || seqs[2] != 57 {
			t.Fatalf("ReadFrom(55) stopped wrong: %v", seqs)
		}
		if err := j.ReadFrom(61, func(_, _ uint64, _ []byte) bool { t.Fatal("read past end"); return false }); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSegmentRoll(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		opts := Options{SegmentBytes: 4096, MaxPayloadBytes: 512, IndexIntervalBytes: 256}
		j, _ := mustOpen(t, fsys, dir, opts)
		want := appendRange(t, j, 1, 1, 400, varied)
		names, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) < 5 {
			t.Fatalf("expected several segments, got %v", names)
		}
		var prev uint64
		for _, name := range names {
			first, ok := parseSegmentName(name)
			if !ok || first <= prev {
				t.Fatalf("bad segment order %v", names)
			}
			prev = first
			f, err := fsys.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if size, _ := f.Size(); size != opts.SegmentBytes {
				t.Fatalf("segment %s not preallocated: %d bytes", name, size)
			}
			f.Close()
		}
		// ReadFrom every start seq goes through the sparse index.
		for from := uint64(1); from <= 400; from += 37 {
			var got []record
			if err := j.ReadFrom(from, func(e, s uint64, p []byte) bool {
				got = append(got, record{e, s, append([]byte(nil), p...)})
				return true
			}); err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, want[from-1:])
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j, rec := mustOpen(t, fsys, dir, opts)
		defer j.Close()
		if rec.Segments != len(names) || rec.RecordsKept != 400 {
			t.Fatalf("recovery %+v, %d files", rec, len(names))
		}
		checkRecords(t, readAll(t, j), want)
		want = append(want, appendRange(t, j, 2, 401, 450, varied)...)
		checkRecords(t, readAll(t, j), want)
	})
}

func TestSyncPolicies(t *testing.T) {
	const windowNs = 200_000
	tests := []struct {
		policy SyncPolicy
		// after appending 2 records at t=0: due at t=0, due at t=window
		dueNow, dueLater  bool
		durableBeforeSync uint64
	}{
		{SyncNone, false, false, 2},
		{SyncAlways, true, true, 0},
		{SyncGroup, false, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.policy.String(), func(t *testing.T) {
			fsys := NewMemFS()
			j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: 64 << 10, Policy: tc.policy, GroupWindowNs: windowNs, GroupRecords: 4})
			defer j.Close()
			if j.SyncDue(0) {
				t.Fatal("due with nothing appended")
			}
			for seq := uint64(1); seq <= 2; seq++ {
				if err := j.Append(1, seq, []byte("x"), 0); err != nil {
					t.Fatal(err)
				}
			}
			if got := j.SyncDue(windowNs - 1); got != tc.dueNow {
				t.Fatalf("SyncDue before window = %v", got)
			}
			if got := j.SyncDue(windowNs); got != tc.dueLater {
				t.Fatalf("SyncDue at window = %v", got)
			}
			if j.Durable() != tc.durableBeforeSync {
				t.Fatalf("Durable before sync = %d", j.Durable())
			}
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
			if j.Durable() != 2 || j.SyncDue(1<<40) {
				t.Fatalf("after Sync: durable %d due %v", j.Durable(), j.SyncDue(1<<40))
			}
			if tc.policy == SyncGroup {
				// The record count triggers without waiting for the window.
				for seq := uint64(3); seq <= 6; seq++ {
					if j.SyncDue(10) {
						t.Fatalf("due after %d records", seq-3)
					}
					if err := j.Append(1, seq, nil, 10); err != nil {
						t.Fatal(err)
					}
				}
				if !j.SyncDue(10) {
					t.Fatal("not due after GroupRecords records")
				}
				if d, ok := j.SyncDeadlineNs(); !ok || d != 10+windowNs {
					t.Fatalf("SyncDeadlineNs = %d, %v", d, ok)
				}
			}
		})
	}
}

// gateFS blocks File.Sync while armed, to observe the journal mid-fsync.
type gateFS struct {
	*MemFS
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

type gateFile struct {
	File
	fs *gateFS
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := g.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, fs: g}, nil
}

func (f *gateFile) Sync() error {
	if f.fs.armed.Load() {
		f.fs.entered <- struct{}{}
		<-f.fs.release
	}
	return f.File.Sync()
}

// TestDurableMovesOnlyAfterFsync shows that Durable() does not move while
// the fsync is in flight, that Append is not blocked by it, and that
// records appended during the fsync wait for the next one.
func TestDurableMovesOnlyAfterFsync(t *testing.T) {
	g := &gateFS{MemFS: NewMemFS(), entered: make(chan struct{}), release: make(chan struct{})}
	j, _ := mustOpen(t, g, testDir, Options{SegmentBytes: 64 << 10, Policy: SyncGroup})
	appendRange(t, j, 1, 1, 3, fixed(8))
	g.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- j.Sync() }()
	<-g.entered
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { g.armed.Store(false); close(g.release) }) }
	t.Cleanup(func() { release(); j.Close() }) // a failing check must not leave the fsync blocked
	if j.Durable() != 0 {
		t.Fatalf("Durable moved before fsync returned: %d", j.Durable())
	}
	appendRange(t, j, 1, 4, 5, fixed(8)) // would deadlock if Append waited for the fsync
	if !j.SyncDue(1 << 40) {
		t.Fatal("records appended during the fsync are not pending")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if j.Durable() != 3 {
		t.Fatalf("Durable = %d, want 3 (the fsync covered only what was appended before it)", j.Durable())
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if j.Durable() != 5 {
		t.Fatalf("Durable = %d, want 5", j.Durable())
	}
}

func TestAppendFence(t *testing.T) {
	tests := []struct {
		name       string
		epoch, seq uint64
		want       error
	}{
		{"next seq same epoch", 5, 11, nil},
		{"next seq newer epoch", 6, 11, nil},
		{"stale epoch", 4, 11, ErrStaleEpoch},
		{"gap", 5, 12, ErrSeqGap},
		{"duplicate", 5, 10, ErrSeqGap},
		{"zero seq", 5, 0, ErrSeqGap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := mustOpen(t, NewMemFS(), testDir, Options{SegmentBytes: 64 << 10, MaxPayloadBytes: 16})
			defer j.Close()
			appendRange(t, j, 5, 1, 10, fixed(4))
			err := j.Append(tc.epoch, tc.seq, []byte("p"), 0)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Append(%d, %d) = %v, want %v", tc.epoch, tc.seq, err, tc.want)
			}
			var se *StaleEpochError
			if errors.As(err, &se) && (se.Epoch != tc.epoch || se.HighestEpoch != 5) {
				t.Fatalf("StaleEpochError = %+v", se)
			}
			var ge *SeqGapError
			if errors.As(err, &ge) && (ge.Seq != tc.seq || ge.Want != 11) {
				t.Fatalf("SeqGapError = %+v", ge)
			}
			if err != nil {
				if e, s := j.Last(); e != 5 || s != 10 {
					t.Fatalf("refused append changed Last: (%d, %d)", e, s)
				}
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		j, _ := mustOpen(t, NewMemFS(), testDir, Options{SegmentBytes: 64 << 10, MaxPayloadBytes: 16})
		defer j.Close()
		if err := j.Append(1, 1, make([]byte, 17), 0); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("empty journal accepts any first seq, fence survives reopen", func(t *testing.T) {
		fsys := NewMemFS()
		j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: 64 << 10})
		appendRange(t, j, 7, 1000, 1001, fixed(3))
		j.Close()
		j, _ = mustOpen(t, fsys, testDir, Options{SegmentBytes: 64 << 10})
		defer j.Close()
		if err := j.Append(6, 1002, nil, 0); !errors.Is(err, ErrStaleEpoch) {
			t.Fatalf("fence lost on reopen: %v", err)
		}
	})
	t.Run("ResetTo", func(t *testing.T) {
		fsys := NewMemFS()
		j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: 4096})
		appendRange(t, j, 2, 1, 200, varied)
		if err := j.ResetTo(5000); err != nil {
			t.Fatal(err)
		}
		if j.Durable() != 5000 || j.First() != 0 {
			t.Fatalf("after ResetTo: durable %d first %d", j.Durable(), j.First())
		}
		if err := j.Append(2, 5002, nil, 0); !errors.Is(err, ErrSeqGap) {
			t.Fatalf("gap after reset accepted: %v", err)
		}
		if err := j.Append(1, 5001, nil, 0); !errors.Is(err, ErrStaleEpoch) {
			t.Fatalf("fence lost by reset: %v", err)
		}
		want := appendRange(t, j, 3, 5001, 5010, varied)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		fsys.Crash(1)
		j, rec := mustOpen(t, fsys, testDir, Options{SegmentBytes: 4096})
		defer j.Close()
		if rec.FirstSeq != 5001 {
			t.Fatalf("recovery after reset: %+v", rec)
		}
		checkRecords(t, readAll(t, j), want)
	})
}

func TestTruncateAfter(t *testing.T) {
	opts := Options{SegmentBytes: 4096, IndexIntervalBytes: 128}
	for _, cut := range []uint64{0, 1, 37, 150, 151, 299} {
		fsys := NewMemFS()
		j, _ := mustOpen(t, fsys, testDir, opts)
		want := appendRange(t, j, 1, 1, 300, varied)
		// Include a cut exactly at a segment boundary.
		if cut == 150 {
			cut = j.segs[1].firstSeq - 1
		}
		if err := j.TruncateAfter(cut); err != nil {
			t.Fatalf("TruncateAfter(%d): %v", cut, err)
		}
		if _, last := j.Last(); last != cut || j.Durable() != cut {
			t.Fatalf("cut %d: last %d durable %d", cut, last, j.Durable())
		}
		want = want[:cut]
		checkRecords(t, readAll(t, j), want)
		if err := j.Append(1, cut+2, nil, 0); !errors.Is(err, ErrSeqGap) {
			t.Fatalf("cut %d: gap accepted: %v", cut, err)
		}
		// A new suffix under a newer epoch, left unsynced, then a crash:
		// the old suffix must never come back.
		want = append(want, appendRange(t, j, 2, cut+1, cut+5, fixed(9))...)
		for seed := uint64(0); seed < 8; seed++ {
			fsys.Crash(seed)
			j2, _ := mustOpen(t, fsys, testDir, opts)
			got := readAll(t, j2)
			if len(got) < int(cut) {
				t.Fatalf("cut %d seed %d: lost durable records, have %d", cut, seed, len(got))
			}
			checkRecords(t, got, want[:len(got)])
			j2.Close()
		}
	}
	t.Run("below first", func(t *testing.T) {
		j, _ := mustOpen(t, NewMemFS(), testDir, opts)
		defer j.Close()
		if err := j.ResetTo(100); err != nil {
			t.Fatal(err)
		}
		appendRange(t, j, 1, 101, 110, varied)
		if err := j.TruncateAfter(98); !errors.Is(err, ErrCompacted) {
			t.Fatalf("got %v", err)
		}
		if err := j.TruncateAfter(100); err != nil || j.First() != 0 {
			t.Fatalf("truncate to base: %v first %d", err, j.First())
		}
		appendRange(t, j, 1, 101, 102, varied)
	})
}

func TestSyncFailureIsSticky(t *testing.T) {
	fsys := NewMemFS()
	j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: 64 << 10})
	appendRange(t, j, 1, 1, 3, fixed(5))
	boom := errors.New("EIO")
	fsys.SetSyncError(boom)
	if err := j.Sync(); !errors.Is(err, ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("Sync = %v", err)
	}
	if j.Durable() != 0 {
		t.Fatalf("Durable moved despite fsync error: %d", j.Durable())
	}
	fsys.SetSyncError(nil)
	if err := j.Append(1, 4, nil, 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after failure = %v", err)
	}
	if err := j.Sync(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after failure = %v", err)
	}
}

// TestConcurrentAppendAndSync runs the documented two-goroutine setup under
// the race detector and checks the watermark against a crash.
func TestConcurrentAppendAndSync(t *testing.T) {
	fsys := NewMemFS()
	opts := Options{SegmentBytes: 8192, Policy: SyncGroup, GroupRecords: 8, GroupWindowNs: 50}
	j, _ := mustOpen(t, fsys, testDir, opts)
	const n = 2000
	var wg sync.WaitGroup
	var stop atomic.Bool
	var clock atomic.Int64
	var maxDurable atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		for !stop.Load() {
			if j.SyncDue(clock.Load()) {
				if err := j.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
			d := j.Durable()
			if d < last {
				t.Errorf("Durable went back from %d to %d", last, d)
			}
			last = d
			maxDurable.Store(d)
		}
	}()
	for seq := uint64(1); seq <= n; seq++ {
		now := clock.Add(10)
		if err := j.Append(1, seq, payloadFor(seq, varied(seq)), now); err != nil {
			t.Fatal(err)
		}
		if j.Durable() > seq {
			t.Fatalf("Durable %d beyond appended %d", j.Durable(), seq)
		}
	}
	stop.Store(true)
	wg.Wait()
	durable := j.Durable()
	fsys.Crash(42)
	j2, rec := mustOpen(t, fsys, testDir, opts)
	defer j2.Close()
	if rec.LastSeq < durable {
		t.Fatalf("crash lost durable records: recovered %d < durable %d", rec.LastSeq, durable)
	}
	got := readAll(t, j2)
	for i, r := range got {
		if r.seq != uint64(i+1) || string(r.payload) != string(payloadFor(r.seq, varied(r.seq))) {
			t.Fatalf("bad record %d: %+v", i, r)
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncNone, SyncGroup} {
		j, _ := mustOpen(t, OSFS{}, t.TempDir(), Options{Policy: policy})
		payload := make([]byte, 256)
		seq := uint64(0)
		allocs := testing.AllocsPerRun(2000, func() {
			seq++
			if err := j.Append(1, seq, payload, int64(seq)); err != nil {
				t.Fatal(err)
			}
			j.SyncDue(int64(seq))
		})
		if allocs != 0 {
			t.Fatalf("%v: Append allocates %.1f per call", policy, allocs)
		}
		j.Close()
	}
}

func TestClosed(t *testing.T) {
	j, _ := mustOpen(t, NewMemFS(), testDir, Options{SegmentBytes: 64 << 10})
	appendRange(t, j, 1, 1, 2, fixed(1))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(1, 3, nil, 0); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := j.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, _, err := Open(NewMemFS(), testDir, Options{SegmentBytes: 100}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatal(err)
	}
}

// Under SyncNone a segment roll makes no durability syscall (issue 18:
// none does no syscall at all for durability): with every fsync failing,
// appends across several rolls still succeed. Before, the roll fsynced
// the closing segment on the appender and failed the journal here.
func TestSyncNoneRollsWithoutFsync(t *testing.T) {
	fsys := NewMemFS()
	j, _ := mustOpen(t, fsys, testDir, Options{Policy: SyncNone, SegmentBytes: MinSegmentBytes})
	defer j.Close()
	fsys.SetSyncError(errors.New("no fsync expected"))
	for seq := uint64(1); seq <= 400; seq++ {
		if err := j.Append(1, seq, make([]byte, 64), 0); err != nil {
			t.Fatalf("append %d: %v", seq, err)
		}
		if err := j.Flush(); err != nil {
			t.Fatalf("flush %d: %v", seq, err)
		}
	}
	if len(j.segs) < 3 || j.Durable() != 400 {
		t.Fatalf("%d segments, durable %d: want several rolls and everything durable", len(j.segs), j.Durable())
	}
}

// SyncOnce says whether an fsync ran; TrySync never waits for a Sync
// under way on another goroutine (syncMu held), and does nothing then.
func TestSyncOnceAndTrySync(t *testing.T) {
	fsys := NewMemFS()
	j, _ := mustOpen(t, fsys, testDir, Options{SegmentBytes: 64 << 10, Policy: SyncGroup})
	defer j.Close()
	if r, err := j.SyncOnce(); r != SyncedNothing || err != nil {
		t.Fatalf("nothing appended: %v, %v", r, err)
	}
	if err := j.Append(1, 1, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if r, err := j.SyncOnce(); r != Synced || err != nil || j.Durable() != 1 {
		t.Fatalf("one record: %v, %v, durable %d", r, err, j.Durable())
	}
	if err := j.Append(1, 2, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	j.syncMu.Lock() // another goroutine's Sync, under way
	r, err := j.TrySync()
	j.syncMu.Unlock()
	if r != SyncBusy || err != nil || j.Durable() != 1 {
		t.Fatalf("during another sync: %v, %v, durable %d; want busy, nothing done", r, err, j.Durable())
	}
	if r, err := j.TrySync(); r != Synced || err != nil || j.Durable() != 2 {
		t.Fatalf("free: %v, %v, durable %d", r, err, j.Durable())
	}
	fsys.SetSyncError(errors.New("disk gone"))
	if err := j.Append(1, 3, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if r, err := j.TrySync(); r != SyncedNothing || err == nil || j.Durable() != 2 {
		t.Fatalf("failed fsync: %v, %v, durable %d", r, err, j.Durable())
	}
}

// TestParseSyncPolicy: every policy parses back from its name; anything
// else is refused with the names it takes.
func TestParseSyncPolicy(t *testing.T) {
	for _, p := range []SyncPolicy{SyncNone, SyncGroup, SyncAlways} {
		if got, err := ParseSyncPolicy(p.String()); err != nil || got != p {
			t.Errorf("ParseSyncPolicy(%q) = %v, %v", p, got, err)
		}
	}
	for _, bad := range []string{"", "Group", "fsync", "SyncPolicy(9)"} {
		if _, err := ParseSyncPolicy(bad); err == nil || !strings.Contains(err.Error(), "none, group, always") {
			t.Errorf("ParseSyncPolicy(%q) = %v", bad, err)
		}
	}
}
