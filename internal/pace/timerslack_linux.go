package pace

import "golang.org/x/sys/unix"

// ThreadTimerSlackNs is the timer slack a generator thread that parks
// (WaiterConfig.ParkNs) sets for itself: 1 ns, i.e. the kernel fires its
// park's timer when due instead of up to 50 µs later (the default slack
// of a thread), which would make a send late by that much.
const ThreadTimerSlackNs = 1

// SetThreadTimerSlack sets the timer slack of the calling OS thread
// (prctl PR_SET_TIMERSLACK applies to the calling thread only) and returns
// the one it had, so the caller can restore it before unlocking the
// thread. The caller must hold the thread (runtime.LockOSThread). ns must
// be > 0 (0 would mean "the process default").
func SetThreadTimerSlack(ns int) (previous int, err error) {
	prev, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, err
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(ns), 0, 0, 0); err != nil {
		return prev, err
	}
	return prev, nil
}
