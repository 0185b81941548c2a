package demo

import (
	"fmt"
	"time"
)

// demoStallMax bounds how long the demo waits with no new answer (a
// failover takes about a lease, 1 s): past it the demo stops, says which
// process is alive and what each logged last, and fails, rather than
// wait for an outer timeout with nothing to show.
const demoStallMax = 20 * time.Second

// stalled reports whether answers have not moved for demoStallMax, and
// then prints what each process is doing.
func (d *demo) stalled(answered uint64) bool {
	now := time.Now()
	if answered != d.lastAnswered || d.lastMoved.IsZero() {
		d.lastAnswered, d.lastMoved = answered, now
		return false
	}
	if now.Sub(d.lastMoved) < demoStallMax {
		return false
	}
	d.stall = fmt.Errorf("no answer for %v (%d answered): the cluster stalled; see the process states above", demoStallMax, answered)
	fmt.Fprintf(d.out, "\n>>> no answer for %v: stopping; the processes:\n", demoStallMax)
	d.WriteProcesses(d.out, 8)
	return true
}
