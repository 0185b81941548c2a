package standby

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzWindow decodes the input into a config and a sequence of operations
// (the network decides seqs, payload sizes, heartbeats; the snapshot
// installer decides resets) and checks after every one that the Window
// agrees with the model, never panics, applies a gap-free log, leaves
// everything unchanged on a rejected message, and never moves Ack
// backwards except by a rewinding ResetTo.
//
// Layout: byte 0 MaxPending-1 (mod 70), byte 1 MaxMessageBytes-1 (mod 16),
// byte 2 start selector, then 3-byte operations (kind, a, b).
func FuzzWindow(f *testing.F) {
	f.Add([]byte{3, 7, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 7, 4, 0})
	f.Add([]byte{0, 0, 2, 0, 3, 0, 6, 1, 0, 0, 1, 0, 7, 8, 0})
	f.Add([]byte{69, 15, 1, 0, 70, 0, 5, 200, 1, 3, 9, 40, 4, 1, 0, 6, 255, 0, 7, 8, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		cfg := Config{MaxPending: 1 + int(data[0])%70, MaxMessageBytes: 1 + int(data[1])%16}
		switch data[2] % 3 {
		case 1:
			cfg.Start = uint64(data[2])
		case 2:
			cfg.Start = ^uint64(0) - uint64(data[2]>>2)
		}
		h := mustHarness(cfg)
		m := newModel(cfg)
		window := uint64(cfg.MaxPending) + 4
		lastAck := h.w.Ack()
		for ops := data[3:]; len(ops) >= 3; ops = ops[3:] {
			kind, a, b := ops[0]%8, uint64(ops[1]), uint64(ops[2])
			logLen, next := len(h.log), h.w.Applied()+1
			switch kind {
			case 0, 1, 2, 3, 4:
				seq := m.applied + (a|b<<8)%window - 1 // Applied-1 .. Applied+MaxPending+2
				switch kind {
				case 3:
					seq = binary.LittleEndian.Uint64([]byte{byte(a), 0, 0, byte(b), 0, 0, 0, byte(a ^ b)})
				case 4:
					seq = m.applied - a // old duplicates, wrapping at 0
				}
				payload := payloadFor(seq, m.maxBytes)
				if kind == 2 && b&1 == 1 {
					payload = make([]byte, m.maxBytes+1+int(b>>1)%4)
				}
				before := observe(h.w, len(h.log))
				gap, hasGap, err := h.deliver(seq, payload)
				wantGap, wantHasGap, wantErr := m.onMessage(seq, payload)
				if err != wantErr || gap != wantGap || hasGap != wantHasGap {
					t.Fatalf("OnMessage(%d, %d bytes) = (%v, %v, %v), model (%v, %v, %v)",
						seq, len(payload), gap, hasGap, err, wantGap, wantHasGap, wantErr)
				}
				if err != nil && !observe(h.w, len(h.log)).equal(before) {
					t.Fatalf("rejected OnMessage(%d) changed observables", seq)
				}
				if errors.Is(err, ErrMessageTooLarge) != (len(payload) > m.maxBytes) {
					t.Fatalf("OnMessage(%d, %d bytes): err %v", seq, len(payload), err)
				}
			case 5:
				seq := m.applied + a<<(b%64)
				h.w.ObserveHighest(seq)
				m.observeHighest(seq)
			case 6:
				s := m.applied + a%window - 2
				next = s + 1
				gap, hasGap := h.w.ResetTo(s)
				wantGap, wantHasGap := m.resetTo(s)
				if gap != wantGap || hasGap != wantHasGap {
					t.Fatalf("ResetTo(%d) = (%v, %v), model (%v, %v)", s, gap, hasGap, wantGap, wantHasGap)
				}
				lastAck = min(lastAck, h.w.Ack())
			case 7:
				n := int(a % 10)
				got := h.w.Gaps(make([]Range, 0, n))
				want := m.gaps(n)
				if len(got) != len(want) {
					t.Fatalf("Gaps(cap %d) = %v, model %v", n, got, want)
				}
				for i := range got {
					if got[i] != want[i] || got[i].From > got[i].To {
						t.Fatalf("Gaps(cap %d) = %v, model %v", n, got, want)
					}
				}
			}
			if diff := compare(h, m); diff != "" {
				t.Fatalf("after op %d (%d,%d): %s", kind, a, b, diff)
			}
			if h.w.Ack() < lastAck {
				t.Fatalf("Ack went back from %d to %d", lastAck, h.w.Ack())
			}
			lastAck = h.w.Ack()
			// Whatever this operation applied continues the log without a
			// gap from where Applied stood (or from the snapshot).
			for i, e := range h.log[logLen:] {
				if e.seq != next+uint64(i) {
					t.Fatalf("applied %d, want %d", e.seq, next+uint64(i))
				}
			}
		}
	})
}
