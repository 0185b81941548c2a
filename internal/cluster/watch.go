package cluster

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/seqbus/seqbus/client"
)

// Addrs are the nodes' unicast addresses, by id: where a market-data
// consumer asks for what its feed lost.
func (l *Local) Addrs() []netip.AddrPort {
	ids := l.IDs()
	out := make([]netip.AddrPort, 0, len(ids))
	for _, id := range ids {
		out = append(out, l.Nodes[id])
	}
	return out
}

// MDCatchUp waits, at most max, until the consumer has delivered the last
// market-data update the final primary released (its recovery fills the
// tail by re-request), so a summary counts every update.
func MDCatchUp(md *client.MarketData, released func() uint64, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if r := released(); r > 0 && md.Next() > r {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WriteProcesses writes what each child of l is doing (running, with its
// threads' states, or how it exited) and the last n lines of its log:
// what a stalled run shows before it stops. The disk's I/O pressure comes
// first, since a disk that stalls every fsync stalls the witness's grants
// and the nodes' durability alike.
func (l *Local) WriteProcesses(w io.Writer, n int) {
	if b, err := os.ReadFile("/proc/pressure/io"); err == nil {
		fmt.Fprintf(w, "  io pressure: %s\n", bytes.ReplaceAll(bytes.TrimSpace(b), []byte("\n"), []byte("; ")))
	}
	names := []string{"witness"}
	for _, id := range l.IDs() {
		names = append(names, NodeName(id))
	}
	for _, name := range names {
		state := "running"
		if p := l.Get(name); p == nil {
			state = "never started"
		} else if p.Exited() {
			state = "exited: " + p.Cmd.ProcessState.String()
		} else if t := p.Threads(); t != "" {
			state += ", " + t
		}
		fmt.Fprintf(w, "  %s: %s; the end of its log:\n", name, state)
		for _, line := range LogTail(filepath.Join(l.Dir, name+".log"), n) {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// LogTail is the last n lines of a file (none if it cannot be read).
func LogTail(path string, n int) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	out := make([]string, 0, n)
	for _, line := range lines[max(0, len(lines)-n):] {
		out = append(out, string(line))
	}
	return out
}
