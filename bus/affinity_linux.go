package bus

import "golang.org/x/sys/unix"

// pinCPU pins the calling OS thread (the caller has locked it) to cpu.
func pinCPU(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}

// osYield gives the CPU to any other runnable thread (sched_yield), as
// Aeron's yielding strategy does with Thread.yield. runtime.Gosched would
// not: on a goroutine locked to its thread it hands the P to another M and
// costs two thread switches, and it never yields to other processes.
func osYield() {
	unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
