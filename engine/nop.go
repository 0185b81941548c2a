package engine

import (
	"encoding/binary"
	"errors"
	"io"
)

// Nop is a state machine that does no work: it answers every command that
// has a valid header with an Ack (order id = seq) to its session and keeps
// only the applied seq and a hash of the commands it applied. It measures
// the bus's replicated throughput without an engine's cost
// (`seqbus node --engine none`); replicas running it still compare state
// hashes, so a divergence in the replicated bytes is still detected.
type Nop struct {
	applied uint64
	hash    uint64
	out     [ackLen]byte
}

var _ StateMachine = (*Nop)(nil)

var nopSnapshotMagic = [8]byte{'S', 'Q', 'B', 'N', 'O', 'P', '0', '1'}

// Apply answers command with an Ack; a command without a valid header
// gets no answer (there is no session to send it to).
func (n *Nop) Apply(seq uint64, command []byte, out Emitter) {
	if seq <= n.applied {
		panic("engine: Nop.Apply: seq not above AppliedSeq")
	}
	n.applied = seq
	var hdr CommandHeader
	err := hdr.Parse(command)
	n.hash = foldBytes(fold(n.hash, seq), command)
	if err != nil || out == nil {
		return
	}
	ack := Output{Kind: KindAck, ClientOrderID: hdr.ClientOrderID, OrderID: seq, Side: Buy, Type: Limit}
	out.Emit(hdr.Session, AppendOutput(n.out[:0], &ack))
}

// foldBytes folds b into h a little-endian word at a time, the last
// partial word zero-padded. Whole words are read in place: a copy per
// word into a scratch array was a memmove call each, half of Nop's cost.
func foldBytes(h uint64, b []byte) uint64 {
	for len(b) >= 8 {
		h = fold(h, binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	if len(b) > 0 {
		var w [8]byte
		copy(w[:], b)
		h = fold(h, binary.LittleEndian.Uint64(w[:]))
	}
	return h
}

// StateHash is the hash of every command applied, in order.
func (n *Nop) StateHash() uint64 { return fold(n.hash, n.applied) }

// AppliedSeq is the last applied seq.
func (n *Nop) AppliedSeq() uint64 { return n.applied }

// Snapshot writes the applied seq and the hash.
func (n *Nop) Snapshot(w io.Writer) error {
	var b [24]byte
	copy(b[:8], nopSnapshotMagic[:])
	binary.LittleEndian.PutUint64(b[8:], n.applied)
	binary.LittleEndian.PutUint64(b[16:], n.hash)
	_, err := w.Write(b[:])
	return err
}

// Restore reads what Snapshot wrote.
func (n *Nop) Restore(r io.Reader) error {
	var b [24]byte
	if _, err := io.ReadFull(r, b[:]); err != nil || [8]byte(b[:8]) != nopSnapshotMagic {
		return errors.New("engine: not a Nop snapshot")
	}
	n.applied = binary.LittleEndian.Uint64(b[8:])
	n.hash = binary.LittleEndian.Uint64(b[16:])
	return nil
}
