package demo

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/seqbus/seqbus/internal/cluster"
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
	if b, err := os.ReadFile("/proc/pressure/io"); err == nil {
		// A disk that stalls every fsync stalls the witness's grants and
		// the nodes' durability alike: say so beside the processes.
		fmt.Fprintf(d.out, "  io pressure: %s\n", bytes.ReplaceAll(bytes.TrimSpace(b), []byte("\n"), []byte("; ")))
	}
	names := []string{"witness"}
	for _, id := range d.IDs() {
		names = append(names, cluster.NodeName(id))
	}
	for _, name := range names {
		state := "running"
		if p := d.Get(name); p == nil {
			state = "never started"
		} else if p.Exited() {
			state = "exited: " + p.Cmd.ProcessState.String()
		} else if t := p.Threads(); t != "" {
			state += ", " + t
		}
		fmt.Fprintf(d.out, "  %s: %s; the end of its log:\n", name, state)
		for _, l := range logTail(d.Dir+"/"+name+".log", 8) {
			fmt.Fprintf(d.out, "    %s\n", l)
		}
	}
	return true
}

// logTail is the last n lines of a file (none if it cannot be read).
func logTail(path string, n int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	out := make([]string, 0, n)
	for _, l := range lines[max(0, len(lines)-n):] {
		out = append(out, string(l))
	}
	return out
}
