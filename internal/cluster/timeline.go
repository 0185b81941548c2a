package cluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

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
// a record checked against nodes 1 and 2 of l.
func WriteVerdict(w io.Writer, record string, l *Local, res *verdict.Result) {
	fmt.Fprintf(w, "  seqbus verify --record %s %s %s:\n", record, l.NodeDir(1), l.NodeDir(2))
	for _, line := range res.Lines() {
		fmt.Fprintf(w, "    %s\n", line)
	}
}
