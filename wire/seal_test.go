package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestSeal: a sealed frame parses with FlagMAC, exposes the signed bytes
// and the tag, and reports the tag in n; flipping the flag back or
// truncating the tag is refused.
func TestSeal(t *testing.T) {
	b := NewBatch(DefaultDatagramLen)
	b.Reset(TypeData, Origin{Stream: 3, Node: 1, Epoch: 7}, 100)
	b.Add([]byte("hello"))
	plain := bytes.Clone(b.Bytes())
	tag := bytes.Repeat([]byte{0xAB}, TagLen)
	sealed := append(Seal(nil, plain), tag...)
	f, n, err := Parse(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(plain)+TagLen || f.Flags != FlagMAC || !bytes.Equal(f.Tag, tag) || !bytes.Equal(f.Signed, sealed[:len(plain)]) {
		t.Fatalf("n %d flags %#x tag %x signed %d bytes", n, f.Flags, f.Tag, len(f.Signed))
	}
	if string(f.Signed[HeaderLen:]) != string(plain[HeaderLen:]) {
		t.Fatal("payload changed by sealing")
	}
	// Unsigned frames have no tag.
	if f, _, err := Parse(plain); err != nil || f.Tag != nil || f.Signed != nil {
		t.Fatalf("plain frame: %v tag %v", err, f.Tag)
	}
	// The flag is under the checksum: clearing it is a checksum error.
	stripped := bytes.Clone(sealed)
	stripped[offFlags] = 0
	if _, _, err := Parse(stripped); !errors.Is(err, ErrChecksum) {
		t.Fatalf("flag cleared: %v, want ErrChecksum", err)
	}
	if _, _, err := Parse(sealed[:len(sealed)-1]); !errors.Is(err, ErrLength) {
		t.Fatalf("truncated tag: %v, want ErrLength", err)
	}
}
