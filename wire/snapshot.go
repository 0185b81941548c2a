package wire

import (
	"encoding/binary"
	"fmt"
)

const (
	snapshotRequestLen     = 8
	snapshotChunkHeaderLen = 20
)

// SnapshotRequest asks for the snapshot at SnapshotSeq from byte Offset
// on, so an interrupted transfer resumes where it stopped. At Offset 0 (a
// new transfer) SnapshotSeq is instead the seq the requester has applied
// (0: none): the server sends a snapshot taken after it, cutting a fresh
// one when its latest is not, so a standby never fetches state it already
// has. (A request from offset 0 names no snapshot to resume, so the field
// is free to carry this.)
type SnapshotRequest struct {
	Origin
	SnapshotSeq uint64
	Offset      uint64
}

// Len is the encoded size.
func (s *SnapshotRequest) Len() int { return HeaderLen + snapshotRequestLen }

// Append appends the encoded frame to dst.
func (s *SnapshotRequest) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeSnapshotRequest, s.Origin, 0, s.SnapshotSeq)
	b = binary.LittleEndian.AppendUint64(b, s.Offset)
	return finish(b, start)
}

// DecodeSnapshotRequest reads a parsed SNAPSHOT_REQUEST frame.
func DecodeSnapshotRequest(f *Frame) (SnapshotRequest, error) {
	if f.Type != TypeSnapshotRequest {
		return SnapshotRequest{}, fmt.Errorf("%w: %s is not SNAPSHOT_REQUEST", ErrType, f.Type)
	}
	return SnapshotRequest{Origin: f.Origin(), SnapshotSeq: f.Seq, Offset: binary.LittleEndian.Uint64(f.Payload)}, nil
}

// SnapshotChunk is bytes [Offset, Offset+len(Data)) of the snapshot taken at
// SnapshotSeq, whose whole size is Total and whose CRC32C is Checksum (so
// the receiver verifies the reassembled snapshot, not just each frame).
type SnapshotChunk struct {
	Origin
	SnapshotSeq uint64
	Total       uint64
	Offset      uint64
	Checksum    uint32
	Data        []byte
}

// Len is the encoded size.
func (s *SnapshotChunk) Len() int { return HeaderLen + snapshotChunkHeaderLen + len(s.Data) }

// MaxSnapshotData is the most chunk data that fits a datagram of
// datagramLen bytes.
func MaxSnapshotData(datagramLen int) int {
	return datagramLen - HeaderLen - snapshotChunkHeaderLen
}

// Append appends the encoded frame to dst. It returns ErrTooLarge when the
// chunk would exceed MaxFrameLen, and ErrLength when the chunk runs past
// Total.
func (s *SnapshotChunk) Append(dst []byte) ([]byte, error) {
	if s.Len() > MaxFrameLen {
		return dst, fmt.Errorf("%w: snapshot chunk of %d bytes", ErrTooLarge, len(s.Data))
	}
	if s.Offset > s.Total || uint64(len(s.Data)) > s.Total-s.Offset {
		return dst, fmt.Errorf("%w: chunk [%d,+%d) past total %d", ErrLength, s.Offset, len(s.Data), s.Total)
	}
	b, start := appendHeader(dst, TypeSnapshotChunk, s.Origin, 0, s.SnapshotSeq)
	b = binary.LittleEndian.AppendUint64(b, s.Total)
	b = binary.LittleEndian.AppendUint64(b, s.Offset)
	b = binary.LittleEndian.AppendUint32(b, s.Checksum)
	b = append(b, s.Data...)
	return finish(b, start), nil
}

func validateSnapshotChunk(f *Frame) error {
	if f.Count != 0 {
		return fmt.Errorf("%w: SNAPSHOT_CHUNK count %d", ErrCount, f.Count)
	}
	if len(f.Payload) < snapshotChunkHeaderLen {
		return fmt.Errorf("%w: SNAPSHOT_CHUNK payload %d bytes", ErrLength, len(f.Payload))
	}
	total := binary.LittleEndian.Uint64(f.Payload)
	offset := binary.LittleEndian.Uint64(f.Payload[8:])
	n := uint64(len(f.Payload) - snapshotChunkHeaderLen)
	if offset > total || n > total-offset {
		return fmt.Errorf("%w: chunk [%d,+%d) past total %d", ErrLength, offset, n, total)
	}
	return nil
}

// DecodeSnapshotChunk reads a parsed SNAPSHOT_CHUNK frame. Data aliases the
// frame.
func DecodeSnapshotChunk(f *Frame) (SnapshotChunk, error) {
	if f.Type != TypeSnapshotChunk {
		return SnapshotChunk{}, fmt.Errorf("%w: %s is not SNAPSHOT_CHUNK", ErrType, f.Type)
	}
	p := f.Payload
	return SnapshotChunk{
		Origin:      f.Origin(),
		SnapshotSeq: f.Seq,
		Total:       binary.LittleEndian.Uint64(p),
		Offset:      binary.LittleEndian.Uint64(p[8:]),
		Checksum:    binary.LittleEndian.Uint32(p[16:]),
		Data:        p[snapshotChunkHeaderLen:],
	}, nil
}
