package wire

import (
	"encoding/binary"
	"fmt"
)

const hashLen = 8

// Hash carries the primary's state hash after applying seq, so standbys
// can compare theirs at the same seq and raise an alarm on divergence.
type Hash struct {
	Origin
	Seq  uint64
	Hash uint64
}

// Len is the encoded size.
func (h *Hash) Len() int { return HeaderLen + hashLen }

// Append appends the encoded frame to dst.
func (h *Hash) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeHash, h.Origin, 0, h.Seq)
	b = binary.LittleEndian.AppendUint64(b, h.Hash)
	return finish(b, start)
}

// DecodeHash reads a parsed HASH frame.
func DecodeHash(f *Frame) (Hash, error) {
	if f.Type != TypeHash {
		return Hash{}, fmt.Errorf("%w: %s is not HASH", ErrType, f.Type)
	}
	return Hash{Origin: f.Origin(), Seq: f.Seq, Hash: binary.LittleEndian.Uint64(f.Payload)}, nil
}

const newEpochLen = 16

// NewEpoch is a new primary's announcement: from Epoch on it sequences, and
// LastSeq is the last seq of the previous epoch it holds, so a receiver can
// tell a failover from a gap.
type NewEpoch struct {
	Origin
	PrevEpoch uint64
	LastSeq   uint64
	// History is the new primary's history id (0: none): a node whose
	// directory holds another history's does not follow it, and one
	// with none takes it (replica.Identity).
	History uint64
}

// Len is the encoded size.
func (n *NewEpoch) Len() int { return HeaderLen + newEpochLen }

// Append appends the encoded frame to dst.
func (n *NewEpoch) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeNewEpoch, n.Origin, 0, n.LastSeq)
	b = binary.LittleEndian.AppendUint64(b, n.PrevEpoch)
	b = binary.LittleEndian.AppendUint64(b, n.History)
	return finish(b, start)
}

// DecodeNewEpoch reads a parsed NEW_EPOCH frame. Parse has checked that
// PrevEpoch < Epoch.
func DecodeNewEpoch(f *Frame) (NewEpoch, error) {
	if f.Type != TypeNewEpoch {
		return NewEpoch{}, fmt.Errorf("%w: %s is not NEW_EPOCH", ErrType, f.Type)
	}
	return NewEpoch{Origin: f.Origin(), PrevEpoch: binary.LittleEndian.Uint64(f.Payload), LastSeq: f.Seq,
		History: binary.LittleEndian.Uint64(f.Payload[8:])}, nil
}
