package sequencer

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// FuzzSequencer drives the core with an op stream decoded from the input:
// submits of random sizes, flushes, ticks, and NAKs with arbitrary ranges
// (as a hostile standby could send). It checks that nothing panics, that
// every frame sent parses, and that every resent message is the original.
func FuzzSequencer(f *testing.F) {
	f.Add([]byte{0, 10, 0, 20, 1, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{0, 200}, 100))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out recorder
		h := &history{first: 3, size: 16}
		s := New(Config{RingFrames: 3, MaxFramesPerNak: 8}, 1, 0, h)
		var now int64
		for len(in) >= 2 {
			op, arg := in[0]%4, in[1]
			in = in[2:]
			now += int64(arg) * 1000
			switch op {
			case 0:
				seq, err := s.Submit(cmd(s.LastAssigned()+1, 16), now)
				if err != nil || seq != s.LastAssigned() {
					t.Fatalf("submit: %d %v", seq, err)
				}
				h.last = seq
			case 1:
				s.Flush(now)
			case 2:
				s.Tick(now)
			case 3:
				if len(in) < 16 {
					return
				}
				from := binary.LittleEndian.Uint64(in)
				to := binary.LittleEndian.Uint64(in[8:])
				in = in[16:]
				n := &wire.Nak{}
				if !n.Add(wire.Range{From: from, To: to}) {
					continue
				}
				out.take(s)
				out.unicast = nil
				s.OnNak(n, now)
				out.take(s)
				for seq, m := range messages(t, out.unicast) {
					if seq > s.HighestSent() || !bytes.Equal(m, cmd(seq, 16)) {
						t.Fatalf("resent seq %d wrong (sent %d)", seq, s.HighestSent())
					}
				}
			}
		}
		out.take(s)
		messages(t, out.multicast)
	})
}
