package storage

import (
	"bytes"
	"cmp"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/internal/enginetest"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/dirlock"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/snapshot"
)

type counter = enginetest.Counter

// sumTo is counter's sum after commands 1..seq of history (cmd(seq)).
func sumTo(seq uint64) uint64 {
	var s uint64
	for i := uint64(1); i <= seq; i++ {
		s += 300 * uint64(cmd(i)[0])
	}
	return s
}

// cmd is command seq: 300 bytes, so a 4 KB segment holds 12 records and
// snapshots compact the journal behind them.
func cmd(seq uint64) []byte { return bytes.Repeat([]byte{byte(seq * 7)}, 300) }

const dir = "/j"

// recorder is the hooks' view of a rebuild, in call order.
type recorder struct {
	events  []string
	emitted []uint64
}

type emitter struct {
	r   *recorder
	seq uint64
}

func (e *emitter) Emit(uint64, []byte) { e.r.emitted = append(e.r.emitted, e.seq) }

func (r *recorder) hooks() Hooks {
	return Hooks{
		Refill:  func(*journal.Journal) error { r.events = append(r.events, "refill"); return nil },
		Rebuilt: func(from uint64) { r.events = append(r.events, "rebuilt "+itoa(from)) },
		Batch:   func() { r.events = append(r.events, "batch") },
		Emitter: func(seq uint64) engine.Emitter { return &emitter{r: r, seq: seq} },
		Applied: func(epoch, seq uint64, _ []byte) { r.events = append(r.events, "applied "+itoa(epoch)+"/"+itoa(seq)) },
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func config(fs journal.FS, r *recorder) Config {
	c := Config{
		FS: fs, Dir: dir, SetAsideCorrupt: true, Journal: journal.Options{SegmentBytes: 4096},
		NewStateMachine: func() (engine.StateMachine, error) { return &counter{}, nil },
		Snapshots:       snapshot.Config{Inline: true, NowNs: func() int64 { return 0 }, Every: 10, ChunkBytes: 8, Burst: 4},
		Log:             slog.New(slog.DiscardHandler),
	}
	if r != nil {
		c.Hooks = r.hooks()
	}
	return c
}

func open(t *testing.T, c Config) *Storage {
	t.Helper()
	s, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rebuild(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// write journals and applies commands after what s applied, up to seq,
// at epoch, cutting the periodic snapshots on the way, then syncs.
func write(t *testing.T, s *Storage, epoch, to uint64) {
	t.Helper()
	eng := s.Engine()
	for seq := eng.AppliedSeq() + 1; seq <= to; seq++ {
		if err := s.Journal().Append(epoch, seq, cmd(seq), 0); err != nil {
			t.Fatal(err)
		}
		eng.Apply(seq, cmd(seq), nil)
		if err := s.Journal().Flush(); err != nil {
			t.Fatal(err)
		}
		s.Snapshots().Periodic(eng, seq, epoch)
	}
	s.Snapshots().Finish()
	if err := s.Journal().Sync(); err != nil {
		t.Fatal(err)
	}
}

func checkState(t *testing.T, s *Storage, applied uint64) {
	t.Helper()
	c := s.Engine().(*counter)
	if c.Applied != applied || c.Sum != sumTo(applied) {
		t.Fatalf("state: applied %d sum %d, want %d and %d", c.Applied, c.Sum, applied, sumTo(applied))
	}
}

func TestEmptyDirectory(t *testing.T) {
	r := &recorder{}
	s := open(t, config(journal.NewMemFS(), r))
	checkState(t, s, 0)
	if s.Refetching() || s.Broken() || s.HighestEpoch() != 0 || s.Counters() != (Counters{}) {
		t.Fatalf("fresh storage: refetching %v broken %v epoch %d counters %+v", s.Refetching(), s.Broken(), s.HighestEpoch(), s.Counters())
	}
	if want := []string{"refill", "rebuilt 0"}; !slices.Equal(r.events, want) {
		t.Fatalf("hooks %q, want %q", r.events, want)
	}
}

// A restart rebuilds from the newest snapshot and replays only the
// records after it, telling the hooks in their order; the fence learns
// the history's highest epoch.
func TestRebuildFromSnapshotAndJournal(t *testing.T) {
	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	write(t, s, 1, 12)
	write(t, s, 3, 23)
	s.Journal().Close()

	r := &recorder{}
	s = open(t, config(fs, r))
	checkState(t, s, 23)
	want := []string{"refill", "rebuilt 20", "batch", "applied 3/21", "applied 3/22", "applied 3/23"}
	if !slices.Equal(r.events, want) {
		t.Fatalf("hooks %q, want %q", r.events, want)
	}
	if !slices.Equal(r.emitted, []uint64{21, 22, 23}) {
		t.Fatalf("emitted for %v, want 21..23", r.emitted)
	}
	if s.HighestEpoch() != 3 {
		t.Fatalf("highest epoch %d, want 3", s.HighestEpoch())
	}
}

// A torn tail is cut and counted; the records before it survive.
func TestTornTail(t *testing.T) {
	fs := damaged(t, func(b []byte) {
		end := dataEnd(b)
		clear(b[end-5 : end]) // the last record cut short: its payload never written
	})
	s := open(t, config(fs, nil))
	checkState(t, s, 4)
	if c := s.Counters(); c.TornTailBytes == 0 {
		t.Fatal("torn tail not counted")
	}
}

// damaged is a disk whose journal held commands 1..5 and whose segment
// damage then changed.
func damaged(t *testing.T, damage func(segment []byte)) *journal.MemFS {
	t.Helper()
	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	write(t, s, 1, 5)
	s.Journal().Close()
	seg, b := segment(t, fs)
	damage(b)
	if err := fs.WriteFileForTest(seg, b); err != nil {
		t.Fatal(err)
	}
	return fs
}

// segment is the journal's one segment file in dir and its bytes
// (preallocated: zeros after the records).
func segment(t *testing.T, fs *journal.MemFS) (string, []byte) {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			b, err := fs.ReadFileForTest(dir + "/" + n)
			if err != nil {
				t.Fatal(err)
			}
			return dir + "/" + n, b
		}
	}
	t.Fatalf("no segment in %v", names)
	return "", nil
}

// dataEnd is where the records end: every command's byte is non-zero,
// so the last record ends at the last non-zero byte.
func dataEnd(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i + 1
		}
	}
	return 0
}

