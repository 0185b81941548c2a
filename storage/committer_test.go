package storage

import (
	"errors"
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
	c := NewCommitter(j, journal.SyncGroup, func() { woke <- struct{}{} })
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
	c := NewCommitter(j, journal.SyncGroup, func() {})
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
	n := NewCommitter(jn, journal.SyncNone, func() { t.Error("fsync none woke its owner") })
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
	c := NewCommitter(j, journal.SyncGroup, func() { woke <- struct{}{} })
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
