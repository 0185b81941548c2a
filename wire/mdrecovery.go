package wire

import (
	"encoding/binary"
	"fmt"
)

// Market-data recovery (MoldUDP64's re-request model, issue 20 items 4-5).
// A consumer that sees a gap in the market-data multicast asks any node,
// by unicast, for the updates from an MD seq (MD_REQUEST, Kind
// MDRequestRange); the node answers from its bounded ring of recent
// updates with MD_REPLAY frames (the OUTPUT layout: Seq is the MD seq of
// the first update) or, when it cannot, one MD_STATUS saying why and which
// MD seqs it holds. A consumer past the ring asks for the books instead
// (Kind MDRequestSnapshot) and gets MD_SNAPSHOT chunks, every one taken at
// the same MD seq, then follows the stream from that seq on.
//
// Every recovery frame is client traffic: sealed with the stream's client
// key when frames are authenticated. Node is the requester's id (a
// session, or 0), not a cluster node.

// MDRequestKind says what an MD_REQUEST asks for.
type MDRequestKind uint8

// MD_REQUEST kinds.
const (
	MDRequestRange    MDRequestKind = 1 // Count updates from First
	MDRequestSnapshot MDRequestKind = 2 // the books of Instrument (or AllInstruments)
)

// AllInstruments in an MD_REQUEST or MD_SNAPSHOT means every instrument.
const AllInstruments uint32 = 0xffffffff

// MDStatusCode says why an MD_REQUEST was not (wholly) answered.
type MDStatusCode uint8

// MD_STATUS codes.
const (
	// MDTooOld: First is below the oldest update the ring holds: ask for a
	// snapshot.
	MDTooOld MDStatusCode = 1
	// MDNotYet: nothing the node may serve is at or above First (it is
	// released nowhere yet, or this node is behind).
	MDNotYet MDStatusCode = 2
	// MDRateLimited: the requester asked too often; retry later.
	MDRateLimited MDStatusCode = 3
	// MDUnavailable: the node keeps no ring, its state machine exports no
	// books, the books are larger than a snapshot may be, or too many
	// snapshot requests are already waiting.
	MDUnavailable MDStatusCode = 4
)

func (c MDStatusCode) valid() bool { return c >= MDTooOld && c <= MDUnavailable }

const (
	mdRequestLen       = 9  // kind u8, count u32, instrument u32
	mdStatusLen        = 17 // code u8, oldest u64, newest u64
	mdSnapshotHeadLen  = 8  // instrument u32, chunk u16, chunks u16
	MDSnapshotLevelLen = 21 // instrument u32, side u8, price i64, qty u64
)

// MDRequest asks a node for market data. Seq carries First.
type MDRequest struct {
	Origin
	Kind MDRequestKind
	// First and Count: the updates asked for (Range). For a snapshot,
	// First is ignored and sent as 0.
	First uint64
	Count uint32
	// Instrument: the snapshot's instrument, or AllInstruments.
	Instrument uint32
}

// Len is the encoded size.
func (r *MDRequest) Len() int { return HeaderLen + mdRequestLen }

// Append appends the encoded frame to dst.
func (r *MDRequest) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeMDRequest, r.Origin, 0, r.First)
	b = append(b, byte(r.Kind))
	b = binary.LittleEndian.AppendUint32(b, r.Count)
	b = binary.LittleEndian.AppendUint32(b, r.Instrument)
	return finish(b, start)
}

// DecodeMDRequest reads a parsed MD_REQUEST frame.
func DecodeMDRequest(f *Frame) (MDRequest, error) {
	if f.Type != TypeMDRequest {
		return MDRequest{}, fmt.Errorf("%w: %s is not MD_REQUEST", ErrType, f.Type)
	}
	p := f.Payload
	return MDRequest{Origin: f.Origin(), Kind: MDRequestKind(p[0]), First: f.Seq,
		Count: binary.LittleEndian.Uint32(p[1:]), Instrument: binary.LittleEndian.Uint32(p[5:])}, nil
}

// MDStatus answers an MD_REQUEST the node did not (wholly) serve. Seq
// carries the request's First. Oldest..Newest are the MD seqs the node
// could serve at that moment (Newest < Oldest: none).
type MDStatus struct {
	Origin
	First          uint64
	Code           MDStatusCode
	Oldest, Newest uint64
}

// Len is the encoded size.
func (s *MDStatus) Len() int { return HeaderLen + mdStatusLen }

// Append appends the encoded frame to dst.
func (s *MDStatus) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeMDStatus, s.Origin, 0, s.First)
	b = append(b, byte(s.Code))
	b = appendUint64(b, s.Oldest)
	b = appendUint64(b, s.Newest)
	return finish(b, start)
}

// DecodeMDStatus reads a parsed MD_STATUS frame.
func DecodeMDStatus(f *Frame) (MDStatus, error) {
	if f.Type != TypeMDStatus {
		return MDStatus{}, fmt.Errorf("%w: %s is not MD_STATUS", ErrType, f.Type)
	}
	p := f.Payload
	return MDStatus{Origin: f.Origin(), First: f.Seq, Code: MDStatusCode(p[0]), Oldest: uint64le(p[1:]), Newest: uint64le(p[9:])}, nil
}

// MDLevel is one price level of a book in an MD_SNAPSHOT: Side is the
// engine's (1 buy, 2 sell), Qty the level's total.
type MDLevel struct {
	Instrument uint32
	Side       uint8
	Price      int64
	Qty        uint64
}

