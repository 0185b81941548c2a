package journal

import "io"

// SnapshotWriterOptions configures a SnapshotWriter.
type SnapshotWriterOptions struct {
	// Inline writes every snapshot on the caller's goroutine, in Start,
	// Cut and Finish: for a runtime with one goroutine (the deterministic
	// simulator), where a write must happen at a step it controls.
	// Otherwise each write runs on a goroutine of its own.
	Inline bool
	// NowNs is the caller's monotonic clock (the journal reads none); it
	// times the writes and Cut's wait. Nil counts every duration as 0.
	NowNs func() int64
}

// SnapshotWrite is what became of one snapshot handed to Cut: its write
// (and its fsyncs and rename) ended with Err, WriteNs after it started
// (measured when the owner noticed, in Poll, Cut or Finish); after a
// successful write the journal was compacted behind it (Compact: Removed
// segments, CompactErr). A failed write compacts nothing.
type SnapshotWrite struct {
	Seq, Epoch uint64
	Data       []byte // as handed to Cut
	Err        error
	WriteNs    int64
	Removed    int
	CompactErr error
}

// snapshotJob is one snapshot waiting for the disk or being written.
type snapshotJob struct {
	seq, epoch uint64
	data       []byte
	startNs    int64
	done       chan writeResult // nil until the write has started
}

// snapshotsWaitingMax is the queue's bound: the snapshot being written and
// the next. A third Cut waits for the first.
const snapshotsWaitingMax = 2

// SnapshotWriter is the journal's own snapshot writer: it takes snapshots
// already encoded (the state at their seq) and writes them with
// WriteSnapshot in order, one at a time, off the owner goroutine (or
// inline, SnapshotWriterOptions.Inline), then compacts the journal behind
// each written one on the owner goroutine.
//
// At most two snapshots wait for the disk: the one being written and the
// next. Cut of a third first waits for the oldest to be written (and says
// how long), so the owner waits only for a disk two snapshots behind and
// no snapshot handed to Cut is left out.
//
// Every method is the owner's (the goroutine that owns the Journal). Cut,
// Start, Poll and Finish return the snapshots they finished, oldest first,
// in a slice valid until the next call; the caller publishes them (a
// cache, counters). Nothing finishes anywhere else.
type SnapshotWriter struct {
	j       *Journal
	opts    SnapshotWriterOptions
	pending *snapshotJob // the oldest: being written, or next to start
	next    *snapshotJob // written after pending
	// finished is what the current call finished (at most the queue's
	// bound), reused from call to call.
	finished [snapshotsWaitingMax]SnapshotWrite
	nDone    int
}

// NewSnapshotWriter returns a writer of j's snapshots.
func NewSnapshotWriter(j *Journal, opts SnapshotWriterOptions) *SnapshotWriter {
	return &SnapshotWriter{j: j, opts: opts}
}

func (w *SnapshotWriter) now() int64 {
	if w.opts.NowNs == nil {
		return 0
	}
	return w.opts.NowNs()
}

// Waiting is how many snapshots wait for the disk or are being written
// (0, 1 or 2).
func (w *SnapshotWriter) Waiting() int {
	switch {
	case w.next != nil:
		return 2
	case w.pending != nil:
		return 1
	}
	return 0
}

// Cut queues the snapshot at seq (taken under epoch; data is its encoded
// state, not modified afterwards) behind those waiting. With two waiting
// it first writes the oldest and waits for it (inline: writes both);
// waitNs is how long that took (0 without a wait). It does not start the
// new one's write: Start does, when the caller is ready for the disk.
func (w *SnapshotWriter) Cut(seq, epoch uint64, data []byte) (waitNs int64, done []SnapshotWrite) {
	w.nDone = 0
	w.poll()
	if w.next != nil {
		start := w.now()
		w.start()
		if ps := w.pending; ps != nil {
			w.written(<-ps.done)
		}
		waitNs = w.now() - start
	}
	ps := &snapshotJob{seq: seq, epoch: epoch, data: data}
	if w.pending == nil {
		w.pending = ps
	} else {
		w.next = ps
	}
	return waitNs, w.finished[:w.nDone]
}

// Start starts writing the oldest snapshot waiting, if its write has not
// started. Inline, it writes every snapshot waiting and returns them.
func (w *SnapshotWriter) Start() []SnapshotWrite {
	w.nDone = 0
	w.start()
	return w.finished[:w.nDone]
}

// Poll finishes a write that has completed, without waiting.
func (w *SnapshotWriter) Poll() []SnapshotWrite {
	w.nDone = 0
	w.poll()
	return w.finished[:w.nDone]
}

