package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// Reading the dedup table from outside the engine: a verifier checks that
// acknowledged orders older than a journal's first record are in the
// state a snapshot holds (cmd/seqbus demo, internal/verdict).

// DedupState is what the dedup table says about one (session, client
// order id).
type DedupState uint8

// Dedup states.
const (
	// DedupNotApplied: the table shows the id was never applied (its
	// session is unknown, the id is above the session's highest, or it is
	// inside the window and not recorded).
	DedupNotApplied DedupState = iota
	// DedupApplied: the id's result is recorded in the table.
	DedupApplied
	// DedupBelowWindow: the id is DedupWindow or more below the session's
	// highest applied id; the table no longer records it, so only the
	// high-water mark covers it (applied, or refused as too old).
	DedupBelowWindow
)

func (s DedupState) String() string {
	switch s {
	case DedupApplied:
		return "applied"
	case DedupBelowWindow:
		return "below the dedup window"
	default:
		return "not applied"
	}
}

// DedupLookup reports what the dedup table knows of (session, clOrdID)
// and the session's highest applied client order id (0: unknown session).
// It changes nothing and emits nothing.
func (e *Engine) DedupLookup(sessionID, clOrdID uint64) (state DedupState, highest uint64) {
	slot, ok := e.sessionIndex.get(sessionID)
	if !ok || clOrdID == 0 {
		return DedupNotApplied, 0
	}
	s := &e.sessions[slot]
	switch {
	case clOrdID > s.hi:
		return DedupNotApplied, s.hi
	case s.hi-clOrdID >= uint64(e.cfg.DedupWindow):
		return DedupBelowWindow, s.hi
	case e.entry(slot, clOrdID).clOrdID == clOrdID:
		return DedupApplied, s.hi
	default:
		return DedupNotApplied, s.hi
	}
}

// LoadSnapshot builds an engine with the configuration a snapshot records
// and restores the snapshot into it (Restore verifies every invariant and
// the recorded state hash).
func LoadSnapshot(r io.Reader) (*Engine, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	const cfgEnd = 8 + 4*4 + 8 // magic, four u32, one u64
	if len(data) < cfgEnd || [8]byte(data[:8]) != snapshotMagic {
		return nil, ErrSnapshotCorrupt
	}
	le := binary.LittleEndian
	cfg := Config{
		MaxInstruments: le.Uint32(data[8:]), MaxOrders: le.Uint32(data[12:]), MaxSessions: le.Uint32(data[16:]),
		DedupWindow: le.Uint32(data[20:]), MaxOrderQty: le.Uint64(data[24:]),
	}
	e, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshotCorrupt, err)
	}
	if err := e.Restore(bytes.NewReader(data)); err != nil {
		return nil, err
	}
	return e, nil
}
