package pace

import "golang.org/x/sys/unix"

// SetThreadNice sets the nice value of the calling OS thread only (Linux
// applies setpriority(PRIO_PROCESS, tid) to one thread) and returns the
// value it had, so the caller can restore it before unlocking the thread.
// The caller must hold the thread (runtime.LockOSThread). Lowering it
// below the current value needs CAP_SYS_NICE (root); without it the error
// says so and nothing changes.
//
// Why a generator wants it: on a machine where the system under test runs
// on the same cores, a woken node process preempts the spinning generator
// at its send time, and the generator's lateness is charged to the bus
// (measured on 2 cores: intended->sent p99 44 µs at nice 0, 17 µs at -10).
func SetThreadNice(nice int) (previous int, err error) {
	tid := unix.Gettid()
	// getpriority returns 20 - nice on Linux (never negative).
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return 0, err
	}
	previous = 20 - p
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
		return previous, err
	}
	return previous, nil
}
