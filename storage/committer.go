package storage

import (
	"errors"
	"sync/atomic"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/journal"
)

// Committer is the fsync thread of fsync group and always: natural group
// commit, LMAX's and TigerBeetle's way. Kicked after the owner wrote
// records, it fsyncs everything written so far; whatever the owner
// writes while that fsync runs kicks it again and goes into the next
// one. There is no timer: under load the groups grow by themselves, idle
// they are one record. The journal's GroupWindowNs and GroupRecords
// (which journal.SyncDue applies for a simulator that syncs by hand) are
// thus upper bounds a started Committer always meets early, never a
// wait.
//
// It publishes through the journal's atomic durable watermark (and a
// failure through its own atomics), then calls wake, so an owner parked
// on its fds takes the news at once; it never takes the owner's lock and
// allocates nothing. Under fsync none there is nothing to sync: Flush
// makes records durable as it writes them, Kick does nothing and no
// thread is started.
//
// Kick, Pending and Take are the owner's (its agent thread); Start and
// Stop its lifecycle's.
type Committer struct {
	j    *journal.Journal
	none bool
	w    *bus.Worker
	wake func()

	failures atomic.Uint64
	err      atomic.Pointer[error] // the first failure

	// The owner's: what Take last reported.
	durableSeen, failuresSeen uint64
}

// NewCommitter returns the fsync thread for j under policy, not started;
// wake is called (from the thread) after each publication.
func NewCommitter(j *journal.Journal, policy journal.SyncPolicy, wake func()) *Committer {
	c := &Committer{j: j, none: policy == journal.SyncNone, wake: wake, durableSeen: j.Durable()}
	c.w = bus.NewWorker(c.commit)
	return c
}

// Start runs the thread (not under fsync none).
func (c *Committer) Start() {
	if !c.none {
		c.w.Start()
	}
}

// Stop stops the thread and waits for a commit under way.
func (c *Committer) Stop() { c.w.Stop() }

// Kick wakes the thread when something written is not durable yet; it
// never blocks. Under fsync none, and while everything written is
// durable (a tick or a pass that appended nothing), it wakes nobody.
func (c *Committer) Kick() {
	if c.none {
		return
	}
	if _, last := c.j.Last(); last <= c.j.Durable() {
		return
	}
	c.w.Kick()
}

// commit is one group commit, on the thread.
func (c *Committer) commit() {
	if err := c.j.Sync(); err != nil && !errors.Is(err, journal.ErrClosed) {
		// A copy only here: taking err's own address would move it to
		// the heap on every sync (one malloc per group commit).
		failed := err
		c.err.CompareAndSwap(nil, &failed)
		c.failures.Add(1)
	}
	c.wake() // after the publication: the owner's Pending sees it
}

// Pending reports whether the thread published something Take has not
// reported: a durable rise or a failed fsync. Two atomic loads.
func (c *Committer) Pending() bool {
	return !c.none && (c.j.Durable() != c.durableSeen || c.failures.Load() != c.failuresSeen)
}

// Take reports what the thread published since the last Take: how many
// fsyncs failed (with the first failure's error) and whether the durable
// watermark rose.
func (c *Committer) Take() (failed uint64, err error, rose bool) {
	if f := c.failures.Load(); f != c.failuresSeen {
		failed, err = f-c.failuresSeen, *c.err.Load()
		c.failuresSeen = f
	}
	if d := c.j.Durable(); d != c.durableSeen {
		c.durableSeen, rose = d, true
	}
	return failed, err, rose
}

// Seen marks the durable watermark as taken (the owner acted on it
// another way: a sync of its own).
func (c *Committer) Seen() { c.durableSeen = c.j.Durable() }

// TakeKick takes a kick waiting for a thread that was never started, and
// Commit runs one group commit on the caller: driving the Committer by
// hand (tests).
func (c *Committer) TakeKick() bool { return c.w.TakeKick() }

// Commit is one group commit, as the thread runs it.
func (c *Committer) Commit() { c.commit() }