// Finish writes every snapshot waiting and waits for them (before the
// caller changes role or closes the journal).
func (w *SnapshotWriter) Finish() []SnapshotWrite {
	w.nDone = 0
	for w.pending != nil {
		w.start()
		if ps := w.pending; ps != nil {
			w.written(<-ps.done)
		}
	}
	return w.finished[:w.nDone]
}

// Abandon waits for a write under way and forgets every snapshot waiting,
// reporting and compacting nothing: before the history is reset or
// another snapshot installed (the caller then drops a written snapshot
// that lies past its fork).
func (w *SnapshotWriter) Abandon() {
	w.nDone = 0
	if ps := w.pending; ps != nil && ps.done != nil {
		<-ps.done
	}
	w.pending, w.next = nil, nil
}

// start starts the oldest snapshot's write if it has not started: on a
// goroutine of its own (Sync is safe from any goroutine, and
// WriteSnapshot touches no journal state and may run off the owner
// goroutine, one at a time: every other method first waits for it), or
// inline, where every snapshot waiting is written.
func (w *SnapshotWriter) start() {
	for {
		ps := w.pending
		if ps == nil || ps.done != nil {
			return
		}
		ps.startNs = w.now()
		ps.done = make(chan writeResult, 1)
		j := w.j
		// The journal holds the records through the snapshot's seq before
		// the snapshot is on disk: a crash must never leave a snapshot
		// past the journal's end. The records between would be in the
		// state and nowhere else: no session history or market-data ring
		// is rebuilt from a snapshot, so a restarted node could not replay
		// their outputs to a client nor publish their updates (sim seeds
		// 603850 and 700134, four and five nodes). The owner writes its
		// buffer here (a process crash keeps what was written); under
		// group and always the journal is fsynced with the snapshot's
		// write, one fsync a snapshot, so a power loss keeps them too.
		// Under none nothing is fsynced, and a power loss may lose any
		// record, as that policy says.
		flushErr, sync := j.Flush(), j.opts.Policy != SyncNone
		write := func() (r writeResult) {
			if r.err = flushErr; r.err != nil {
				return r
			}
			if sync {
				if r.err = j.Sync(); r.err != nil {
					return r
				}
			}
			r.err = j.WriteSnapshot(ps.seq, ps.epoch, func(out io.Writer) error {
				_, err := out.Write(ps.data)
				return err
			})
			if r.err == nil {
				// The retention decision reads the directory and verifies
				// the newest snapshot (the whole file): here, off the owner.
				r.behind, r.compact, r.compactErr = j.compactionSeq()
			}
			return r
		}
		if !w.opts.Inline {
			go func() { ps.done <- write() }()
			return
		}
		ps.done <- write()
		w.poll()
	}
}

// poll finishes the oldest write if it has completed.
func (w *SnapshotWriter) poll() {
	ps := w.pending
	if ps == nil || ps.done == nil {
		return
	}
	select {
	case r := <-ps.done:
		w.written(r)
	default:
	}
}

// writeResult is what a write's goroutine (or the inline write) found:
// the write's error and, after a successful one, the compaction's seq
// (Journal.compactionSeq).
type writeResult struct {
	err        error
	behind     uint64
	compact    bool
	compactErr error
}

// written finishes the oldest write, whose goroutine found res: the queue
// moves on, and after a successful write the journal is compacted behind
// it. The owner drops the segments from its view; their files are
// removed off the owner (Journal.compactBehindAsync), or inline.
func (w *SnapshotWriter) written(res writeResult) {
	ps := w.pending
	w.pending, w.next = w.next, nil
	if w.nDone == len(w.finished) {
		// The queue holds two, and each call starts from none finished.
		panic("journal: SnapshotWriter finished more snapshots in one call than it queues")
	}
	r := SnapshotWrite{Seq: ps.seq, Epoch: ps.epoch, Data: ps.data, Err: res.err, WriteNs: w.now() - ps.startNs}
	switch {
	case res.err != nil:
	case res.compactErr != nil:
		r.CompactErr = res.compactErr
	case !res.compact:
		r.CompactErr = w.j.removalError() // an earlier removal's, if it failed
	case w.opts.Inline:
		r.Removed, r.CompactErr = w.j.CompactBehind(res.behind)
	default:
		r.Removed, r.CompactErr = w.j.compactBehindAsync(res.behind)
	}
	w.finished[w.nDone] = r
	w.nDone++
}
