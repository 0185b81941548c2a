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
// Where the disk's fsync is fast (Inline), the owner fsyncs on its own
// thread instead, when it kicks: handing an fsync of a few µs to another
// thread and back costs two wake-ups, each a thread the kernel must put on
// a CPU (9–10 µs each on a busy 2-core box, docs/tuning.md), more than the
// fsync itself. Every fsync, inline or on the thread, is timed; the owner
// syncs inline while their moving average is at most Inline.BelowNs, and
// kicks the thread otherwise, so a slow disk (or one that turns slow)
// never holds the owner's loop, and one that turns fast again is used
// inline again after a few of the thread's fsyncs.
//
// Kick, Pending and Take are the owner's (its agent thread); Start and
// Stop its lifecycle's.
type Committer struct {
	j      *journal.Journal
	none   bool
	w      *bus.Worker
	wake   func()
	inline Inline

	failures atomic.Uint64
	err      atomic.Pointer[error] // the first failure

	// avgNs is the moving average of the fsyncs' times (1/8 weight to the
	// newest; the first one's time to begin with; -1 before any), updated
	// by compare-and-swap after each by whichever thread ran it, so an
	// inline fsync's and the thread's never lose one another.
	avgNs            atomic.Int64
	maxNs            atomic.Int64 // the longest fsync
	inlineN, threadN atomic.Uint64
	durableSeen      uint64 // the owner's: what Take last reported
	failuresSeen     uint64
}

// Inline says when the owner fsyncs on its own thread (Committer).
type Inline struct {
	// BelowNs: sync inline while the fsyncs' moving average is at most
	// this (0: never; every fsync on the thread).
	BelowNs int64
	// NowNs times the fsyncs (monotonic ns); nil with BelowNs 0.
	NowNs func() int64
}

// CommitterCounters is what a Committer did, for status.
type CommitterCounters struct {
	Inline uint64 // fsyncs run by the owner, inline
	Thread uint64 // fsyncs run by the fsync thread
	AvgNs  int64  // their moving average, ns
	// MaxNs is the longest of them, ns: a disk that stalled (a frozen
	// or hung device blocks an fsync, with no error) leaves its length
	// here.
	MaxNs int64
}

// NewCommitter returns the fsync thread for j under policy, not started;
// wake is called (from the thread) after each publication.
func NewCommitter(j *journal.Journal, policy journal.SyncPolicy, wake func(), inline Inline) *Committer {
	if inline.NowNs == nil {
		inline.BelowNs = 0
	}
	c := &Committer{j: j, none: policy == journal.SyncNone, wake: wake, inline: inline, durableSeen: j.Durable()}
	c.avgNs.Store(-1)
	c.w = bus.NewWorker(c.commit)
	return c
}

// Counters reports the fsyncs run inline and on the thread, and their
// moving average. Safe from any goroutine.
func (c *Committer) Counters() CommitterCounters {
	return CommitterCounters{Inline: c.inlineN.Load(), Thread: c.threadN.Load(), AvgNs: max(c.avgNs.Load(), 0), MaxNs: c.maxNs.Load()}
}

// Start runs the thread (not under fsync none).
func (c *Committer) Start() {
	if !c.none {
		c.w.Start()
	}
}

// Stop stops the thread and waits for a commit under way.
func (c *Committer) Stop() { c.w.Stop() }

// Kick makes what was written durable: at once, on the caller, while
// the fsyncs are fast (Inline) and the thread is not syncing; otherwise
// it wakes the thread and never blocks. Under fsync none, and while
// everything written is durable (a tick or a pass that appended
// nothing), it does nothing. The caller reads Journal.Durable after it
// (an inline fsync's rise is not reported again by Take) and handles the
// error of a failed inline fsync, which Take does not report either.
func (c *Committer) Kick() error {
	if c.none {
		return nil
	}
	if _, last := c.j.Last(); last <= c.j.Durable() {
		return nil
	}
	if c.inline.BelowNs > 0 && c.avgNs.Load() <= c.inline.BelowNs {
		start := c.inline.NowNs()
		r, err := c.j.TrySync()
		if r != journal.SyncBusy {
			c.timed(r, start, &c.inlineN)
			c.durableSeen = c.j.Durable()
			if errors.Is(err, journal.ErrClosed) {
				return nil
			}
			return err
		}
	}
	c.w.Kick()
	return nil
}

// commit is one group commit, on the thread.
func (c *Committer) commit() {
	var start int64
	if c.inline.NowNs != nil {
		start = c.inline.NowNs()
	}
	r, err := c.j.SyncOnce()
	c.timed(r, start, &c.threadN)
	if err != nil && !errors.Is(err, journal.ErrClosed) {
		// A copy only here: taking err's own address would move it to
		// the heap on every sync (one malloc per group commit).
		failed := err
		c.err.CompareAndSwap(nil, &failed)
		c.failures.Add(1)
	}
	c.wake() // after the publication: the owner's Pending sees it
}

// timed records a sync that started at start and ran an fsync (r): its
// count n and its time in the moving average (the first fsync's time is
// the average: one fsync tells a slow disk).
func (c *Committer) timed(r journal.SyncResult, start int64, n *atomic.Uint64) {
	if r != journal.Synced {
		return
	}
	n.Add(1)
	if c.inline.NowNs == nil {
		return
	}
	took := c.inline.NowNs() - start
	for m := c.maxNs.Load(); took > m && !c.maxNs.CompareAndSwap(m, took); m = c.maxNs.Load() {
	}
	for {
		avg, next := c.avgNs.Load(), took
		if avg >= 0 {
			next = avg + (took-avg)/8
		}
		if c.avgNs.CompareAndSwap(avg, next) {
			return
		}
	}
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
