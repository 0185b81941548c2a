// Package enginetest holds a small state machine for the tests of the
// packages that store, snapshot and rebuild one (snapshot, storage).
package enginetest

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/seqbus/seqbus/engine"
)

// Counter is a state machine whose state is the sum of its commands'
// bytes (enough to tell one history, or one snapshot, from another); it
// emits each command back to session 7 when given an emitter, so a test
// sees which commands a rebuild replays.
type Counter struct{ Applied, Sum uint64 }

var _ engine.StateMachine = (*Counter)(nil)

// OutputSession is where Counter emits.
const OutputSession = 7

func (c *Counter) Apply(seq uint64, cmd []byte, out engine.Emitter) {
	c.Applied = seq
	for _, b := range cmd {
		c.Sum += uint64(b)
	}
	if out != nil {
		out.Emit(OutputSession, cmd)
	}
}

// Snapshot writes the 16 bytes of the state.
func (c *Counter) Snapshot(w io.Writer) error {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], c.Applied)
	binary.LittleEndian.PutUint64(b[8:], c.Sum)
	_, err := w.Write(b[:])
	return err
}

// Restore reads what Snapshot wrote, refusing anything shorter or longer.
func (c *Counter) Restore(r io.Reader) error {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	if extra, _ := r.Read(make([]byte, 1)); extra != 0 {
		return errors.New("enginetest: counter snapshot too long")
	}
	c.Applied, c.Sum = binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
	return nil
}

func (c *Counter) StateHash() uint64  { return c.Applied*31 + c.Sum }
func (c *Counter) AppliedSeq() uint64 { return c.Applied }
