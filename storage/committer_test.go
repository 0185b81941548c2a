package storage

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/journal"
)

// appendOne journals one record and writes it (not synced).
func appendOne(t *testing.T, j *journal.Journal, seq uint64) {
	t.Helper()
	if err := j.Append(1, seq, cmd(seq), 0); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
}

func openJournal(t *testing.T, fs journal.FS, policy journal.SyncPolicy) *journal.Journal {
	t.Helper()
	j, _, err := journal.Open(fs, dir, journal.Options{Policy: policy, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// waitWake waits (bounded) for the thread's wake call.
func waitWake(t *testing.T, woke chan struct{}) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("the fsync thread never woke its owner")
	}
}

// Under fsync group a kick after a write makes the thread sync it,
// publish the durable rise and wake the owner; Take reports it once.
func TestCommitterPublishesDurable(t *testing.T) {
	j := openJournal(t, journal.NewMemFS(), journal.SyncGroup)
	woke := make(chan struct{}, 8)
	c := NewCommitter(j, journal.SyncGroup, func() { woke <- struct{}{} }, Inline{})
	c.Start()
	defer c.Stop()
	if c.Pending() {
		t.Fatal("pending before anything was written")
	}
	appendOne(t, j, 1)
	c.Kick()
	waitWake(t, woke)
	if !c.Pending() {
		t.Fatal("a durable rise is not pending")
	}
	if failed, err, rose := c.Take(); failed != 0 || err != nil || !rose || j.Durable() != 1 {
		t.Fatalf("take: failed %d err %v rose %v durable %d", failed, err, rose, j.Durable())
	}
	if c.Pending() {
		t.Fatal("still pending after Take")
	}
}

// A kick with everything written durable wakes nobody; under fsync none
// nothing is ever kicked, started or pending.
func TestCommitterKicksOnlyForUnsynced(t *testing.T) {
	j := openJournal(t, journal.NewMemFS(), journal.SyncGroup)
	c := NewCommitter(j, journal.SyncGroup, func() {}, Inline{})
	c.Kick()
	if c.TakeKick() {
		t.Fatal("kicked with nothing written")
	}
	appendOne(t, j, 1)
	c.Kick()
	if !c.TakeKick() {
		t.Fatal("not kicked for a record written and not synced")
	}
	c.Commit()
	c.Kick()
	if c.TakeKick() {
		t.Fatal("kicked again after the commit made everything durable")
	}

	jn := openJournal(t, journal.NewMemFS(), journal.SyncNone)
	n := NewCommitter(jn, journal.SyncNone, func() { t.Error("fsync none woke its owner") }, Inline{})
	n.Start()
	defer n.Stop()
	appendOne(t, jn, 1)
	n.Kick()
	if n.TakeKick() || n.Pending() {
		t.Fatal("fsync none kicked the fsync thread or has something pending")
	}
}

// A failed fsync is published (counted, the first error kept) and
// wakes the owner; nothing becomes durable.
func TestCommitterPublishesFailure(t *testing.T) {
	fs := journal.NewMemFS()
	j := openJournal(t, fs, journal.SyncGroup)
	woke := make(chan struct{}, 8)
	c := NewCommitter(j, journal.SyncGroup, func() { woke <- struct{}{} }, Inline{})
	c.Start()
	defer c.Stop()
	gone := errors.New("disk gone")
	fs.SetSyncError(gone)
	appendOne(t, j, 1)
	c.Kick()
	waitWake(t, woke)
	if !c.Pending() {
		t.Fatal("a failed fsync is not pending")
	}
	failed, err, rose := c.Take()
	if failed != 1 || !errors.Is(err, gone) || rose || j.Durable() != 0 {
		t.Fatalf("take: failed %d err %v rose %v durable %d; want 1, %v, false, 0", failed, err, rose, j.Durable(), gone)
	}
	if c.Pending() {
		t.Fatal("still pending after Take")
	}
}

// stepClock is a clock that moves cost ns at every read, so each timed
// fsync (a read before, one after) takes exactly cost.
type stepClock struct{ now, cost int64 }

func (c *stepClock) NowNs() int64 { c.now += c.cost; return c.now }

// While fsyncs are fast the owner's kick syncs inline: durable at once,
// no thread kicked, nothing left for Take. An fsync slower than the bound
// moves the next ones to the thread; once the thread's fsyncs are fast
// again, the average falls and the owner syncs inline again.
func TestCommitterSyncsInlineWhileFast(t *testing.T) {
	j := openJournal(t, journal.NewMemFS(), journal.SyncGroup)
	clk := &stepClock{cost: 5_000}
	c := NewCommitter(j, journal.SyncGroup, func() {}, Inline{BelowNs: 20_000, NowNs: clk.NowNs})
	appendOne(t, j, 1)
	if err := c.Kick(); err != nil {
		t.Fatal(err)
	}
	if j.Durable() != 1 || c.TakeKick() || c.Pending() {
		t.Fatalf("fast fsync not inline: durable %d (want 1), thread kicked or something pending", j.Durable())
	}
	if got := c.Counters(); got.Inline != 1 || got.Thread != 0 || got.AvgNs != 5_000 || got.MaxNs != 5_000 {
		t.Fatalf("counters %+v, want 1 inline, 0 thread, avg and max 5000 (the first fsync's)", got)
	}

	clk.cost = 1_000_000 // the disk turns slow: this inline fsync takes 1 ms
	appendOne(t, j, 2)
	if err := c.Kick(); err != nil || j.Durable() != 2 {
		t.Fatalf("kick: %v, durable %d; want inline (the average was fast)", err, j.Durable())
	}
	appendOne(t, j, 3)
	c.Kick()
	if j.Durable() != 2 || !c.TakeKick() {
		t.Fatalf("after a slow fsync: durable %d (want 2), the thread must be kicked", j.Durable())
	}

	clk.cost = 5_000 // fast again: the thread's fsyncs bring the average down
	for i := 0; ; i++ {
		c.Commit() // the thread's fsync
		if i > 64 {
			t.Fatalf("average %d ns never fell to the bound after %d fast fsyncs", c.Counters().AvgNs, i)
		}
		seq := uint64(4 + i)
		appendOne(t, j, seq)
		c.Kick()
		if c.TakeKick() {
			continue
		}
		if j.Durable() != seq {
			t.Fatalf("kick neither kicked the thread nor synced inline: durable %d, want %d", j.Durable(), seq)
		}
		break
	}
	if got := c.Counters(); got.Inline != 3 || got.Thread == 0 || got.AvgNs > 20_000 || got.MaxNs != 1_000_000 {
		t.Fatalf("counters %+v: want 3 inline, some on the thread, average at most the bound, max the slow one's 1 ms", got)
	}
}

// A failed inline fsync is the kick's error (Take does not report it
// again); nothing becomes durable.
func TestCommitterInlineFailure(t *testing.T) {
	fs := journal.NewMemFS()
	j := openJournal(t, fs, journal.SyncGroup)
	clk := &stepClock{cost: 1_000}
	c := NewCommitter(j, journal.SyncGroup, func() {}, Inline{BelowNs: 20_000, NowNs: clk.NowNs})
	gone := errors.New("disk gone")
	fs.SetSyncError(gone)
	appendOne(t, j, 1)
	if err := c.Kick(); !errors.Is(err, gone) {
		t.Fatalf("kick: %v, want %v", err, gone)
	}
	if j.Durable() != 0 || c.Pending() || c.TakeKick() {
		t.Fatalf("after a failed inline fsync: durable %d, pending %v", j.Durable(), c.Pending())
	}
}

// blockingFS's files block in Sync until release is closed, once
// blocking is set: an fsync thread caught in a slow fsync.
type blockingFS struct {
	journal.FS
	blocking         atomic.Bool
	entered, release chan struct{}
}

type blockingFile struct {
	journal.File
	fs *blockingFS
}

func (b *blockingFS) OpenFile(name string, flag int, perm os.FileMode) (journal.File, error) {
	f, err := b.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return blockingFile{File: f, fs: b}, nil
}

func (f blockingFile) Sync() error {
	if f.fs.blocking.Load() {
		f.fs.entered <- struct{}{}
		<-f.fs.release
	}
	return f.File.Sync()
}

// While the thread is in an fsync, a kick never waits for it: it kicks
// the thread again (the records written since go into its next fsync).
func TestCommitterInlineNeverWaitsForTheThread(t *testing.T) {
	fs := &blockingFS{FS: journal.NewMemFS(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	j := openJournal(t, fs, journal.SyncGroup)
	clk := func() int64 { return 0 } // every fsync takes 0: always inline when free
	c := NewCommitter(j, journal.SyncGroup, func() {}, Inline{BelowNs: 20_000, NowNs: clk})
	appendOne(t, j, 1)
	fs.blocking.Store(true)
	done := make(chan struct{})
	go func() { c.Commit(); close(done) }() // the thread's fsync, stuck in the disk
	<-fs.entered
	appendOne(t, j, 2)
	c.Kick() // must return at once
	if !c.TakeKick() || j.Durable() != 0 {
		t.Fatalf("kick during the thread's fsync: want the thread kicked and nothing durable yet (durable %d)", j.Durable())
	}
	fs.blocking.Store(false)
	close(fs.release)
	<-done
	if j.Durable() != 2 {
		c.Commit()
	}
	if j.Durable() != 2 {
		t.Fatalf("durable %d after the thread's next fsync, want 2", j.Durable())
	}
}

// One fsync tells a slow disk: the first one's time is the average, so a
// disk just over the bound gets one inline fsync, then the thread.
func TestCommitterOneProbeOnASlowDisk(t *testing.T) {
	j := openJournal(t, journal.NewMemFS(), journal.SyncGroup)
	clk := &stepClock{cost: 30_000}
	c := NewCommitter(j, journal.SyncGroup, func() {}, Inline{BelowNs: 20_000, NowNs: clk.NowNs})
	appendOne(t, j, 1)
	c.Kick()
	appendOne(t, j, 2)
	c.Kick()
	if !c.TakeKick() || j.Durable() != 1 {
		t.Fatalf("second kick on a 30 µs disk: durable %d, want 1 and the thread kicked", j.Durable())
	}
	if got := c.Counters(); got.Inline != 1 || got.AvgNs != 30_000 {
		t.Fatalf("counters %+v, want one inline fsync, average 30000", got)
	}
}