// MDSnapshot is chunk Chunk of Chunks of the books of Instrument (or
// AllInstruments) as they stood after MD seq MDSeq (Seq carries it; 0: no
// update yet). Count carries len(Levels). Every chunk of one snapshot has
// the same MDSeq and Chunks; a consumer that misses one asks again.
type MDSnapshot struct {
	Origin
	MDSeq         uint64
	Instrument    uint32
	Chunk, Chunks uint16
	Levels        []MDLevel
}

// MaxMDSnapshotLevels is how many levels fit one chunk of a datagram of
// datagramLen bytes.
func MaxMDSnapshotLevels(datagramLen int) int {
	return max((datagramLen-HeaderLen-mdSnapshotHeadLen)/MDSnapshotLevelLen, 0)
}

// Len is the encoded size.
func (s *MDSnapshot) Len() int {
	return HeaderLen + mdSnapshotHeadLen + len(s.Levels)*MDSnapshotLevelLen
}

// Append appends the encoded frame to dst; ErrTooLarge when it would not
// fit a frame or the chunk numbers are inconsistent.
func (s *MDSnapshot) Append(dst []byte) ([]byte, error) {
	if s.Len() > MaxFrameLen || len(s.Levels) > maxUint16 || s.Chunks == 0 || s.Chunk >= s.Chunks {
		return dst, fmt.Errorf("%w: snapshot chunk %d of %d with %d levels", ErrTooLarge, s.Chunk, s.Chunks, len(s.Levels))
	}
	b, start := appendHeader(dst, TypeMDSnapshot, s.Origin, uint16(len(s.Levels)), s.MDSeq)
	b = binary.LittleEndian.AppendUint32(b, s.Instrument)
	b = binary.LittleEndian.AppendUint16(b, s.Chunk)
	b = binary.LittleEndian.AppendUint16(b, s.Chunks)
	for i := range s.Levels {
		l := &s.Levels[i]
		b = binary.LittleEndian.AppendUint32(b, l.Instrument)
		b = append(b, l.Side)
		b = appendUint64(b, uint64(l.Price))
		b = appendUint64(b, l.Qty)
	}
	return finish(b, start), nil
}

// DecodeMDSnapshot reads a parsed MD_SNAPSHOT frame, appending its levels
// to levels[:0] (it allocates only when levels is too small).
func DecodeMDSnapshot(f *Frame, levels []MDLevel) (MDSnapshot, error) {
	if f.Type != TypeMDSnapshot {
		return MDSnapshot{}, fmt.Errorf("%w: %s is not MD_SNAPSHOT", ErrType, f.Type)
	}
	p := f.Payload
	s := MDSnapshot{Origin: f.Origin(), MDSeq: f.Seq, Instrument: binary.LittleEndian.Uint32(p),
		Chunk: binary.LittleEndian.Uint16(p[4:]), Chunks: binary.LittleEndian.Uint16(p[6:])}
	levels = levels[:0]
	for q := p[mdSnapshotHeadLen:]; len(q) >= MDSnapshotLevelLen; q = q[MDSnapshotLevelLen:] {
		levels = append(levels, MDLevel{Instrument: binary.LittleEndian.Uint32(q), Side: q[4],
			Price: int64(uint64le(q[5:])), Qty: uint64le(q[13:])})
	}
	s.Levels = levels
	return s, nil
}

// IsMDRecovery reports whether t is one of the market-data recovery types.
func IsMDRecovery(t Type) bool { return t >= TypeMDRequest && t <= TypeMDSnapshot }

// validateMDRecovery checks the fixed layouts of MD_REQUEST, MD_STATUS
// and MD_SNAPSHOT (MD_REPLAY is a batch, checked with the others).
func validateMDRecovery(f *Frame) error {
	switch f.Type {
	case TypeMDRequest:
		if err := fixed(f, 0, mdRequestLen); err != nil {
			return err
		}
		k := MDRequestKind(f.Payload[0])
		if k != MDRequestRange && k != MDRequestSnapshot {
			return fmt.Errorf("%w: MD_REQUEST kind %d", ErrFlags, k)
		}
		if k == MDRequestRange && (f.Seq == 0 || binary.LittleEndian.Uint32(f.Payload[1:]) == 0) {
			return fmt.Errorf("%w: MD_REQUEST from %d for %d updates", ErrSeq, f.Seq, binary.LittleEndian.Uint32(f.Payload[1:]))
		}
		if k == MDRequestSnapshot && (f.Seq != 0 || binary.LittleEndian.Uint32(f.Payload[1:]) != 0) {
			return fmt.Errorf("%w: MD_REQUEST snapshot with a range", ErrSeq)
		}
		return nil
	case TypeMDStatus:
		if err := fixed(f, 0, mdStatusLen); err != nil {
			return err
		}
		if !MDStatusCode(f.Payload[0]).valid() {
			return fmt.Errorf("%w: MD_STATUS code %d", ErrFlags, f.Payload[0])
		}
		return nil
	case TypeMDSnapshot:
		if err := fixed(f, f.Count, mdSnapshotHeadLen+int(f.Count)*MDSnapshotLevelLen); err != nil {
			return err
		}
		chunk, chunks := binary.LittleEndian.Uint16(f.Payload[4:]), binary.LittleEndian.Uint16(f.Payload[6:])
		if chunks == 0 || chunk >= chunks {
			return fmt.Errorf("%w: MD_SNAPSHOT chunk %d of %d", ErrCount, chunk, chunks)
		}
		return nil
	}
	return fmt.Errorf("%w: %d", ErrType, uint8(f.Type))
}
