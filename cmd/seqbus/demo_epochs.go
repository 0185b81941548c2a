package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// epochSummary reads each node's last status.json under dir (nodeN/) and
// says how many epochs the run went through and how often a node stepped
// down or moved to a newer term of its own (issue 15 item 3: a node never
// steps down from an epoch it was granted itself). A node without a
// status file is left out.
func epochSummary(dir string, ids []uint32) (line string, stepDowns uint64) {
	var highest, promotions, newTerms uint64
	var per []string
	for _, id := range slices.Sorted(slices.Values(ids)) {
		b, err := os.ReadFile(filepath.Join(dir, "node"+strconv.Itoa(int(id)), "status.json"))
		if err != nil {
			continue
		}
		var s struct {
			Epoch uint64            `json:"epoch"`
			Node  map[string]uint64 `json:"node"`
		}
		if json.Unmarshal(b, &s) != nil {
			continue
		}
		highest = max(highest, s.Epoch)
		promotions += s.Node["Promotions"]
		stepDowns += s.Node["StepDowns"]
		newTerms += s.Node["NewTerms"]
		per = append(per, fmt.Sprintf("node%d %d/%d", id, s.Node["Promotions"], s.Node["StepDowns"]))
	}
	return fmt.Sprintf("epochs: highest %d, %d promotions, %d new terms of a leader's own; step-downs %d (promotions/step-downs: %s)",
		highest, promotions, newTerms, stepDowns, strings.Join(per, ", ")), stepDowns
}
