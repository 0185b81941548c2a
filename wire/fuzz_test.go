package wire

import (
	"bytes"
	"testing"
)

// FuzzParse is seeded from the encoder. For any input: Parse never panics;
// when it accepts, n is within the input, and decoding then re-encoding the
// frame gives back exactly the bytes it consumed.
func FuzzParse(f *testing.F) {
	for _, b := range samples(f) {
		f.Add(b)
	}
	b := NewBatch(0)
	b.Reset(TypeData, testOrigin, 1)
	for b.Add([]byte("0123456789")) {
	}
	f.Add(bytes.Clone(b.Bytes()))
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)] // an over-read past len would panic
		fr, n, err := Parse(in)
		if err != nil {
			return
		}
		if n < HeaderLen || n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
		if got := reencode(t, &fr); !bytes.Equal(got, in[:n]) {
			t.Fatalf("round trip differs:\n got %x\nwant %x", got, in[:n])
		}
	})
}
