package bus

import "sync/atomic"

// A Worker is an agent's helper thread: it runs its job on its own
// goroutine each time it is kicked, so the agent hands off work that
// blocks (an fsync, a file write) without waiting for it. Kicks that
// come while the job runs collapse into one more run: natural batching
// with no timer (a group commit syncs everything written while the
// previous one ran; a status writer writes the latest copy). A job that
// publishes to the agent stores what it publishes, then calls
// AgentRunner.Wake (that order is the runner's handshake).
//
// Between runs the worker sleeps in the kernel on a word of its own (a
// futex on Linux), and Kick wakes that very thread with one system call.
// It does not wait on a channel: a goroutine readied from the agent's
// locked thread would go onto the agent's own run queue, which that
// thread never serves, and the runtime steals it from there only after
// a usleep(3) that the kernel's timer slack stretches to ~55 µs
// (BenchmarkWorkerHandoff: 82–88 µs at p50 from kick to run that way,
// on a 2-vCPU Intel Xeon; docs/tuning.md has the figures with a futex).
//
// Kick is for any goroutine; NewWorker, Start and Stop are the owner's.
type Worker struct {
	job func()

	pending  atomic.Bool   // a kick the thread has not taken
	stopping atomic.Bool   // Stop was called
	sleep    atomic.Uint32 // 1 while the thread sleeps (or is about to); who moves it to 0 wakes it
	wakeup   waker

	started atomic.Bool
	stopped atomic.Bool
	done    chan struct{}
}

// NewWorker returns a worker for job, not started: kicks wait for Start
// (or TakeKick, for a worker driven by hand).
func NewWorker(job func()) *Worker {
	w := &Worker{job: job, done: make(chan struct{})}
	w.wakeup.init()
	return w
}

// Start runs the worker's goroutine; a second Start does nothing.
func (w *Worker) Start() {
	if w.started.Swap(true) {
		return
	}
	go w.run()
}

func (w *Worker) run() {
	defer close(w.done)
	for !w.stopping.Load() {
		if w.pending.Swap(false) {
			w.job()
			continue
		}
		// Sleep, unless a kick or a stop came in between: the store
		// comes before the second look, and Kick's set before its look
		// at sleep, so one of the two always sees the other.
		w.sleep.Store(1)
		if w.pending.Load() || w.stopping.Load() {
			if w.sleep.CompareAndSwap(1, 0) {
				continue
			}
			// Someone took the sleep already and wakes us: take its wake.
		}
		w.wakeup.wait(&w.sleep)
	}
}

// Kick makes the worker run its job once more, soon: at once when it is
// waiting (one futex wake), after the current run when it is running (no
// system call). It never blocks and never allocates.
func (w *Worker) Kick() {
	if w.pending.Swap(true) {
		return // a kick is waiting already: the run it causes covers this one
	}
	w.wake()
}

func (w *Worker) wake() {
	if w.sleep.CompareAndSwap(1, 0) {
		w.wakeup.wake(&w.sleep)
	}
}

// TakeKick reports whether a kick is waiting, and takes it: for a worker
// driven by hand (never started) and its tests.
func (w *Worker) TakeKick() bool { return w.pending.Swap(false) }

// Stop ends the worker after the run in progress, if any (a kick still
// waiting is dropped), and waits for it. Safe to call twice, or without
// Start.
func (w *Worker) Stop() {
	if !w.stopped.Swap(true) {
		w.stopping.Store(true)
		w.wake()
	}
	if w.started.Load() {
		<-w.done
	}
}
