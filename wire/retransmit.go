package wire

import "fmt"

// Retype rewrites the type of an encoded DATA or RETRANSMIT frame in place
// and recomputes its checksum, so the primary can resend a frame from its
// ring as a RETRANSMIT without re-packing its messages. f must be a whole
// frame as built by Batch or AppendData.
func Retype(f []byte, t Type) error {
	if t != TypeData && t != TypeRetransmit {
		return fmt.Errorf("%w: cannot retype a data frame to %s", ErrType, t)
	}
	h, err := ParseHeader(f)
	if err != nil {
		return err
	}
	if h.Type != TypeData && h.Type != TypeRetransmit {
		return fmt.Errorf("%w: %s is not a data frame", ErrType, h.Type)
	}
	f[offType] = byte(t)
	finish(f[:HeaderLen+int(h.Length)], 0)
	return nil
}

// NeedSnapshot is the primary's answer to a NAK for a range it no longer
// holds (neither in its ring nor in its journal): the standby must install a
// snapshot. FirstAvailable is the lowest seq the primary can still resend
// and SnapshotSeq the seq of its latest snapshot (0 if none yet).
type NeedSnapshot struct {
	Origin
	FirstAvailable uint64
	SnapshotSeq    uint64
}

// Len is the encoded size.
func (n *NeedSnapshot) Len() int { return HeaderLen + needSnapshotLen }

const needSnapshotLen = 8

// Append appends the encoded frame to dst.
func (n *NeedSnapshot) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeNeedSnapshot, n.Origin, 0, n.FirstAvailable)
	b = appendUint64(b, n.SnapshotSeq)
	return finish(b, start)
}

// DecodeNeedSnapshot reads a parsed NEED_SNAPSHOT frame.
func DecodeNeedSnapshot(f *Frame) (NeedSnapshot, error) {
	if f.Type != TypeNeedSnapshot {
		return NeedSnapshot{}, fmt.Errorf("%w: %s is not NEED_SNAPSHOT", ErrType, f.Type)
	}
	return NeedSnapshot{Origin: f.Origin(), FirstAvailable: f.Seq, SnapshotSeq: uint64le(f.Payload)}, nil
}