// A corrupt journal is set aside (and the state marked to refetch, on
// disk, across restarts until cleared) by a node that can follow; a
// static primary's storage refuses to open it.
func TestCorruptJournal(t *testing.T) {
	fs := damaged(t, func(b []byte) {
		b[dataEnd(b)/2] ^= 0xff // a record in the middle: its CRC no longer matches
	})

	static := config(fs, nil)
	static.SetAsideCorrupt = false
	if _, err := Open(static); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("static primary's open: %v, want ErrCorrupt", err)
	}

	s := open(t, config(fs, nil))
	checkState(t, s, 0)
	if !s.Refetching() || s.Counters().JournalsSetAside != 1 {
		t.Fatalf("refetching %v, set aside %d: want true, 1", s.Refetching(), s.Counters().JournalsSetAside)
	}
	s.Journal().Close()
	s = open(t, config(fs, nil)) // the marker survives a restart
	if !s.Refetching() {
		t.Fatal("refetch state lost across a restart")
	}
	s.SetRefetching(false)
	s.Journal().Close()
	if s = open(t, config(fs, nil)); s.Refetching() {
		t.Fatal("refetch state cleared but back after a restart")
	}
}

// ResetTo cuts back to a fork the journal still reaches from a snapshot
// at or below it, and discards the history (marked to refetch) when it
// cannot: the journal starts past the newest snapshot left.
func TestResetTo(t *testing.T) {
	cases := []struct {
		name      string
		installAt uint64 // a snapshot installed here first: the journal starts after it
		to        uint64 // written up to (0: 25)
		fork      uint64
		applied   uint64
		refetch   bool
		discarded uint64
	}{
		{name: "fork above a snapshot", fork: 15, applied: 15},
		{name: "fork below every snapshot, journal whole", fork: 7, applied: 7},
		{name: "fork at the end", fork: 25, applied: 25},
		{name: "discard all", fork: 0, applied: 0, refetch: true},
		{name: "journal starts after the snapshot dropped", installAt: 20, fork: 15, applied: 0, refetch: true, discarded: 1},
		// Snapshots at 10, 20, 30 and the journal compacted behind 20 (it
		// starts at 13): cut at 15, the snapshots above go, and the journal
		// no longer reaches back to the one at 10.
		{name: "journal compacted past the snapshot left", to: 35, fork: 15, applied: 0, refetch: true, discarded: 1},
		{name: "journal compacted, snapshot left reachable", to: 35, fork: 25, applied: 25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := journal.NewMemFS()
			s := open(t, config(fs, nil))
			if tc.installAt != 0 {
				c := &counter{}
				for seq := uint64(1); seq <= tc.installAt; seq++ {
					c.Apply(seq, cmd(seq), nil)
				}
				data, _ := s.Snapshots().Cut(c, tc.installAt, 1)
				if !s.Snapshots().Install(s.Engine(), tc.installAt, 1, data) {
					t.Fatal("install failed")
				}
			}
			to := cmp.Or(tc.to, 25)
			write(t, s, 1, to)
			if err := s.ResetTo(tc.fork); err != nil {
				t.Fatal(err)
			}
			checkState(t, s, tc.applied)
			if _, last := s.Journal().Last(); last != tc.applied {
				t.Fatalf("journal ends at %d, want %d", last, tc.applied)
			}
			if s.Refetching() != tc.refetch || s.Counters().HistoryDiscarded != tc.discarded {
				t.Fatalf("refetching %v discarded %d, want %v %d", s.Refetching(), s.Counters().HistoryDiscarded, tc.refetch, tc.discarded)
			}
			// What is left is what a restart rebuilds.
			s.Journal().Close()
			s = open(t, config(fs, nil))
			checkState(t, s, tc.applied)
		})
	}
}

