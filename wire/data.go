package wire

import (
	"encoding/binary"
	"fmt"
)

// Batch packs length-prefixed messages into one DATA (or RETRANSMIT) frame
// up to a fixed datagram size. It owns one buffer, allocated once by
// NewBatch; Reset, Add and Bytes never allocate.
//
// A Batch is the sequencer's unit of send: first seq + count, as in
// MoldUDP64. The bytes returned by Bytes are valid until the next Reset.
type Batch struct {
	buf   []byte
	limit int
	start int
	count uint16
	seq   uint64
}

// NewBatch returns a batch whose frames are at most datagramLen bytes
// (DefaultDatagramLen if zero). datagramLen must leave room for the header
// and one byte of message; it is capped at MaxFrameLen.
func NewBatch(datagramLen int) *Batch {
	if datagramLen == 0 {
		datagramLen = DefaultDatagramLen
	}
	if datagramLen > MaxFrameLen {
		datagramLen = MaxFrameLen
	}
	if datagramLen < HeaderLen+MessageOverhead+1 {
		panic(fmt.Sprintf("wire: datagram length %d too small for a frame", datagramLen))
	}
	return &Batch{buf: make([]byte, 0, datagramLen), limit: datagramLen}
}

// Reset starts a new frame of a batched type t (see Type.Batched) whose
// first message will carry firstSeq.
func (b *Batch) Reset(t Type, o Origin, firstSeq uint64) {
	if !t.Batched() {
		panic("wire: Batch.Reset with a type that carries no messages: " + t.String())
	}
	b.buf, b.start = appendHeader(b.buf[:0], t, o, 0, firstSeq)
	b.count = 0
	b.seq = firstSeq
}

// Fits reports whether a message of msgLen bytes would fit in the frame.
func (b *Batch) Fits(msgLen int) bool {
	return msgLen <= MaxMessageLen && b.count < maxUint16 &&
		len(b.buf)+MessageOverhead+msgLen <= b.limit
}

// Add appends msg as the next message (seq FirstSeq()+Count()). It returns
// false and changes nothing when the message does not fit; the caller sends
// the batch and starts another. A message that cannot fit even an empty
// batch can never be sent: check MaxMessage first.
func (b *Batch) Add(msg []byte) bool {
	if !b.Fits(len(msg)) {
		return false
	}
	b.buf = binary.LittleEndian.AppendUint16(b.buf, uint16(len(msg)))
	b.buf = append(b.buf, msg...)
	b.count++
	return true
}

// MaxMessage is the largest message an empty batch of this size can hold.
func (b *Batch) MaxMessage() int {
	return min(b.limit-HeaderLen-MessageOverhead, MaxMessageLen)
}

// Count is the number of messages added since Reset.
func (b *Batch) Count() int { return int(b.count) }

// FirstSeq is the seq of the first message.
func (b *Batch) FirstSeq() uint64 { return b.seq }

// NextSeq is the seq the next added message will carry.
func (b *Batch) NextSeq() uint64 { return b.seq + uint64(b.count) }

// Len is the size of the frame so far.
func (b *Batch) Len() int { return len(b.buf) }

// Bytes finishes the frame (count, length, checksum) and returns it. The
// slice is valid until the next Reset. Bytes may be called again after more
// Adds.
func (b *Batch) Bytes() []byte {
	binary.LittleEndian.PutUint16(b.buf[offCount:], b.count)
	return finish(b.buf, b.start)
}

const maxUint16 = 1<<16 - 1

// AppendData appends one DATA or RETRANSMIT frame holding msgs, the first
// with seq firstSeq. It is the one-shot form of Batch, for retransmits and
// tests; it returns ErrTooLarge when the frame would exceed MaxFrameLen.
func AppendData(dst []byte, t Type, o Origin, firstSeq uint64, msgs ...[]byte) ([]byte, error) {
	if !t.Batched() {
		return dst, fmt.Errorf("%w: %s carries no messages", ErrType, t)
	}
	size := HeaderLen
	for _, m := range msgs {
		if len(m) > MaxMessageLen {
			return dst, fmt.Errorf("%w: message of %d bytes", ErrTooLarge, len(m))
		}
		size += MessageOverhead + len(m)
	}
	if size > MaxFrameLen || len(msgs) > maxUint16 {
		return dst, fmt.Errorf("%w: frame of %d bytes, %d messages", ErrTooLarge, size, len(msgs))
	}
	b, start := appendHeader(dst, t, o, uint16(len(msgs)), firstSeq)
	for _, m := range msgs {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return finish(b, start), nil
}

// validateMessages checks that count length-prefixed messages exactly fill
// the payload and that their seqs are valid.
func validateMessages(f *Frame) error {
	if f.Count == 0 {
		return fmt.Errorf("%w: %s with no messages", ErrCount, f.Type)
	}
	if int(f.Count)*MessageOverhead > len(f.Payload) {
		return fmt.Errorf("%w: %d messages cannot fit %d bytes", ErrCount, f.Count, len(f.Payload))
	}
	if f.Seq == 0 || f.Seq > ^uint64(0)-uint64(f.Count)+1 {
		return fmt.Errorf("%w: first seq %d with %d messages", ErrSeq, f.Seq, f.Count)
	}
	p := f.Payload
	for i := 0; i < int(f.Count); i++ {
		if len(p) < MessageOverhead {
			return fmt.Errorf("%w: message %d of %d has no length prefix", ErrCount, i, f.Count)
		}
		n := int(binary.LittleEndian.Uint16(p))
		p = p[MessageOverhead:]
		if n > len(p) {
			return fmt.Errorf("%w: message %d says %d bytes, %d left", ErrLength, i, n, len(p))
		}
		p = p[n:]
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d messages", ErrLength, len(p), f.Count)
	}
	return nil
}

// Messages iterates over the messages of a parsed batched frame (DATA,
// RETRANSMIT, COMMAND, OUTPUT).
// The zero value yields nothing.
type Messages struct {
	rest []byte
	seq  uint64
	left int
}

// Messages returns an iterator over f's messages; for any other frame type
// it yields nothing.
func (f *Frame) Messages() Messages {
	if !f.Type.Batched() {
		return Messages{}
	}
	return Messages{rest: f.Payload, seq: f.Seq, left: int(f.Count)}
}

// Next returns the next message and its seq. msg aliases the frame's buffer.
// Parse validated the layout, so Next cannot over-read; it stops defensively
// if handed a frame that did not come from Parse.
func (m *Messages) Next() (seq uint64, msg []byte, ok bool) {
	if m.left == 0 || len(m.rest) < MessageOverhead {
		return 0, nil, false
	}
	n := int(binary.LittleEndian.Uint16(m.rest))
	if n > len(m.rest)-MessageOverhead {
		m.left = 0
		return 0, nil, false
	}
	msg = m.rest[MessageOverhead : MessageOverhead+n]
	m.rest = m.rest[MessageOverhead+n:]
	seq = m.seq
	m.seq++
	m.left--
	return seq, msg, true
}

// LastSeq is the seq of the last message of a DATA or RETRANSMIT frame.
func (f *Frame) LastSeq() uint64 { return f.Seq + uint64(f.Count) - 1 }
