package session

import "github.com/seqbus/seqbus/wire"

// Frames packs an answer's outputs into OUTPUT frames marked replay
// (wire.FlagReplay), each holding consecutive outputs of the session and
// carrying its first output's command seq, as a first release packs them.
// It uses its Replay's one batch: one answer's frames at a time.
type Frames struct {
	b      *wire.Batch
	origin wire.Origin
	outs   []Output
}

// Frames returns the frames of a's outputs, sent from origin (the REPLAY_END
// follows the last of them).
func (r *Replay) Frames(a *Answer, origin wire.Origin) Frames {
	return Frames{b: r.batch, origin: origin, outs: a.Outputs}
}

// Next returns the next frame, unsealed and valid until the next call;
// false after the last. It does not allocate.
func (f *Frames) Next() ([]byte, bool) {
	for len(f.outs) > 0 {
		f.b.Reset(wire.TypeOutput, f.origin, f.outs[0].Seq)
		f.b.Add(f.outs[0].Payload) // fits: MaxOutputBytes is far below a datagram
		f.outs = f.outs[1:]
		for len(f.outs) > 0 && f.b.Add(f.outs[0].Payload) {
			f.outs = f.outs[1:]
		}
		if frame := f.b.Bytes(); wire.MarkReplay(frame) == nil {
			return frame, true
		}
	}
	f.b.Reset(wire.TypeOutput, f.origin, 1)
	return nil, false
}
