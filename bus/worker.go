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
// Kick is for any goroutine; NewWorker, Start and Stop are the owner's.
type Worker struct {
	job     func()
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool
	stopped atomic.Bool
}

// NewWorker returns a worker for job, not started: kicks wait for Start
// (or TakeKick, for a worker driven by hand).
func NewWorker(job func()) *Worker {
	return &Worker{job: job, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		}
		select {
		case <-w.stop: // both were ready: stopping wins
			return
		default:
		}
		w.job()
	}
}

// Kick makes the worker run its job once more, soon: at once when it is
// waiting, after the current run when it is running. It never blocks and
// never allocates.
func (w *Worker) Kick() {
	select {
	case w.kick <- struct{}{}:
	default: // a kick is waiting already: the run it causes covers this one
	}
}

// TakeKick reports whether a kick is waiting, and takes it: for a worker
// driven by hand (never started) and its tests.
func (w *Worker) TakeKick() bool {
	select {
	case <-w.kick:
		return true
	default:
		return false
	}
}

// Stop ends the worker after the run in progress, if any (a kick still
// waiting is dropped), and waits for it. Safe to call twice, or without
// Start.
func (w *Worker) Stop() {
	if !w.stopped.Swap(true) {
		close(w.stop)
	}
	if w.started.Load() {
		<-w.done
	}
}
