package status

import (
	"encoding/json"
	"os"
)

// ReadDurable returns the durable seq the status file at path reports
// for node id: what the directory's last run had made durable, a lower
// bound on what its journal must still hold (storage.CheckDurableClaim).
// ok is false when there is no such file, it does not parse, or it is
// another node's: a status file is advisory and never stops a start-up
// by its absence.
func ReadDurable(path string, id uint32) (durable uint64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var st struct {
		ID      *uint32 `json:"id"`
		Durable *uint64 `json:"durable"`
	}
	if json.Unmarshal(b, &st) != nil || st.ID == nil || st.Durable == nil || *st.ID != id {
		return 0, false
	}
	return *st.Durable, true
}
