package wire

import (
	"encoding/binary"
	"fmt"
)

// Session replay (issue 20): a client that reconnects, or sees a gap in its
// session's output seqs (engine.Output.OutSeq), asks the primary for its
// outputs from a number on, as a SoupBinTCP login names the next sequence
// number it expects. The primary answers with OUTPUT frames marked
// FlagReplay, then one REPLAY_END that says how far it got.

// FlagReplay marks an OUTPUT frame whose outputs are a replay of a
// session's history (answering a REPLAY_REQUEST), not a first release. It
// is valid only on OUTPUT frames.
const FlagReplay uint16 = 0x0002

// ReplayRequest asks for session Session's outputs from output seq From
// (>= 1) on. Seq in the header carries From. Authenticated like commands
// (the client key's MAC, when one is configured).
type ReplayRequest struct {
	Origin
	Session uint64
	From    uint64
}

const replayRequestLen = 8

// Len is the encoded size.
func (r *ReplayRequest) Len() int { return HeaderLen + replayRequestLen }

// Append appends the encoded frame to dst.
func (r *ReplayRequest) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeReplayRequest, r.Origin, 0, r.From)
	b = appendUint64(b, r.Session)
	return finish(b, start)
}

func validateReplayRequest(f *Frame) error {
	if err := fixed(f, 0, replayRequestLen); err != nil {
		return err
	}
	if f.Seq == 0 {
		return fmt.Errorf("%w: replay from output seq 0", ErrSeq)
	}
	if uint64le(f.Payload) == 0 {
		return fmt.Errorf("%w: replay for session 0 (market data)", ErrSeq)
	}
	return nil
}

// DecodeReplayRequest reads a parsed REPLAY_REQUEST frame.
func DecodeReplayRequest(f *Frame) (ReplayRequest, error) {
	if f.Type != TypeReplayRequest {
		return ReplayRequest{}, fmt.Errorf("%w: %s is not REPLAY_REQUEST", ErrType, f.Type)
	}
	return ReplayRequest{Origin: f.Origin(), Session: uint64le(f.Payload), From: f.Seq}, nil
}

// ReplayStatus is how a replay ended.
type ReplayStatus uint8

// Replay statuses.
const (
	// ReplayDone: outputs From..Next-1 were sent (none if Next == From).
	// Highest is the session's last output applied on the node; outputs
	// Next..Highest exist but are not released yet (they leave through
	// the gate as usual, or answer a later request).
	ReplayDone ReplayStatus = 0
	// ReplayTooOld: From is older than the node still holds; Next is the
	// oldest output seq it could replay. The outputs From..Next-1 are gone
	// for good (the session must resynchronise from its own records).
	ReplayTooOld ReplayStatus = 1
	// ReplayRefused: the node does not answer now (not the primary, or
	// the request rate is over its bound); ask again later.
	ReplayRefused   ReplayStatus = 2
	replayStatusMax              = ReplayRefused
)

// ReplayEnd answers a ReplayRequest. Seq in the header carries From.
type ReplayEnd struct {
	Origin
	Session uint64
	From    uint64
	Next    uint64
	Highest uint64
	Status  ReplayStatus
}

const replayEndLen = 8 + 8 + 8 + 1

// Len is the encoded size.
func (r *ReplayEnd) Len() int { return HeaderLen + replayEndLen }

// Append appends the encoded frame to dst.
func (r *ReplayEnd) Append(dst []byte) []byte {
	b, start := appendHeader(dst, TypeReplayEnd, r.Origin, 0, r.From)
	b = appendUint64(b, r.Session)
	b = appendUint64(b, r.Next)
	b = appendUint64(b, r.Highest)
	b = append(b, byte(r.Status))
	return finish(b, start)
}

func validateReplayEnd(f *Frame) error {
	if err := fixed(f, 0, replayEndLen); err != nil {
		return err
	}
	if st := ReplayStatus(f.Payload[24]); st > replayStatusMax {
		return fmt.Errorf("%w: replay status %d", ErrLength, st)
	}
	if uint64le(f.Payload) == 0 {
		return fmt.Errorf("%w: replay for session 0 (market data)", ErrSeq)
	}
	return nil
}

// DecodeReplayEnd reads a parsed REPLAY_END frame.
func DecodeReplayEnd(f *Frame) (ReplayEnd, error) {
	if f.Type != TypeReplayEnd {
		return ReplayEnd{}, fmt.Errorf("%w: %s is not REPLAY_END", ErrType, f.Type)
	}
	p := f.Payload
	return ReplayEnd{Origin: f.Origin(), From: f.Seq, Session: uint64le(p), Next: uint64le(p[8:]),
		Highest: uint64le(p[16:]), Status: ReplayStatus(p[24])}, nil
}

// MarkReplay sets FlagReplay on an encoded, unsealed OUTPUT frame (as built
// by Batch) in place and recomputes its checksum; Seal keeps the flag.
func MarkReplay(f []byte) error {
	h, err := ParseHeader(f)
	if err != nil {
		return err
	}
	if h.Type != TypeOutput || h.Flags&FlagMAC != 0 {
		return fmt.Errorf("%w: only an unsealed OUTPUT frame is marked a replay", ErrType)
	}
	binary.LittleEndian.PutUint16(f[offFlags:], h.Flags|FlagReplay)
	finish(f[:HeaderLen+int(h.Length)], 0)
	return nil
}
