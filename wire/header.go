package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Protocol constants: offsets and sizes of the fixed header.
const (
	Magic   uint16 = 0x5342 // "SB" little-endian
	Version uint8  = 1

	offMagic    = 0
	offVersion  = 2
	offType     = 3
	offFlags    = 4
	offStream   = 6
	offNode     = 8
	offCount    = 12
	offReserved = 14
	offEpoch    = 16
	offSeq      = 24
	offLength   = 32
	offChecksum = 36

	// HeaderLen is the size of the fixed header that starts every frame.
	HeaderLen = 40
)

// Implementation limits (not protocol constants): what one frame may hold.
const (
	// MaxFrameLen is the largest frame Parse accepts: the largest UDP
	// payload over IPv4.
	MaxFrameLen = 65507
	// MaxPayloadLen is the largest payload after the header.
	MaxPayloadLen = MaxFrameLen - HeaderLen
	// FlagMAC says a TagLen-byte MAC follows the payload (Length does not
	// count it; the checksum does not cover it; the MAC covers the header
	// with its checksum and the payload). Every other flag bit is refused.
	FlagMAC uint16 = 0x0001
	// TagLen is the MAC tag's length (HMAC-SHA256 truncated, package auth).
	TagLen = 16
	// DefaultDatagramLen is the default batch size: an Ethernet MTU of 1500
	// less the IPv4 (20) and UDP (8) headers, so a frame never fragments.
	DefaultDatagramLen = 1472
	// MinDatagramLen is the smallest datagram a node or client may be
	// configured to: a header, one 1024-byte command (the client's
	// largest) with its length prefix and a MAC tag take 1082 bytes;
	// 1200 (QUIC's floor) leaves room and fits every IPv4 path that is
	// still in use. Every frame the protocol builds to a budget (DATA,
	// OUTPUT, snapshot and market-data snapshot chunks) has room in it.
	MinDatagramLen = 1200
	// MaxMessageLen is the largest message a DATA frame can carry: message
	// lengths are u16 on the wire.
	MaxMessageLen = 65535
	// MessageOverhead is the length prefix in front of every DATA message.
	MessageOverhead = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Type is the frame type.
type Type uint8

// Frame types.
const (
	TypeData            Type = 1  // a batch of messages, first seq + count
	TypeHeartbeat       Type = 2  // epoch, highest seq sent; lets a standby see a tail gap
	TypeNak             Type = 3  // one or more inclusive ranges to resend
	TypeRetransmit      Type = 4  // DATA resent in answer to a NAK
	TypeAck             Type = 5  // highest contiguous seq applied
	TypeHash            Type = 6  // state hash at seq
	TypeSnapshotRequest Type = 7  // ask for a snapshot from an offset (resumable)
	TypeSnapshotChunk   Type = 8  // one chunk of a snapshot
	TypeNewEpoch        Type = 9  // a new primary's announcement
	TypeLeaseAcquire    Type = 10 // node -> witness
	TypeLeaseRenew      Type = 11 // node -> witness
	TypeLeaseGrant      Type = 12 // witness -> node
	TypeLeaseDeny       Type = 13 // witness -> node
	TypeLeaseQuery      Type = 14 // anyone -> witness: who leads?
	TypeLeaseInfo       Type = 15 // witness -> anyone: holder and epoch
	TypeNeedSnapshot    Type = 16 // primary -> standby: the range asked for is gone
	TypeCommand         Type = 17 // client -> primary: a batch of commands
	TypeOutput          Type = 18 // primary -> client or market data: a batch of released outputs
	TypeReplayRequest   Type = 19 // client -> primary: a session's outputs from an output seq on
	TypeReplayEnd       Type = 20 // primary -> client: how a replay ended (done, too old, refused)
	TypeMDRequest       Type = 21 // consumer -> any node: market data from an MD seq, or a book snapshot
	TypeMDReplay        Type = 22 // node -> consumer: a batch of market-data updates re-sent from the ring
	TypeMDStatus        Type = 23 // node -> consumer: a request refused (too old, not yet, rate limited) and the ring's bounds
	TypeMDSnapshot      Type = 24 // node -> consumer: one chunk of the books at an MD seq
	TypeLeaseRelease    Type = 25 // node -> witness: the holder gives its lease up (no reply)
	TypeNotLeading      Type = 26 // primary -> client: this node leads no more; ask the arbiter who does
	typeMax                  = TypeNotLeading
)

var typeNames = [...]string{
	TypeData:            "DATA",
	TypeHeartbeat:       "HEARTBEAT",
	TypeNak:             "NAK",
	TypeRetransmit:      "RETRANSMIT",
	TypeAck:             "ACK",
	TypeHash:            "HASH",
	TypeSnapshotRequest: "SNAPSHOT_REQUEST",
	TypeSnapshotChunk:   "SNAPSHOT_CHUNK",
	TypeNewEpoch:        "NEW_EPOCH",
	TypeLeaseAcquire:    "LEASE_ACQUIRE",
	TypeLeaseRenew:      "LEASE_RENEW",
	TypeLeaseGrant:      "LEASE_GRANT",
	TypeLeaseDeny:       "LEASE_DENY",
	TypeLeaseQuery:      "LEASE_QUERY",
	TypeLeaseInfo:       "LEASE_INFO",
	TypeNeedSnapshot:    "NEED_SNAPSHOT",
	TypeCommand:         "COMMAND",
	TypeOutput:          "OUTPUT",
	TypeReplayRequest:   "REPLAY_REQUEST",
	TypeReplayEnd:       "REPLAY_END",
	TypeMDRequest:       "MD_REQUEST",
	TypeMDReplay:        "MD_REPLAY",
	TypeMDStatus:        "MD_STATUS",
	TypeMDSnapshot:      "MD_SNAPSHOT",
	TypeLeaseRelease:    "LEASE_RELEASE",
	TypeNotLeading:      "NOT_LEADING",
}

func (t Type) String() string {
	if t >= 1 && t <= typeMax && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Batched reports whether frames of type t carry a batch of length-prefixed
// messages (DATA, RETRANSMIT, COMMAND, OUTPUT) built with Batch and read
// with Messages. In COMMAND frames Seq is the client's own number of the
// first command; in OUTPUT frames it is the first output's number in its
// stream (per client session, or the market-data sequence).
func (t Type) Batched() bool {
	return t == TypeData || t == TypeRetransmit || t == TypeCommand || t == TypeOutput || t == TypeMDReplay
}

// Valid reports whether t is a frame type this version defines.
func (t Type) Valid() bool { return t >= 1 && t <= typeMax && typeNames[t] != "" }

// Origin says who sent a frame, on which stream, under which epoch. Every
// frame type embeds it; it is the part of the header the sender chooses.
type Origin struct {
	Stream uint16
	Node   uint32
	Epoch  uint64
}

// Header is the decoded fixed header.
type Header struct {
	Type     Type
	Flags    uint16
	Stream   uint16
	Node     uint32
	Count    uint16
	Epoch    uint64
	Seq      uint64
	Length   uint32 // payload bytes after the header
	Checksum uint32
}

// Origin returns the sender fields of the header.
func (h *Header) Origin() Origin {
	return Origin{Stream: h.Stream, Node: h.Node, Epoch: h.Epoch}
}

// ParseHeader decodes and checks the fixed header only: magic, version,
// type, flags and that the payload length fits both the limit and b. It does
// not verify the checksum or the payload layout; use Parse for that. It is
// cheap enough for a transport to classify drops by reason.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	err := h.parse(b)
	return h, err
}

// parse is ParseHeader into h (a Frame's parse fills its own header in
// place: a Header returned by value was a stack copy per datagram).
func (h *Header) parse(b []byte) error {
	if len(b) < HeaderLen {
		return fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	if m := binary.LittleEndian.Uint16(b[offMagic:]); m != Magic {
		return fmt.Errorf("%w: %#04x", ErrMagic, m)
	}
	if v := b[offVersion]; v != Version {
		return fmt.Errorf("%w: %d", ErrVersion, v)
	}
	h.Type = Type(b[offType])
	if !h.Type.Valid() {
		return fmt.Errorf("%w: %d", ErrType, uint8(h.Type))
	}
	h.Flags = binary.LittleEndian.Uint16(b[offFlags:])
	if r := binary.LittleEndian.Uint16(b[offReserved:]); h.Flags&^(FlagMAC|FlagReplay|FlagLeaseReleased|FlagLeaving|FlagDeclined|FlagAskHistory) != 0 || r != 0 ||
		(h.Flags&FlagReplay != 0 && h.Type != TypeOutput) || (h.Flags&FlagLeaseReleased != 0 && h.Type != TypeHeartbeat) ||
		(h.Flags&(FlagLeaving|FlagAskHistory) != 0 && h.Type != TypeAck) || (h.Flags&FlagDeclined != 0 && h.Type != TypeLeaseRelease) {
		return fmt.Errorf("%w: flags %#04x reserved %#04x on %s", ErrFlags, h.Flags, r, h.Type)
	}
	h.Stream = binary.LittleEndian.Uint16(b[offStream:])
	h.Node = binary.LittleEndian.Uint32(b[offNode:])
	h.Count = binary.LittleEndian.Uint16(b[offCount:])
	h.Epoch = binary.LittleEndian.Uint64(b[offEpoch:])
	h.Seq = binary.LittleEndian.Uint64(b[offSeq:])
	h.Length = binary.LittleEndian.Uint32(b[offLength:])
	h.Checksum = binary.LittleEndian.Uint32(b[offChecksum:])
	if h.Length > MaxPayloadLen {
		return fmt.Errorf("%w: payload length %d over limit %d", ErrLength, h.Length, MaxPayloadLen)
	}
	if int(h.Length) > len(b)-HeaderLen-h.TagLen() {
		return fmt.Errorf("%w: payload length %d and tag %d, %d bytes present", ErrLength, h.Length, h.TagLen(), len(b)-HeaderLen)
	}
	return nil
}

// TagLen is the length of the MAC tag after the payload: TagLen with
// FlagMAC, else 0.
func (h *Header) TagLen() int {
	if h.Flags&FlagMAC != 0 {
		return TagLen
	}
	return 0
}

// Seal appends frame (one complete, unsigned frame) to dst with FlagMAC set
// and its checksum recomputed, and returns dst. The caller then appends the
// TagLen-byte MAC of the returned frame bytes (the whole header, checksum
// included, and the payload): ring.Sign(b, b[start:], epoch). See the auth
// package for the keys.
func Seal(dst, frame []byte) []byte {
	start := len(dst)
	dst = append(dst, frame...)
	f := dst[start:]
	binary.LittleEndian.PutUint16(f[offFlags:], binary.LittleEndian.Uint16(f[offFlags:])|FlagMAC)
	binary.LittleEndian.PutUint32(f[offChecksum:], checksum(f))
	return dst
}

// appendHeader appends a header with length and checksum zero; finish fills
// them once the payload has been appended. start is where the frame begins.
func appendHeader(dst []byte, t Type, o Origin, count uint16, seq uint64) (b []byte, start int) {
	start = len(dst)
	var h [HeaderLen]byte
	binary.LittleEndian.PutUint16(h[offMagic:], Magic)
	h[offVersion] = Version
	h[offType] = byte(t)
	binary.LittleEndian.PutUint16(h[offStream:], o.Stream)
	binary.LittleEndian.PutUint32(h[offNode:], o.Node)
	binary.LittleEndian.PutUint16(h[offCount:], count)
	binary.LittleEndian.PutUint64(h[offEpoch:], o.Epoch)
	binary.LittleEndian.PutUint64(h[offSeq:], seq)
	return append(dst, h[:]...), start
}

// finish writes the payload length and the checksum of the frame that starts
// at start and runs to the end of b.
func finish(b []byte, start int) []byte {
	f := b[start:]
	binary.LittleEndian.PutUint32(f[offLength:], uint32(len(f)-HeaderLen))
	binary.LittleEndian.PutUint32(f[offChecksum:], checksum(f))
	return b
}

// checksum is CRC32C over the header (without the checksum field) and the
// payload of the frame f.
func checksum(f []byte) uint32 {
	c := crc32.Update(0, castagnoli, f[:offChecksum])
	return crc32.Update(c, castagnoli, f[HeaderLen:])
}

func appendUint64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func uint64le(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
