package wire

import (
	"encoding/binary"
	"fmt"
)

// MaxNakRanges is how many gaps one NAK can ask for. 16 ranges of 16 bytes
// keep a NAK far below any MTU, and a standby with more than 16 separate
// gaps is better served by asking again (or by a snapshot).
const MaxNakRanges = 16

const rangeLen = 16

// Range is an inclusive range of seqs, From <= To, From >= 1.
type Range struct {
	From, To uint64
}

// Len is the number of seqs in r.
func (r Range) Len() uint64 { return r.To - r.From + 1 }

// Nak asks the primary to resend one or more ranges. Seq in the header
// carries the requester's highest contiguous seq, so a NAK also acts as an
// ACK for flow purposes.
type Nak struct {
	Origin
	Ack    uint64
	N      int // ranges used in Ranges
	Ranges [MaxNakRanges]Range
}

// Add appends a range; it returns false when the NAK is full or r is
// invalid.
func (n *Nak) Add(r Range) bool {
	if n.N >= MaxNakRanges || r.From == 0 || r.From > r.To {
		return false
	}
	n.Ranges[n.N] = r
	n.N++
	return true
}

// Len is the encoded size.
func (n *Nak) Len() int { return HeaderLen + n.N*rangeLen }

// Append appends the encoded frame to dst. It panics if N is out of range,
// a programmer error.
func (n *Nak) Append(dst []byte) []byte {
	if n.N < 1 || n.N > MaxNakRanges {
		panic(fmt.Sprintf("wire: NAK with %d ranges", n.N))
	}
	b, start := appendHeader(dst, TypeNak, n.Origin, uint16(n.N), n.Ack)
	for _, r := range n.Ranges[:n.N] {
		b = binary.LittleEndian.AppendUint64(b, r.From)
		b = binary.LittleEndian.AppendUint64(b, r.To)
	}
	return finish(b, start)
}

func validateNak(f *Frame) error {
	if f.Count == 0 || f.Count > MaxNakRanges {
		return fmt.Errorf("%w: NAK with %d ranges (1..%d)", ErrCount, f.Count, MaxNakRanges)
	}
	if len(f.Payload) != int(f.Count)*rangeLen {
		return fmt.Errorf("%w: NAK payload %d bytes for %d ranges", ErrLength, len(f.Payload), f.Count)
	}
	for i := 0; i < int(f.Count); i++ {
		from := binary.LittleEndian.Uint64(f.Payload[i*rangeLen:])
		to := binary.LittleEndian.Uint64(f.Payload[i*rangeLen+8:])
		if from == 0 || from > to {
			return fmt.Errorf("%w: NAK range %d..%d", ErrSeq, from, to)
		}
	}
	return nil
}

// DecodeNak reads a parsed NAK frame.
func DecodeNak(f *Frame) (Nak, error) {
	if f.Type != TypeNak {
		return Nak{}, fmt.Errorf("%w: %s is not NAK", ErrType, f.Type)
	}
	n := Nak{Origin: f.Origin(), Ack: f.Seq, N: int(f.Count)}
	for i := 0; i < n.N; i++ {
		n.Ranges[i].From = binary.LittleEndian.Uint64(f.Payload[i*rangeLen:])
		n.Ranges[i].To = binary.LittleEndian.Uint64(f.Payload[i*rangeLen+8:])
	}
	return n, nil
}