// A refetch state that cannot be recorded breaks the storage (the node
// must never lead in this process); Break reports only the first.
func TestBroken(t *testing.T) {
	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	fs.SetSyncError(errors.New("disk gone"))
	s.SetRefetching(true)
	fs.SetSyncError(nil)
	if !s.Broken() {
		t.Fatal("a refetch marker that could not be written left the storage unbroken")
	}
	s2 := open(t, config(journal.NewMemFS(), nil))
	if !s2.Break() || s2.Break() || !s2.Broken() || !s2.Counters().Broken {
		t.Fatal("Break: want true once, then false, and Broken after (in the counters too, for status)")
	}
}

// A crash that kept a snapshot and took the unsynced records under it
// leaves a journal that holds no record and continues after the
// snapshot; a cut below the snapshot then cannot truncate anything and
// must discard down to what is left and refetch, not fail (the history
// property found it: the reconciliation failed at every NEW_EPOCH
// repeat, and the standby never followed the new primary). The
// snapshot writer now syncs the journal before a snapshot, so this takes
// a snapshot written around it (as one from an older seqbus, or a disk
// that reorders writes, could leave): the recovery must still hold.
func TestResetToAfterCrashEmptiedTheJournal(t *testing.T) {
	fs := journal.NewMemFS()
	c := config(fs, nil)
	s := open(t, c)
	for seq := uint64(1); seq <= 10; seq++ { // never synced: only the snapshot at 10 is
		if err := s.Journal().Append(1, seq, cmd(seq), 0); err != nil {
			t.Fatal(err)
		}
		s.Engine().Apply(seq, cmd(seq), nil)
		if err := s.Journal().Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Journal().WriteSnapshot(10, 1, s.Engine().Snapshot); err != nil {
		t.Fatal(err)
	}
	fs.Crash(0)
	s = open(t, c)
	checkState(t, s, 10)
	if s.Journal().First() != 0 {
		t.Fatalf("journal holds records from %d: the crash was meant to take them all", s.Journal().First())
	}
	if err := s.ResetTo(1); err != nil {
		t.Fatalf("cut at 1 below the snapshot at 10: %v", err)
	}
	checkState(t, s, 0)
	if !s.Refetching() || s.Counters().HistoryDiscarded != 1 {
		t.Fatalf("refetching %v discarded %d, want true 1", s.Refetching(), s.Counters().HistoryDiscarded)
	}
}

// A history that ends below the durable seq the last run reported lost
// durable records (a journal cut at a record boundary, a backup
// restored): it is kept as a valid prefix, but marked to refetch (the
// node may not lead from it, and the marker survives a restart); a
// static primary refuses it. A claim the history reaches changes
// nothing.
func TestCheckDurableClaim(t *testing.T) {
	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	write(t, s, 1, 25)
	s.Journal().Close()

	s = open(t, config(fs, nil))
	for _, claimed := range []uint64{0, 24, 25} {
		if err := s.CheckDurableClaim(claimed, "status.json"); err != nil || s.Refetching() || s.Counters().HistoriesShort != 0 {
			t.Fatalf("claim %d of a history to 25: err %v, refetching %v, short %d", claimed, err, s.Refetching(), s.Counters().HistoriesShort)
		}
	}
	s.Journal().Close()

	static := config(fs, nil)
	static.SetAsideCorrupt = false
	st := open(t, static)
	err := st.CheckDurableClaim(40, "status.json")
	if err == nil || !strings.Contains(err.Error(), "ends at seq 25, below the durable seq 40") || st.Refetching() {
		t.Fatalf("static primary, claim 40 over a history to 25: err %v, refetching %v", err, st.Refetching())
	}
	st.Journal().Close()

	s = open(t, config(fs, nil))
	if err := s.CheckDurableClaim(40, "status.json"); err != nil {
		t.Fatal(err)
	}
	checkState(t, s, 25) // the prefix is kept
	if !s.Refetching() || s.Counters().HistoriesShort != 1 {
		t.Fatalf("claim 40 over a history to 25: refetching %v, short %d; want true, 1", s.Refetching(), s.Counters().HistoriesShort)
	}
	s.Journal().Close()
	if s = open(t, config(fs, nil)); !s.Refetching() {
		t.Fatal("refetch state lost across a restart")
	}
}

// EpochAt answers from the journal, and at the seq of the snapshot the
// state started from, which the journal no longer holds, from its label:
// after a fetched snapshot is installed, and after a restart from it.
func TestEpochAtSnapshotLabel(t *testing.T) {
	src := open(t, config(journal.NewMemFS(), nil))
	write(t, src, 1, 25)
	data, ok := src.Snapshots().Cut(src.Engine(), 25, 1)
	if !ok {
		t.Fatal("cut failed")
	}

	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	write(t, s, 1, 3)
	if e, ok := s.EpochAt(3); !ok || e != 1 {
		t.Fatalf("EpochAt(3) of a journaled record = %d, %v; want 1", e, ok)
	}
	// Fetched while following epoch 2: the record at 25 is epoch 1's.
	if !s.Snapshots().Install(s.Engine(), 25, 1, data) {
		t.Fatal("install failed")
	}
	s.Installed(25, 1)
	for _, seq := range []uint64{3, 24, 26} {
		if e, ok := s.EpochAt(seq); ok {
			t.Fatalf("EpochAt(%d) after the install = %d; want none (the journal starts after 25)", seq, e)
		}
	}
	if e, ok := s.EpochAt(25); !ok || e != 1 {
		t.Fatalf("EpochAt(25), the installed snapshot's seq = %d, %v; want its label 1", e, ok)
	}
	write(t, s, 2, 27)
	s.Journal().Close()

	s = open(t, config(fs, nil))
	checkState(t, s, 27)
	for seq, want := range map[uint64]uint64{25: 1, 26: 2, 27: 2} {
		if e, ok := s.EpochAt(seq); !ok || e != want {
			t.Fatalf("after a restart, EpochAt(%d) = %d, %v; want %d", seq, e, ok, want)
		}
	}
	if e, ok := s.EpochAt(0); ok {
		t.Fatalf("EpochAt(0) = %d; want none", e)
	}
}

// TestOpenLocksDirectory: on the real filesystem a second Open of a
// journal directory, by this process or another, is refused until the
// first Storage is closed; a simulated FS takes no lock.
func TestOpenLocksDirectory(t *testing.T) {
	c := config(journal.OSFS{}, nil)
	c.Dir = t.TempDir() + "/node"
	s, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(c); !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "another node uses") {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(c)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s.Close()
	m := config(journal.NewMemFS(), nil)
	a, err := Open(m)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.lock != nil {
		t.Fatal("a lock taken on a simulated FS")
	}
}

// A directory that is empty when its node first opens it is new, and
// stays new across crashes and restarts until the node joins a history
// (led or caught up: Joined); then it is never new again, even with no
// record in it. A directory with history but no marker (from before the
// markers) is not new; both markers at once (a crash inside Joined) is
// joined.
func TestNewDirectory(t *testing.T) {
	reopen := func(t *testing.T, fs *journal.MemFS) *Storage {
		t.Helper()
		fs.Crash(1) // what was not durable is gone
		return open(t, config(fs, nil))
	}
	t.Run("new until joined", func(t *testing.T) {
		fs := journal.NewMemFS()
		s := open(t, config(fs, nil))
		if !s.NewDirectory() {
			t.Fatal("an empty directory is not new")
		}
		s.Close()
		s = reopen(t, fs)
		if !s.NewDirectory() {
			t.Fatal("a new directory reopened after a crash is not new")
		}
		if err := s.Joined(); err != nil || s.NewDirectory() {
			t.Fatalf("Joined: %v, new %v", err, s.NewDirectory())
		}
		if err := s.Joined(); err != nil {
			t.Fatalf("Joined again: %v", err)
		}
		s.Close()
		if s = reopen(t, fs); s.NewDirectory() {
			t.Fatal("a joined directory with no record is new after a crash")
		}
	})
	t.Run("history without markers", func(t *testing.T) {
		fs := journal.NewMemFS()
		s := open(t, config(fs, nil))
		write(t, s, 1, 5)
		s.Close()
		if err := journal.SetMarker(fs, dir, journal.NewDirMarker, false); err != nil {
			t.Fatal(err)
		}
		if s = reopen(t, fs); s.NewDirectory() {
			t.Fatal("a directory with records and no marker is new")
		}
	})
	t.Run("both markers", func(t *testing.T) {
		fs := journal.NewMemFS()
		open(t, config(fs, nil)).Close()
		if err := journal.SetMarker(fs, dir, journal.JoinedMarker, true); err != nil {
			t.Fatal(err)
		}
		if s := reopen(t, fs); s.NewDirectory() {
			t.Fatal("a directory with both markers is new")
		}
	})
	t.Run("joined fails", func(t *testing.T) {
		fs := journal.NewMemFS()
		s := open(t, config(fs, nil))
		fs.SetSyncError(errors.New("disk gone"))
		if err := s.Joined(); err == nil || !s.NewDirectory() || !s.Broken() {
			t.Fatalf("Joined on a failing disk: %v, new %v, broken %v; want an error, still new, broken", err, s.NewDirectory(), s.Broken())
		}
	})
}

// TestLockNames: the journal's lock file is the one dirlock knows a
// node's directory by (a witness refuses a directory holding it), and
// neither role's lock is allowed in the other's directory.
func TestLockNames(t *testing.T) {
	if journal.LockFileName != dirlock.NodeLockName {
		t.Fatalf("journal.LockFileName %q, dirlock.NodeLockName %q", journal.LockFileName, dirlock.NodeLockName)
	}
	dir := t.TempDir()
	l, err := dirlock.Acquire(dir, dirlock.WitnessLockName)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := dirlock.Acquire(dir, journal.LockFileName); !errors.Is(err, dirlock.ErrOtherRole) {
		t.Fatalf("a node's lock in a witness's directory: %v", err)
	}
}

// MakeHistory makes a directory's history id once (from the seed, or at
// random without one) and keeps it: a reopened directory has the same,
// and a corrupt id file refuses to open with an error naming it.
func TestMakeHistory(t *testing.T) {
	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	if s.History() != 0 {
		t.Fatalf("a new directory has history %#x", s.History())
	}
	id, err := s.MakeHistory(0x5eed)
	if err != nil || id != 0x5eed || s.History() != id {
		t.Fatalf("MakeHistory: %#x %v", id, err)
	}
	if again, err := s.MakeHistory(0x77); err != nil || again != id {
		t.Fatalf("a second MakeHistory: %#x %v", again, err)
	}
	s.Close()
	s = open(t, config(fs, nil))
	if s.History() != id {
		t.Fatalf("reopened: %#x, want %#x", s.History(), id)
	}
	s.Close()
	f, err := fs.OpenFile(dir+"/"+journal.HistoryFile, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("zz\n"))
	f.Close()
	if _, err := Open(config(fs, nil)); err == nil || !strings.Contains(err.Error(), journal.HistoryFile) {
		t.Fatalf("corrupt id file: %v", err)
	}
	other := open(t, config(journal.NewMemFS(), nil))
	if r, err := other.MakeHistory(0); err != nil || r == 0 {
		t.Fatalf("random id: %#x %v", r, err)
	}
}

// RaiseFence records the fence durably: HighestEpoch holds it with no
// record of that epoch, after a reopen too; a lower one changes nothing.
func TestRaiseFence(t *testing.T) {
	fs := journal.NewMemFS()
	s := open(t, config(fs, nil))
	write(t, s, 1, 5)
	if err := s.RaiseFence(3); err != nil || s.HighestEpoch() != 3 {
		t.Fatalf("raise to 3: %v, highest %d", err, s.HighestEpoch())
	}
	if err := s.RaiseFence(2); err != nil || s.HighestEpoch() != 3 {
		t.Fatalf("raise to 2: %v, highest %d", err, s.HighestEpoch())
	}
	s.Close()
	s = open(t, config(fs, nil))
	if s.HighestEpoch() != 3 || s.Journal().HighestEpoch() != 1 {
		t.Fatalf("reopened: highest %d, journal's %d; want 3 and 1", s.HighestEpoch(), s.Journal().HighestEpoch())
	}
}
