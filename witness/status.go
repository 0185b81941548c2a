package witness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// StatusFileName is the status file a witness started with New rewrites
// in its state directory every statusEvery, like a node's status.json,
// for `seqbus stat --dir`.
const StatusFileName = "status.json"

// statusEvery is how often the status file is rewritten: often enough
// for an operator watching it, a few small writes a second.
const statusEvery = 100 * time.Millisecond

// macLogEvery bounds the log of requests that fail authentication to one
// record per 10 s (with the counts since the last one), so a flood of
// forged datagrams cannot fill a disk while a node with the wrong key
// file is still told about within seconds.
const macLogEvery = int64(10 * time.Second)

// StatusReport is what the status file holds: the lease as the witness
// sees it and every counter, with reasons by name.
type StatusReport struct {
	// Role is always "witness", which tells `seqbus stat` how to print it.
	Role     string `json:"role"`
	ID       uint32 `json:"id"`
	UptimeNs int64  `json:"uptime_ns"`
	// Holder is the live holder (0: none) and Epoch the highest epoch
	// issued; LeaseRemainingNs the live lease's time left.
	Holder           uint32 `json:"holder"`
	Epoch            uint64 `json:"epoch"`
	LeaseRemainingNs int64  `json:"lease_remaining_ns"`
	// QuarantineRemainingNs is the restart quarantine left (0: none).
	QuarantineRemainingNs int64 `json:"quarantine_remaining_ns"`
	// LastHolder is the holder of Epoch, who may renew it through a
	// witness restart.
	LastHolder    uint32   `json:"last_holder"`
	InSyncVersion uint64   `json:"in_sync_version"`
	InSync        []uint32 `json:"in_sync"`
	DurableEpoch  uint64   `json:"durable_epoch"`
	// History is the cluster's pinned history id, 16 hex digits (absent
	// until the first primary's directory has one): a node asking with
	// another is refused (denies "foreign history").
	History string `json:"history,omitempty"`
	// PromotionBlocked is the last node refused as not in sync, with the
	// set empty, since the last grant (0: none): only the last holder may
	// lead (docs/witness.md, "When no node may be promoted").
	PromotionBlocked uint32 `json:"promotion_blocked,omitempty"`
	// Requests and Grants by kind (acquire, renew, query; grants also
	// new_epoch and resent), Denies and Drops by reason.
	Requests map[string]uint64 `json:"requests"`
	Grants   map[string]uint64 `json:"grants"`
	Denies   map[string]uint64 `json:"denies"`
	Drops    map[string]uint64 `json:"drops"`
	// Persists and PersistFailures count state writes.
	Persists        uint64 `json:"persists"`
	PersistFailures uint64 `json:"persist_failures"`
	ReceiveErrors   uint64 `json:"receive_errors"`
	SendErrors      uint64 `json:"send_errors"`
}

// Report returns the status as the status file holds it.
func (s *Server) Report() StatusReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowNs()
	r := s.core.Report(now)
	// Uptime counts from New, as before the core existed (the core counts
	// from its construction, a file read later).
	r.UptimeNs = now
	r.ReceiveErrors, r.SendErrors = s.receiveErrors, s.sendErrors
	r.Drops[DropTooLong.String()] = s.truncations()
	return r
}

// writeStatus rewrites the status file atomically (temp file, rename). A
// failure is not fatal: the lease does not depend on it. The first
// failure of an episode (a full disk) is logged, and the first write that
// succeeds after it: meanwhile `seqbus stat` shows the last file written,
// marked STALE. Only statusLoop calls it.
func (s *Server) writeStatus() {
	err := s.writeStatusFile()
	if failing := err != nil; failing != s.statusFailing {
		s.statusFailing = failing
		if failing {
			s.core.log.Warn("witness: status file not written; seqbus stat shows the last one written, marked stale", "path", s.statusPath, "err", err)
		} else {
			s.core.log.Info("witness: status file written again", "path", s.statusPath)
		}
	}
}

func (s *Server) writeStatusFile() error {
	b, err := json.MarshalIndent(s.Report(), "", "  ")
	if err != nil {
		return err
	}
	tmp := s.statusPath + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Clean(s.statusPath))
}

// statusLoop rewrites the status file until stop is closed, then once
// more, so the file left behind holds the final counters.
func (s *Server) statusLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	s.writeStatus()
	for {
		select {
		case <-stop:
			s.writeStatus()
			return
		case <-t.C:
			s.writeStatus()
		}
	}
}
