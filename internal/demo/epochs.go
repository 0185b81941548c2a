package demo

import (
	"fmt"
	"strings"

	"github.com/seqbus/seqbus/internal/cluster"
)

// epochSummary says, from each node's last status.json under dir
// (nodeN/), how many epochs the run went through and how often a node
// stepped down or moved to a newer term of its own (issue 15 item 3: a
// node never steps down from an epoch it was granted itself). A node
// without a status file is left out.
func epochSummary(dir string, ids []uint32) (line string, stepDowns uint64) {
	var highest, promotions, newTerms uint64
	var per []string
	for _, n := range cluster.Epochs(dir, ids) {
		highest = max(highest, n.Epoch)
		promotions += n.Promotions
		stepDowns += n.StepDowns
		newTerms += n.NewTerms
		per = append(per, fmt.Sprintf("node%d %d/%d", n.ID, n.Promotions, n.StepDowns))
	}
	return fmt.Sprintf("epochs: highest %d, %d promotions, %d new terms of a leader's own; step-downs %d (promotions/step-downs: %s)",
		highest, promotions, newTerms, stepDowns, strings.Join(per, ", ")), stepDowns
}
