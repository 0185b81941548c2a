package wire

import (
	"bytes"
	"errors"
	"testing"
)

func mdSamples(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	rq := MDRequest{Origin: testOrigin, Kind: MDRequestRange, First: 40, Count: 12}
	out["mdrequest"] = rq.Append(nil)
	sq := MDRequest{Origin: testOrigin, Kind: MDRequestSnapshot, Instrument: AllInstruments}
	out["mdrequest-snapshot"] = sq.Append(nil)
	rp, err := AppendData(nil, TypeMDReplay, testOrigin, 40, []byte("md40"), []byte("md41"))
	must(t, err)
	out["mdreplay"] = rp
	st := MDStatus{Origin: testOrigin, First: 3, Code: MDTooOld, Oldest: 100, Newest: 200}
	out["mdstatus"] = st.Append(nil)
	sn := MDSnapshot{Origin: testOrigin, MDSeq: 77, Instrument: 2, Chunk: 1, Chunks: 3,
		Levels: []MDLevel{{Instrument: 2, Side: 1, Price: -5, Qty: 10}, {Instrument: 2, Side: 2, Price: 1 << 40, Qty: 1}}}
	b, err := sn.Append(nil)
	must(t, err)
	out["mdsnapshot"] = b
	return out
}

func reencodeMD(t testing.TB, f *Frame) []byte {
	t.Helper()
	switch f.Type {
	case TypeMDRequest:
		x, err := DecodeMDRequest(f)
		must(t, err)
		return x.Append(nil)
	case TypeMDStatus:
		x, err := DecodeMDStatus(f)
		must(t, err)
		return x.Append(nil)
	case TypeMDSnapshot:
		x, err := DecodeMDSnapshot(f, nil)
		must(t, err)
		b, err := x.Append(nil)
		must(t, err)
		return b
	}
	t.Fatalf("no MD re-encoder for %s", f.Type)
	return nil
}

func TestMDRecoveryRoundTripAndTruncation(t *testing.T) {
	for name, b := range mdSamples(t) {
		f, n, err := Parse(b)
		if err != nil || n != len(b) {
			t.Fatalf("%s: Parse: n %d of %d, %v", name, n, len(b), err)
		}
		if got := reencode(t, &f); !bytes.Equal(got, b) {
			t.Fatalf("%s: round trip differs", name)
		}
		for i := range b {
			if _, _, err := Parse(b[:i]); err == nil {
				t.Fatalf("%s: prefix of %d bytes parsed", name, i)
			}
		}
	}
}

func TestMDRecoveryRefusesBadFields(t *testing.T) {
	bad := []struct {
		name string
		b    []byte
	}{
		{"range from 0", (&MDRequest{Kind: MDRequestRange, First: 0, Count: 1}).Append(nil)},
		{"range of 0", (&MDRequest{Kind: MDRequestRange, First: 1, Count: 0}).Append(nil)},
		{"unknown kind", (&MDRequest{Kind: 9, First: 1, Count: 1}).Append(nil)},
		{"snapshot with a range", (&MDRequest{Kind: MDRequestSnapshot, First: 1}).Append(nil)},
		{"status code 0", (&MDStatus{Code: 0}).Append(nil)},
		{"status code 5", (&MDStatus{Code: 5}).Append(nil)},
	}
	for _, c := range bad {
		if _, _, err := Parse(c.b); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if _, err := (&MDSnapshot{Chunk: 1, Chunks: 1}).Append(nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("chunk 1 of 1 encoded: %v", err)
	}
	// A chunk whose count disagrees with its levels.
	b, err := (&MDSnapshot{Chunks: 1, Levels: []MDLevel{{Side: 1}}}).Append(nil)
	must(t, err)
	b[offCount] = 2
	b = finish(b, 0)
	if _, _, err := Parse(b); err == nil {
		t.Error("count 2 with one level parsed")
	}
}

func TestMDSnapshotLevelsFitTheDatagram(t *testing.T) {
	k := MaxMDSnapshotLevels(DefaultDatagramLen - TagLen)
	s := MDSnapshot{Chunks: 1, Levels: make([]MDLevel, k)}
	if s.Len() > DefaultDatagramLen-TagLen {
		t.Fatalf("%d levels take %d bytes", k, s.Len())
	}
	s.Levels = make([]MDLevel, k+1)
	if s.Len() <= DefaultDatagramLen-TagLen {
		t.Fatalf("%d levels would fit too", k+1)
	}
}

func TestDecodeMDSnapshotReusesLevels(t *testing.T) {
	b := mdSamples(t)["mdsnapshot"]
	f, _, err := Parse(b)
	must(t, err)
	levels := make([]MDLevel, 0, 8)
	if a := testing.AllocsPerRun(100, func() { _, _ = DecodeMDSnapshot(&f, levels) }); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

// FuzzMDRecovery is seeded from the encoders: any input either fails to
// parse or decodes and re-encodes to the bytes consumed.
func FuzzMDRecovery(f *testing.F) {
	for _, b := range mdSamples(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		fr, n, err := Parse(in)
		if err != nil {
			return
		}
		if got := reencode(t, &fr); !bytes.Equal(got, in[:n]) {
			t.Fatalf("round trip differs:\n got %x\nwant %x", got, in[:n])
		}
	})
}
