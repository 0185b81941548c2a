package wire

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestReplayFramesRefuseBadFields(t *testing.T) {
	rr := ReplayRequest{Origin: testOrigin, Session: 9, From: 1}
	re := ReplayEnd{Origin: testOrigin, Session: 9, From: 1, Next: 2, Highest: 3}
	hb := Heartbeat{Origin: testOrigin, HighestSeq: 1}
	// reseal rewrites a field and the checksum, so only the field is wrong.
	reseal := func(b []byte, off int, v uint64, size int) []byte {
		c := append([]byte(nil), b...)
		if size == 1 {
			c[off] = byte(v)
		} else {
			binary.LittleEndian.PutUint64(c[off:], v)
		}
		finish(c, 0)
		return c
	}
	flags := func(b []byte, v uint16) []byte {
		c := append([]byte(nil), b...)
		binary.LittleEndian.PutUint16(c[offFlags:], v)
		finish(c, 0)
		return c
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"request from 0", reseal(rr.Append(nil), offSeq, 0, 8), ErrSeq},
		{"request session 0", reseal(rr.Append(nil), HeaderLen, 0, 8), ErrSeq},
		{"end session 0", reseal(re.Append(nil), HeaderLen, 0, 8), ErrSeq},
		{"end status 3", reseal(re.Append(nil), HeaderLen+24, 3, 1), ErrLength},
		{"replay flag on a heartbeat", flags(hb.Append(nil), FlagReplay), ErrFlags},
		{"replay flag on a request", flags(rr.Append(nil), FlagReplay), ErrFlags},
		{"unknown flag", flags(rr.Append(nil), 0x0004), ErrFlags},
	}
	for _, tc := range tests {
		if _, _, err := Parse(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := MarkReplay(hb.Append(nil)); !errors.Is(err, ErrType) {
		t.Errorf("MarkReplay of a heartbeat: %v", err)
	}
}

// TestSealKeepsReplayFlag: a replayed OUTPUT frame stays marked once sealed.
func TestSealKeepsReplayFlag(t *testing.T) {
	b, err := AppendData(nil, TypeOutput, testOrigin, 1, []byte("x"))
	must(t, err)
	must(t, MarkReplay(b))
	s := Seal(nil, b)
	s = append(s, make([]byte, TagLen)...)
	f, _, err := Parse(s)
	must(t, err)
	if f.Flags != FlagMAC|FlagReplay {
		t.Fatalf("flags %#x", f.Flags)
	}
}

// FuzzReplay is seeded from the session encoders: Parse never panics on
// them, and whatever it accepts decodes and re-encodes to the same bytes.
func FuzzReplay(f *testing.F) {
	rr := ReplayRequest{Origin: testOrigin, Session: 5, From: 7}
	f.Add(rr.Append(nil))
	re := ReplayEnd{Origin: testOrigin, Session: 5, From: 7, Next: 8, Highest: 9, Status: ReplayTooOld}
	f.Add(re.Append(nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		fr, n, err := Parse(in)
		if err != nil || fr.Flags&FlagMAC != 0 {
			return
		}
		var got []byte
		switch fr.Type {
		case TypeReplayRequest:
			x, err := DecodeReplayRequest(&fr)
			must(t, err)
			got = x.Append(nil)
			if len(got) != x.Len() {
				t.Fatalf("encoded %d bytes, Len says %d", len(got), x.Len())
			}
		case TypeReplayEnd:
			x, err := DecodeReplayEnd(&fr)
			must(t, err)
			got = x.Append(nil)
		default:
			return
		}
		if string(got) != string(in[:n]) {
			t.Fatalf("round trip differs:\n got %x\nwant %x", got, in[:n])
		}
	})
}
