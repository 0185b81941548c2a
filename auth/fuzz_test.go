package auth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzVerify feeds arbitrary (msg, tag, epoch) to a keyring holding epochs
// 1 and 2, as a receiver would see them from the network. It never panics;
// it accepts exactly when the tag is the one Sign produces; and a rejection
// is one of the two sentinels.
func FuzzVerify(f *testing.F) {
	m := testMaster()
	r := NewKeyring(&m, 1)
	for _, e := range []uint64{1, 2} {
		if err := r.Install(e); err != nil {
			f.Fatal(err)
		}
	}
	for _, msg := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte{0x5a}, 1400)} {
		tag, _ := r.Sign(nil, msg, 1)
		f.Add(msg, tag, uint64(1))
		f.Add(msg, tag, uint64(2))
		f.Add(msg, tag[:TagLen-1], uint64(1))
		f.Add(msg, tag, uint64(3))
	}
	f.Fuzz(func(t *testing.T, msg, tag []byte, epoch uint64) {
		err := r.Verify(msg, tag, epoch)
		if epoch != 1 && epoch != 2 {
			if !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("unheld epoch %d: %v", epoch, err)
			}
			return
		}
		want, _ := r.Sign(nil, msg, epoch)
		if ok := bytes.Equal(want, tag); ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadMAC)) {
			t.Fatalf("Verify = %v, tag matches Sign: %v", err, ok)
		}
	})
}

// FuzzReplayFilter reads the input as (counter, limit selector) records and
// checks the filter against the map model at every step.
func FuzzReplayFilter(f *testing.F) {
	seed := func(counters ...uint64) []byte {
		var b []byte
		for _, c := range counters {
			b = binary.LittleEndian.AppendUint64(b, c)
			b = append(b, 0)
		}
		return b
	}
	f.Add(seed(0, 0, 1, 2, 1))
	f.Add(seed(5000, 5000-ReplayWindow, 5000-ReplayWindow-1, 5001))
	f.Add(seed(1<<63, 1, 1<<63+1, 1<<63))
	f.Add(seed(^uint64(0), ^uint64(0)-1))
	f.Fuzz(func(t *testing.T, data []byte) {
		var flt Filter
		model := replayModel{seen: map[uint64]bool{}}
		for i := 0; len(data) >= 9; i++ {
			c := binary.LittleEndian.Uint64(data)
			limit := CounterLimit
			if data[8]&1 == 1 { // a small limit now and then
				limit = uint64(data[8]) << 8
			}
			data = data[9:]
			if got, want := flt.ValidateCounter(c, limit), model.validate(c, limit); got != want {
				t.Fatalf("step %d: ValidateCounter(%d, %d) = %v, model %v", i, c, limit, got, want)
			}
		}
	})
}

// FuzzParseKeyFile: the parser never panics, refuses with ErrKeyFile, and
// whatever it accepts is a key whose canonical file parses back to it and
// differs from the input at most in hex case and the line ending.
func FuzzParseKeyFile(f *testing.F) {
	f.Add(FormatKeyFile(testMaster()))
	f.Add([]byte("seqbus-master-key v1 " + testHex + "\r\n"))
	f.Add([]byte("seqbus-master-key v1 " + testHex))
	f.Add([]byte("seqbus-master-key v2 " + testHex + "\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKeyFile(data)
		if err != nil {
			if !errors.Is(err, ErrKeyFile) || k != (MasterKey{}) {
				t.Fatalf("refusal %v returned a key or the wrong error", err)
			}
			return
		}
		canon := FormatKeyFile(k)
		if k2, err := ParseKeyFile(canon); err != nil || k2 != k {
			t.Fatalf("canonical form does not round-trip: %v", err)
		}
		in := bytes.ToLower(bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r")))
		if !bytes.Equal(in, bytes.TrimSuffix(canon, []byte("\n"))) {
			t.Fatalf("accepted %q, which is not the canonical %q up to case and line ending", data, canon)
		}
	})
}
