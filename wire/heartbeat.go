package wire

import "fmt"

// Heartbeat is sent by the primary when idle: its epoch and the highest seq
// it has sent, so a standby sees a gap at the tail when traffic stops.
type Heartbeat struct {
	Origin
	HighestSeq uint64
}

// Len is the encoded size.
func (h *Heartbeat) Len() int { return HeaderLen }

// Append appends the encoded frame to dst.
func (h *Heartbeat) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeHeartbeat, h.Origin, 0, h.HighestSeq)
	return finish(b, start)
}

// DecodeHeartbeat reads a parsed HEARTBEAT frame.
func DecodeHeartbeat(f *Frame) (Heartbeat, error) {
	if f.Type != TypeHeartbeat {
		return Heartbeat{}, fmt.Errorf("%w: %s is not HEARTBEAT", ErrType, f.Type)
	}
	return Heartbeat{Origin: f.Origin(), HighestSeq: f.Seq}, nil
}

// Ack is sent by a standby: the highest contiguous seq it has applied (and
// journaled), never the highest received.
type Ack struct {
	Origin
	Seq uint64
}

// Len is the encoded size.
func (a *Ack) Len() int { return HeaderLen }

// Append appends the encoded frame to dst.
func (a *Ack) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeAck, a.Origin, 0, a.Seq)
	return finish(b, start)
}

// DecodeAck reads a parsed ACK frame.
func DecodeAck(f *Frame) (Ack, error) {
	if f.Type != TypeAck {
		return Ack{}, fmt.Errorf("%w: %s is not ACK", ErrType, f.Type)
	}
	return Ack{Origin: f.Origin(), Seq: f.Seq}, nil
}
