package bus

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
)

// Handler receives each non-empty batch: datagram i is bufs[i][:sizes[i]]
// from from[i], for i < len(sizes). The slices are reused after it returns,
// so it must copy what it keeps.
type Handler func(bufs [][]byte, sizes []int, from []netip.AddrPort)

// LoopConfig configures a receive loop.
type LoopConfig struct {
	Idle Idle
	// BatchSize is the most datagrams per Receive (0 means
	// BatchSizeDefault; capped at BatchSizeMax).
	BatchSize int
	// DatagramBytes is each buffer's size (0 means DatagramBytesDefault).
	DatagramBytes int
	// PinCPU pins the loop's OS thread to CPU (sched_setaffinity, Linux).
	// The thread is discarded when the loop ends, so the pin never leaks to
	// other goroutines.
	PinCPU bool
	CPU    int
}

// Loop runs a receive loop on its own goroutine. A pinned loop is locked
// to its OS thread (the pin is the thread's). An unpinned one gives its P
// away (runtime.Gosched) after each handler call: a goroutine the handler
// readied (an application's callback sending on a channel) goes onto
// this P's own run queue, and a loop that spins, yields or polls on would
// leave it there until another P steals it, which the runtime does only
// after a usleep(3) that the kernel's timer slack stretches to ~55 µs
// (BenchmarkLoopHandoff: p50 30–130 µs from send to the waiter running,
// by idle strategy, before the Gosched). A pinned loop keeps its thread
// and P: its handler should hand off without waking a goroutine, or
// accept that cost.
type Loop struct {
	stop atomic.Bool
	done chan struct{}
	err  error // written before done is closed
}

// StartLoop starts receiving from r and calling h for every batch, until
// Stop, or until Receive fails (then Err/Stop return that error; a closed
// connection ends the loop with ErrClosed).
func StartLoop(r Receiver, cfg LoopConfig, h Handler) (*Loop, error) {
	batch := cfg.BatchSize
	if batch <= 0 {
		batch = BatchSizeDefault
	}
	batch = min(batch, BatchSizeMax)
	size := cfg.DatagramBytes
	if size <= 0 {
		size = DatagramBytesDefault
	}
	if cfg.PinCPU && (cfg.CPU < 0 || cfg.CPU >= runtime.NumCPU()) {
		return nil, fmt.Errorf("%w: CPU %d not in 0..%d", ErrConfig, cfg.CPU, runtime.NumCPU()-1)
	}
	arena := make([]byte, batch*size)
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = arena[i*size : (i+1)*size : (i+1)*size]
	}
	sizes := make([]int, batch)
	from := make([]netip.AddrPort, batch)
	l := &Loop{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(l.done)
		if cfg.PinCPU {
			// Never unlocked: the goroutine's exit then destroys the
			// thread along with its CPU affinity.
			runtime.LockOSThread()
			if err := pinCPU(cfg.CPU); err != nil {
				started <- err
				return
			}
		}
		started <- nil
		l.err = l.run(r, cfg.Idle, !cfg.PinCPU, bufs, sizes, from, h)
	}()
	if err := <-started; err != nil {
		<-l.done
		return nil, err
	}
	return l, nil
}

func (l *Loop) run(r Receiver, idle Idle, handOver bool, bufs [][]byte, sizes []int, from []netip.AddrPort, h Handler) error {
	for !l.stop.Load() {
		n, err := idle.Receive(r, bufs, sizes, from)
		if err != nil {
			return err
		}
		if n > 0 {
			h(bufs[:n], sizes[:n], from[:n])
			if handOver {
				runtime.Gosched() // what h woke runs now, on this P (Loop)
			}
		}
	}
	return nil
}

// Stop asks the loop to end, waits for it (at most one park) and returns
// the error that ended it: nil when stopped, ErrClosed when its connection
// was closed, or the receive error.
func (l *Loop) Stop() error {
	l.stop.Store(true)
	<-l.done
	return l.err
}

// Done is closed when the loop has ended.
func (l *Loop) Done() <-chan struct{} { return l.done }

// Err is the error that ended the loop; valid after Done is closed.
func (l *Loop) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}
