package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/seqbus/seqbus/mdfeed"
	"github.com/seqbus/seqbus/status"
)

// Status is the part of a node's status.json the harness reads.
type Status struct {
	ID       uint32 `json:"id"`
	Role     string `json:"role"`
	Epoch    uint64 `json:"epoch"`
	Applied  uint64 `json:"applied"`
	Durable  uint64 `json:"durable"`
	Released uint64 `json:"released"`
	Ack      uint64 `json:"ack"`
	Primary  uint32 `json:"primary"`
	Lease    struct {
		Held        bool   `json:"held"`
		Epoch       uint64 `json:"epoch"`
		RemainingNs int64  `json:"remaining_ns"`
	} `json:"lease"`
	StateHash status.Hash64 `json:"state_hash"`
	InSync    struct {
		Members []uint32 `json:"members"`
	} `json:"in_sync"`
	Journal struct {
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
	} `json:"journal"`
	Node      map[string]uint64 `json:"node"`
	Sequencer map[string]uint64 `json:"sequencer"`
	Window    map[string]uint64 `json:"window"`
	MD        mdfeed.Stats      `json:"md"`
	Multicast struct {
		DatagramsReceived uint64
		ReceiveOverflows  uint64
	} `json:"multicast"`
	Agent status.AgentStatus `json:"agent"`
	// WrittenAt is when the node wrote the file (RFC 3339, wall clock):
	// what it says is as of its last copy, at most one status interval
	// before.
	WrittenAt string `json:"written_at"`
}

// ReadStatus reads dir/status.json.
func ReadStatus(dir string) (Status, error) {
	var s Status
	b, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}
