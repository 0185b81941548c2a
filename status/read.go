package status

import (
	"encoding/json"
	"os"
)

// Last is what a directory's last run reported in its status file that
// the next run of the node starts from.
type Last struct {
	// Durable is the seq the run had made durable: a lower bound on what
	// its journal must still hold (storage.CheckDurableClaim).
	Durable uint64
	// MDReleased is the market-data seq it knew released (published as
	// primary, or learnt from the primary's heartbeats): released updates
	// passed the gate, so they are in every history that survives, and a
	// restarted node promoted before it hears a heartbeat publishes again
	// only the updates above it (mdfeed.Feed.KnownReleased), not its whole
	// ring. 0 when the file has none.
	MDReleased uint64
}

// ReadLast returns what the status file at path reports for node id. ok
// is false when there is no such file, it does not parse, or it is
// another node's: a status file is advisory and never stops a start-up
// by its absence.
func ReadLast(path string, id uint32) (last Last, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Last{}, false
	}
	var st struct {
		ID      *uint32 `json:"id"`
		Durable *uint64 `json:"durable"`
		MD      struct {
			Released uint64
		} `json:"md"`
	}
	if json.Unmarshal(b, &st) != nil || st.ID == nil || st.Durable == nil || *st.ID != id {
		return Last{}, false
	}
	return Last{Durable: *st.Durable, MDReleased: st.MD.Released}, true
}
