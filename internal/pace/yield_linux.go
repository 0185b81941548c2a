package pace

import "golang.org/x/sys/unix"

// schedYield gives the CPU to any other runnable thread. runtime.Gosched
// would not do: on a locked thread it hands the P to another M (two thread
// switches) and never yields to other processes.
func schedYield() {
	unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
