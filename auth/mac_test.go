package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// TestMACKnownAnswer checks the construction against RFC 4231 test case 2
// (key "Jefe"). HMAC pads a short key with zeros to the block size, so a
// 32-byte Key holding "Jefe" and 28 zero bytes is the same HMAC key.
func TestMACKnownAnswer(t *testing.T) {
	var k Key
	copy(k[:], "Jefe")
	full, _ := hex.DecodeString("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
	msg := []byte("what do ya want for nothing?")
	m := NewMAC(k)
	tag := m.Sign(nil, msg)
	if !bytes.Equal(tag, full[:TagLen]) {
		t.Fatalf("tag = %x, want the first %d bytes of %x", tag, TagLen, full)
	}
	if err := m.Verify(msg, full[:TagLen]); err != nil {
		t.Fatalf("Verify(known tag) = %v", err)
	}
}

func TestMACVerify(t *testing.T) {
	m := NewMAC(DataKey(new(testMaster()), 1, 1))
	msg := []byte("a frame header and its payload")
	tag := m.Sign(nil, msg)
	flipped := func(b []byte, i int) []byte {
		c := bytes.Clone(b)
		c[i] ^= 0x80
		return c
	}
	other := NewMAC(DataKey(new(testMaster()), 1, 2))
	tests := []struct {
		name string
		mac  *MAC
		msg  []byte
		tag  []byte
		want error
	}{
		{"good", m, msg, tag, nil},
		{"good again (state reset)", m, msg, tag, nil},
		{"empty message", m, nil, m.Sign(nil, nil), nil},
		{"flipped message", m, flipped(msg, 3), tag, ErrBadMAC},
		{"flipped tag first byte", m, msg, flipped(tag, 0), ErrBadMAC},
		{"flipped tag last byte", m, msg, flipped(tag, TagLen-1), ErrBadMAC},
		{"truncated message", m, msg[:len(msg)-1], tag, ErrBadMAC},
		{"short tag", m, msg, tag[:TagLen-1], ErrBadMAC},
		{"long tag", m, msg, append(bytes.Clone(tag), 0), ErrBadMAC},
		{"full 32-byte HMAC", m, msg, nil, ErrBadMAC},
		{"nil tag", m, msg, nil, ErrBadMAC},
		{"other key", other, msg, tag, ErrBadMAC},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.mac.Verify(tc.msg, tc.tag); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestMACSignAliasing signs a frame into its own buffer, as the wire
// integration will: the tag must be appended after the covered bytes and
// cover exactly them.
func TestMACSignAliasing(t *testing.T) {
	m := NewMAC(ClientKey(new(testMaster()), 3))
	buf := make([]byte, 0, 64+TagLen)
	buf = append(buf, bytes.Repeat([]byte{0xab}, 64)...)
	out := m.Sign(buf, buf)
	if len(out) != 64+TagLen || &out[0] != &buf[0] {
		t.Fatalf("Sign did not append in place: len %d", len(out))
	}
	if err := m.Verify(out[:64], out[64:]); err != nil {
		t.Fatalf("Verify of in-place signed frame: %v", err)
	}
	if !bytes.Equal(out[64:], m.Sign(nil, bytes.Repeat([]byte{0xab}, 64))) {
		t.Fatal("in-place tag differs from the tag of a copy")
	}
}
