package cluster

import (
	"path/filepath"
	"slices"
)

// NodeEpochs is one node's promotions and step-downs, from its status.
type NodeEpochs struct {
	ID                              uint32
	Epoch                           uint64
	Promotions, StepDowns, NewTerms uint64
}

// Epochs reads each node's last status under dir (nodeN/, in id order)
// and returns its epoch counters; a node without a readable status is
// left out.
func Epochs(dir string, ids []uint32) []NodeEpochs {
	var out []NodeEpochs
	for _, id := range slices.Sorted(slices.Values(ids)) {
		s, err := ReadStatus(filepath.Join(dir, NodeName(id)))
		if err != nil {
			continue
		}
		out = append(out, NodeEpochs{ID: id, Epoch: s.Epoch,
			Promotions: s.Node["Promotions"], StepDowns: s.Node["StepDowns"], NewTerms: s.Node["NewTerms"]})
	}
	return out
}
