package wire

import (
	"encoding/binary"
	"fmt"
)

// Heartbeat is sent by the primary when idle (and, while releases move,
// at least every heartbeat interval): its epoch and the highest seq it has
// sent, so a standby sees a gap at the tail when traffic stops; and its
// released watermark with the market-data seq of the last update it
// released, so a standby promoted after the primary died knows which
// market data it must publish again (issue 20, item 3).
type Heartbeat struct {
	Origin
	HighestSeq uint64
	// Released is the primary's released watermark; MDSeq the MD seq of
	// the last market-data update it released (0: none yet).
	Released, MDSeq uint64
	// LeaseReleased (FlagLeaseReleased) says the primary gave its lease
	// up (it stopped, or its journal failed): a standby asks the arbiter
	// for the lease at once instead of at its next retry.
	LeaseReleased bool
	// History is the primary's history id (0: none yet): a standby whose
	// directory holds another history's stops acknowledging and will not
	// lead (replica.Identity).
	History uint64
}

// FlagLeaseReleased marks a HEARTBEAT whose primary gave its lease up
// (Heartbeat.LeaseReleased); no other frame type may carry it.
const FlagLeaseReleased uint16 = 0x0004

const heartbeatLen = 24

// Len is the encoded size.
func (h *Heartbeat) Len() int { return HeaderLen + heartbeatLen }

// Append appends the encoded frame to dst.
func (h *Heartbeat) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeHeartbeat, h.Origin, 0, h.HighestSeq)
	if h.LeaseReleased {
		binary.LittleEndian.PutUint16(b[start+offFlags:], FlagLeaseReleased)
	}
	b = appendUint64(b, h.Released)
	b = appendUint64(b, h.MDSeq)
	b = appendUint64(b, h.History)
	return finish(b, start)
}

// DecodeHeartbeat reads a parsed HEARTBEAT frame.
func DecodeHeartbeat(f *Frame) (Heartbeat, error) {
	if f.Type != TypeHeartbeat {
		return Heartbeat{}, fmt.Errorf("%w: %s is not HEARTBEAT", ErrType, f.Type)
	}
	return Heartbeat{Origin: f.Origin(), HighestSeq: f.Seq, Released: uint64le(f.Payload), MDSeq: uint64le(f.Payload[8:]),
		History: uint64le(f.Payload[16:]), LeaseReleased: f.Flags&FlagLeaseReleased != 0}, nil
}

// NotLeading is a primary's word to its clients that it leads no more:
// it gave its lease up (a planned stop, a failed journal, a stalled
// disk), lost it, or stepped down for a newer epoch. Epoch is the epoch
// it led. A client that gets it from the node it sends to asks the
// arbiter who leads at once, and often until a newer holder is named,
// instead of waiting for its commands to go unanswered. It carries
// nothing else: at worst a forged one makes a client ask early.
type NotLeading struct {
	Origin
}

// Len is the encoded size.
func (n *NotLeading) Len() int { return HeaderLen }

// Append appends the encoded frame to dst.
func (n *NotLeading) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeNotLeading, n.Origin, 0, 0)
	return finish(b, start)
}

// DecodeNotLeading reads a parsed NOT_LEADING frame.
func DecodeNotLeading(f *Frame) (NotLeading, error) {
	if f.Type != TypeNotLeading {
		return NotLeading{}, fmt.Errorf("%w: %s is not NOT_LEADING", ErrType, f.Type)
	}
	return NotLeading{Origin: f.Origin()}, nil
}

// Ack is sent by a standby: the highest contiguous seq it has applied (and
// journaled), never the highest received.
type Ack struct {
	Origin
	Seq uint64
	// Leaving (FlagLeaving) says the standby is stopping (a planned
	// stop): its last ack. The primary proposes its removal from the
	// in-sync set at once instead of after the in-sync timeout.
	Leaving bool
	// History is the standby's history id (0: none yet): a primary
	// refuses the acks of another history's (replica.Identity).
	History uint64
	// AskHistory (FlagAskHistory) says the standby has not yet heard
	// this run which history its primary leads: the primary answers with
	// a HEARTBEAT to it (which carries its id) at once.
	AskHistory bool
}

// FlagAskHistory marks an ACK whose standby asks for its primary's
// history id (Ack.AskHistory); no other frame type may carry it.
const FlagAskHistory uint16 = 0x0020

const ackLen = 8

// FlagLeaving marks a standby's last ACK before a planned stop
// (Ack.Leaving); no other frame type may carry it. A node built before
// it drops such an ACK as a bad header (counted), and the timeout
// removes the standby as before.
const FlagLeaving uint16 = 0x0008

// Len is the encoded size.
func (a *Ack) Len() int { return HeaderLen + ackLen }

// Append appends the encoded frame to dst.
func (a *Ack) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeAck, a.Origin, 0, a.Seq)
	var flags uint16
	if a.Leaving {
		flags |= FlagLeaving
	}
	if a.AskHistory {
		flags |= FlagAskHistory
	}
	if flags != 0 {
		binary.LittleEndian.PutUint16(b[start+offFlags:], flags)
	}
	b = appendUint64(b, a.History)
	return finish(b, start)
}

// DecodeAck reads a parsed ACK frame.
func DecodeAck(f *Frame) (Ack, error) {
	if f.Type != TypeAck {
		return Ack{}, fmt.Errorf("%w: %s is not ACK", ErrType, f.Type)
	}
	return Ack{Origin: f.Origin(), Seq: f.Seq, Leaving: f.Flags&FlagLeaving != 0, History: HistoryOf(f),
		AskHistory: f.Flags&FlagAskHistory != 0}, nil
}

// HistoryOf is the history id a parsed ACK, HEARTBEAT or NEW_EPOCH
// carries, without decoding the rest; 0 for any other frame.
func HistoryOf(f *Frame) uint64 {
	switch {
	case f.Type == TypeAck && len(f.Payload) == ackLen:
		return uint64le(f.Payload)
	case f.Type == TypeHeartbeat && len(f.Payload) == heartbeatLen:
		return uint64le(f.Payload[16:])
	case f.Type == TypeNewEpoch && len(f.Payload) == newEpochLen:
		return uint64le(f.Payload[8:])
	}
	return 0
}
