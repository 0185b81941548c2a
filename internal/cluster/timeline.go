package cluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/internal/verdict"
)

// timelineKeys are the node log's failover steps.
var timelineKeys = []string{"PROMOTED", "first release after promotion", "STEPPING DOWN", "following a new epoch", "lease not held"}

// Timeline returns the failover steps a node logged (lines of its log
// naming a promotion, a step-down, a new epoch or a lapsed lease), in
// order; nil when the log cannot be read.
func Timeline(logPath string) []string {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, key := range timelineKeys {
			if strings.Contains(line, key) {
				out = append(out, line)
			}
		}
	}
	return out
}

// WriteTimeline writes Timeline's lines, indented four spaces.
func WriteTimeline(w io.Writer, logPath string) {
	for _, line := range Timeline(logPath) {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

// WriteVerdict writes the verifier's lines as `seqbus verify` would, for
// a record checked against every node of l.
func WriteVerdict(w io.Writer, record string, l *Local, res *verdict.Result) {
	dirs := make([]string, 0, len(l.Nodes))
	for _, id := range l.IDs() {
		dirs = append(dirs, l.NodeDir(id))
	}
	fmt.Fprintf(w, "  seqbus verify --record %s %s:\n", record, strings.Join(dirs, " "))
	for _, line := range res.Lines() {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

// Broken is the first promise a run's history breaks, as the demo and
// the chaos runs judge it (nil: none): outputs a client received that are
// lost, then duplicates, conflicts, hash mismatches, stale outputs or
// session faults, then market data with reused seqs or gaps.
func Broken(res *verdict.Result, md client.MDTracker) error {
	switch {
	case res.Lost > 0:
		return fmt.Errorf("%d outputs the client received are lost", res.Lost)
	case !res.OK():
		return fmt.Errorf("the history breaks the promise (duplicates %d, conflicts %d, hash mismatches %d, stale %d (delivered %d), session faults %d)",
			res.Duplicates, res.Conflicts, res.HashMismatches, res.Stale, res.StaleDelivered, res.SessionFaults)
	case md.Conflicts > 0 || md.Gaps > 0:
		return fmt.Errorf("market data: %d seqs reused with other content, %d gaps", md.Conflicts, md.Gaps)
	}
	return nil
}
