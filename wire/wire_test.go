package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

var testOrigin = Origin{Stream: 7, Node: 3, Epoch: 42}

// samples returns one valid encoding of every frame type.
func samples(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	data, err := AppendData(nil, TypeData, testOrigin, 100, []byte("hello"), []byte{}, []byte("world!"))
	if err != nil {
		t.Fatal(err)
	}
	out["data"] = data
	re, err := AppendData(nil, TypeRetransmit, testOrigin, 5, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	out["retransmit"] = re
	for _, typ := range []Type{TypeCommand, TypeOutput} {
		b, err := AppendData(nil, typ, testOrigin, 1, []byte("cmd"), []byte("cmd2"))
		if err != nil {
			t.Fatal(err)
		}
		out[typ.String()] = b
	}
	hb := Heartbeat{Origin: testOrigin, HighestSeq: 99, Released: 97, MDSeq: 1234, History: 0x5eed0001}
	out["heartbeat"] = hb.Append(nil)
	hbr := Heartbeat{Origin: testOrigin, HighestSeq: 99, Released: 97, MDSeq: 1234, LeaseReleased: true}
	out["heartbeat-lease-released"] = hbr.Append(nil)
	for k, b := range mdSamples(t) {
		out[k] = b
	}
	ack := Ack{Origin: testOrigin, Seq: 98, History: 0x5eed0001}
	out["ack"] = ack.Append(nil)
	leaving := Ack{Origin: testOrigin, Seq: 98, Leaving: true}
	out["ack-leaving"] = leaving.Append(nil)
	nl := NotLeading{Origin: testOrigin}
	out["notleading"] = nl.Append(nil)
	nak := Nak{Origin: testOrigin, Ack: 10}
	nak.Add(Range{11, 12})
	nak.Add(Range{20, 20})
	nak.Add(Range{30, 1 << 40})
	out["nak"] = nak.Append(nil)
	h := Hash{Origin: testOrigin, Seq: 1000, Hash: 0xdeadbeefcafef00d}
	out["hash"] = h.Append(nil)
	sr := SnapshotRequest{Origin: testOrigin, SnapshotSeq: 0, Offset: 4096}
	out["snapreq"] = sr.Append(nil)
	sc := SnapshotChunk{Origin: testOrigin, SnapshotSeq: 500, Total: 10, Offset: 4, Checksum: 0x1234, Data: []byte("abcdef")}
	b, err := sc.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	out["snapchunk"] = b
	ns := NeedSnapshot{Origin: testOrigin, FirstAvailable: 1000, SnapshotSeq: 900}
	out["needsnap"] = ns.Append(nil)
	rr := ReplayRequest{Origin: testOrigin, Session: 1 << 40, From: 17}
	out["replayreq"] = rr.Append(nil)
	for st := ReplayDone; st <= ReplayRefused; st++ {
		re := ReplayEnd{Origin: testOrigin, Session: 3, From: 5, Next: 9, Highest: 12, Status: st}
		out[fmt.Sprintf("replayend%d", st)] = re.Append(nil)
	}
	rp, err := AppendData(nil, TypeOutput, testOrigin, 1, []byte("out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := MarkReplay(rp); err != nil {
		t.Fatal(err)
	}
	out["replayoutput"] = rp
	ne := NewEpoch{Origin: testOrigin, PrevEpoch: 41, LastSeq: 777, History: 0x5eed0001}
	out["newepoch"] = ne.Append(nil)
	for _, typ := range []Type{TypeLeaseAcquire, TypeLeaseRenew, TypeLeaseGrant, TypeLeaseDeny, TypeLeaseQuery, TypeLeaseInfo} {
		l := Lease{Type: typ, Origin: testOrigin, Seq: 9, RequestID: 0xabc, Holder: 2, DurationNs: 1e9, RemainingNs: 5e8, InSyncVersion: 3, NMembers: 2, History: 0x5eed0001}
		l.Members[0], l.Members[1] = 2, 5
		out[typ.String()] = l.Append(nil)
	}
	return out
}

// reencode decodes a parsed frame into its typed form and encodes it again;
// a correct codec gives back the same bytes.
func reencode(t testing.TB, f *Frame) []byte {
	t.Helper()
	switch {
	case f.Type.Batched():
		var msgs [][]byte
		it := f.Messages()
		for {
			_, m, ok := it.Next()
			if !ok {
				break
			}
			msgs = append(msgs, m)
		}
		b, err := AppendData(nil, f.Type, f.Origin(), f.Seq, msgs...)
		if err != nil {
			t.Fatal(err)
		}
		if f.Flags&FlagReplay != 0 {
			must(t, MarkReplay(b))
		}
		return b
	case f.Type == TypeHeartbeat:
		x, err := DecodeHeartbeat(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeAck:
		x, err := DecodeAck(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeNotLeading:
		x, err := DecodeNotLeading(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeNak:
		x, err := DecodeNak(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeHash:
		x, err := DecodeHash(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeSnapshotRequest:
		x, err := DecodeSnapshotRequest(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeSnapshotChunk:
		x, err := DecodeSnapshotChunk(f)
		must(t, err)
		b, err := x.Append(nil)
		must(t, err)
		return b
	case f.Type == TypeNeedSnapshot:
		x, err := DecodeNeedSnapshot(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeNewEpoch:
		x, err := DecodeNewEpoch(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeReplayRequest:
		x, err := DecodeReplayRequest(f)
		must(t, err)
		return x.Append(nil)
	case f.Type == TypeReplayEnd:
		x, err := DecodeReplayEnd(f)
		must(t, err)
		return x.Append(nil)
	case IsLease(f.Type):
		x, err := DecodeLease(f)
		must(t, err)
		return x.Append(nil)
	case IsMDRecovery(f.Type):
		return reencodeMD(t, f)
	}
	t.Fatalf("no re-encoder for %s", f.Type)
	return nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripEveryType(t *testing.T) {
	for name, b := range samples(t) {
		t.Run(name, func(t *testing.T) {
			f, n, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if n != len(b) {
				t.Fatalf("consumed %d of %d", n, len(b))
			}
			if got := reencode(t, &f); !bytes.Equal(got, b) {
				t.Fatalf("re-encoded differs:\n got %x\nwant %x", got, b)
			}
			if f.Stream != testOrigin.Stream || f.Node != testOrigin.Node || f.Epoch != testOrigin.Epoch {
				t.Fatalf("origin %+v", f.Origin())
			}
		})
	}
}

func TestDecodedFields(t *testing.T) {
	s := samples(t)
	f, _, err := Parse(s["nak"])
	must(t, err)
	nak, err := DecodeNak(&f)
	must(t, err)
	if nak.N != 3 || nak.Ack != 10 || nak.Ranges[0] != (Range{11, 12}) || nak.Ranges[2] != (Range{30, 1 << 40}) {
		t.Fatalf("nak %+v", nak)
	}
	f, _, err = Parse(s["snapchunk"])
	must(t, err)
	sc, err := DecodeSnapshotChunk(&f)
	must(t, err)
	if sc.SnapshotSeq != 500 || sc.Total != 10 || sc.Offset != 4 || sc.Checksum != 0x1234 || string(sc.Data) != "abcdef" {
		t.Fatalf("chunk %+v", sc)
	}
	f, _, err = Parse(s["LEASE_GRANT"])
	must(t, err)
	l, err := DecodeLease(&f)
	must(t, err)
	if l.RequestID != 0xabc || l.Holder != 2 || l.DurationNs != 1e9 || l.RemainingNs != 5e8 ||
		l.InSyncVersion != 3 || l.NMembers != 2 || l.Members[1] != 5 || l.Seq != 9 {
		t.Fatalf("lease %+v", l)
	}
	f, _, err = Parse(s["data"])
	must(t, err)
	it := f.Messages()
	want := []string{"hello", "", "world!"}
	for i, w := range want {
		seq, m, ok := it.Next()
		if !ok || seq != uint64(100+i) || string(m) != w {
			t.Fatalf("message %d: %d %q %v", i, seq, m, ok)
		}
	}
	if _, _, ok := it.Next(); ok {
		t.Fatal("iterator yielded past the count")
	}
	if f.LastSeq() != 102 {
		t.Fatalf("LastSeq %d", f.LastSeq())
	}
}

func TestDecoderRefusesOtherType(t *testing.T) {
	f, _, err := Parse(samples(t)["ack"])
	must(t, err)
	decoders := []func() error{
		func() error { _, err := DecodeHeartbeat(&f); return err },
		func() error { _, err := DecodeNak(&f); return err },
		func() error { _, err := DecodeHash(&f); return err },
		func() error { _, err := DecodeSnapshotRequest(&f); return err },
		func() error { _, err := DecodeSnapshotChunk(&f); return err },
		func() error { _, err := DecodeNewEpoch(&f); return err },
		func() error { _, err := DecodeLease(&f); return err },
		func() error { _, err := DecodeNeedSnapshot(&f); return err },
	}
	for i, d := range decoders {
		if err := d(); !errors.Is(err, ErrType) {
			t.Errorf("decoder %d: %v, want ErrType", i, err)
		}
	}
	it := f.Messages()
	if _, _, ok := it.Next(); ok {
		t.Error("Messages of an ACK yielded a message")
	}
}

// TestEveryPrefix parses every truncation of every valid frame: each must
// fail with ErrShort or ErrLength, never panic, never succeed.
func TestEveryPrefix(t *testing.T) {
	for name, b := range samples(t) {
		for i := 0; i < len(b); i++ {
			_, _, err := Parse(b[:i:i])
			if err == nil {
				t.Fatalf("%s: prefix of %d/%d bytes parsed", name, i, len(b))
			}
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrLength) {
				t.Fatalf("%s: prefix %d: %v, want ErrShort or ErrLength", name, i, err)
			}
		}
	}
}

// TestEveryBitFlip flips each bit of each frame: the frame must be refused
// (the checksum catches what the field checks do not).
func TestEveryBitFlip(t *testing.T) {
	for name, b := range samples(t) {
		for i := 0; i < len(b)*8; i++ {
			c := bytes.Clone(b)
			c[i/8] ^= 1 << (i % 8)
			if _, _, err := Parse(c); err == nil {
				t.Fatalf("%s: flipped bit %d accepted", name, i)
			}
		}
	}
}

// corrupt rewrites a field of a valid frame and fixes the checksum, so the
// field check itself (not the CRC) must catch the lie.
func corrupt(b []byte, edit func(b []byte)) []byte {
	c := bytes.Clone(b)
	edit(c)
	binary.LittleEndian.PutUint32(c[offChecksum:], checksum(c[:HeaderLen+int(binary.LittleEndian.Uint32(c[offLength:]))]))
	return c
}

func TestMalformed(t *testing.T) {
	s := samples(t)
	put16 := func(off int, v uint16) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint16(b[off:], v) }
	}
	put64 := func(off int, v uint64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) }
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"bad magic", corrupt(s["ack"], put16(offMagic, 0xffff)), ErrMagic},
		{"bad version", corrupt(s["ack"], func(b []byte) { b[offVersion] = 9 }), ErrVersion},
		{"type zero", corrupt(s["ack"], func(b []byte) { b[offType] = 0 }), ErrType},
		{"type too big", corrupt(s["ack"], func(b []byte) { b[offType] = byte(typeMax) + 1 }), ErrType},
		{"unknown flag", corrupt(s["ack"], put16(offFlags, 2)), ErrFlags},
		{"lease-released flag on an ack", corrupt(s["ack"], put16(offFlags, FlagLeaseReleased)), ErrFlags},
		{"leaving flag on a heartbeat", corrupt(s["heartbeat"], put16(offFlags, FlagLeaving)), ErrFlags},
		{"leaving flag on a nak", corrupt(s["nak"], put16(offFlags, FlagLeaving)), ErrFlags},
		{"declined flag on a renew", corrupt(s["LEASE_RENEW"], put16(offFlags, FlagDeclined)), ErrFlags},
		{"mac flag without tag", corrupt(s["ack"], put16(offFlags, FlagMAC)), ErrLength},
		{"reserved set", corrupt(s["ack"], put16(offReserved, 1)), ErrFlags},
		{"length over buffer", func() []byte {
			c := bytes.Clone(s["ack"])
			binary.LittleEndian.PutUint32(c[offLength:], 10)
			return c
		}(), ErrLength},
		{"length over limit", func() []byte {
			c := bytes.Clone(s["ack"])
			binary.LittleEndian.PutUint32(c[offLength:], MaxPayloadLen+1)
			return c
		}(), ErrLength},
		{"bad checksum", func() []byte { c := bytes.Clone(s["ack"]); c[offChecksum]++; return c }(), ErrChecksum},
		{"data count zero", corrupt(s["data"], put16(offCount, 0)), ErrCount},
		{"data count too big for payload", corrupt(s["data"], put16(offCount, 1000)), ErrCount},
		{"data count one too many", corrupt(s["data"], put16(offCount, 4)), ErrCount},
		{"data count one too few", corrupt(s["data"], put16(offCount, 2)), ErrLength},
		{"data message length lies", corrupt(s["data"], put16(HeaderLen, 200)), ErrLength},
		{"data seq zero", corrupt(s["data"], put64(offSeq, 0)), ErrSeq},
		{"data seq overflows", corrupt(s["data"], put64(offSeq, ^uint64(0)-1)), ErrSeq},
		{"heartbeat with count", corrupt(s["heartbeat"], put16(offCount, 1)), ErrCount},
		{"nak no ranges", corrupt(s["nak"], put16(offCount, 0)), ErrCount},
		{"nak too many ranges", corrupt(s["nak"], put16(offCount, MaxNakRanges+1)), ErrCount},
		{"nak count lies", corrupt(s["nak"], put16(offCount, 2)), ErrLength},
		{"nak from zero", corrupt(s["nak"], put64(HeaderLen, 0)), ErrSeq},
		{"nak from after to", corrupt(s["nak"], put64(HeaderLen, 13)), ErrSeq},
		{"new epoch not above previous", corrupt(s["newepoch"], put64(HeaderLen, 42)), ErrSeq},
		{"chunk past total", corrupt(s["snapchunk"], put64(HeaderLen, 5)), ErrLength},
		{"chunk offset past total", corrupt(s["snapchunk"], put64(HeaderLen+8, 11)), ErrLength},
		{"lease too many members", corrupt(s["LEASE_RENEW"], put16(offCount, MaxMembers+1)), ErrCount},
		{"lease member count lies", corrupt(s["LEASE_RENEW"], put16(offCount, 1)), ErrLength},
		{"lease reserved word", corrupt(s["LEASE_RENEW"], func(b []byte) { b[HeaderLen+12] = 1 }), ErrFlags},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse(c.in)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestBatchPacksUpToDatagram(t *testing.T) {
	b := NewBatch(0)
	b.Reset(TypeData, testOrigin, 1)
	msg := make([]byte, 32)
	n := 0
	for b.Add(msg) {
		n++
		if n > 1000 {
			t.Fatal("batch never filled")
		}
	}
	// 1472 - 40 header = 1432 bytes; 34 bytes per 32-byte message.
	if want := (DefaultDatagramLen - HeaderLen) / (32 + MessageOverhead); n != want {
		t.Fatalf("packed %d messages, want %d", n, want)
	}
	frame := b.Bytes()
	if len(frame) > DefaultDatagramLen {
		t.Fatalf("frame of %d bytes exceeds the datagram", len(frame))
	}
	f, _, err := Parse(frame)
	must(t, err)
	if int(f.Count) != n || f.Seq != 1 || b.NextSeq() != uint64(n)+1 {
		t.Fatalf("count %d seq %d next %d", f.Count, f.Seq, b.NextSeq())
	}
	if b.Add(make([]byte, b.MaxMessage()+1)) {
		t.Fatal("accepted a message larger than an empty batch can hold")
	}
	b.Reset(TypeRetransmit, testOrigin, 50)
	if !b.Add(make([]byte, b.MaxMessage())) {
		t.Fatal("refused a message of exactly MaxMessage bytes")
	}
	if len(b.Bytes()) != DefaultDatagramLen {
		t.Fatalf("full frame is %d bytes", len(b.Bytes()))
	}
}

func TestBatchMessagesRoundTrip(t *testing.T) {
	b := NewBatch(9000)
	b.Reset(TypeData, testOrigin, 1<<32)
	var want [][]byte
	for i := 0; ; i++ {
		m := bytes.Repeat([]byte{byte(i)}, i%300)
		if !b.Add(m) {
			break
		}
		want = append(want, m)
	}
	f, _, err := Parse(b.Bytes())
	must(t, err)
	it := f.Messages()
	for i, w := range want {
		seq, m, ok := it.Next()
		if !ok || seq != 1<<32+uint64(i) || !bytes.Equal(m, w) {
			t.Fatalf("message %d wrong", i)
		}
	}
}

func TestAppendDataTooLarge(t *testing.T) {
	if _, err := AppendData(nil, TypeData, testOrigin, 1, make([]byte, MaxMessageLen+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
	if _, err := AppendData(nil, TypeData, testOrigin, 1, make([]byte, 40000), make([]byte, 40000)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
	if _, err := AppendData(nil, TypeAck, testOrigin, 1); !errors.Is(err, ErrType) {
		t.Fatalf("got %v", err)
	}
	sc := SnapshotChunk{Total: 3, Offset: 2, Data: []byte("ab")}
	if _, err := sc.Append(nil); !errors.Is(err, ErrLength) {
		t.Fatalf("got %v", err)
	}
}

func TestNakAdd(t *testing.T) {
	var n Nak
	if n.Add(Range{0, 1}) || n.Add(Range{5, 4}) {
		t.Fatal("accepted an invalid range")
	}
	for i := 0; i < MaxNakRanges; i++ {
		if !n.Add(Range{uint64(i*10 + 1), uint64(i*10 + 2)}) {
			t.Fatalf("refused range %d", i)
		}
	}
	if n.Add(Range{1000, 1000}) {
		t.Fatal("accepted a range past MaxNakRanges")
	}
	if n.Len() != len(n.Append(nil)) {
		t.Fatal("Len disagrees with Append")
	}
}

func TestLenMatchesAppend(t *testing.T) {
	hb := Heartbeat{}
	ack := Ack{}
	h := Hash{}
	sr := SnapshotRequest{}
	ne := NewEpoch{PrevEpoch: 0, Origin: Origin{Epoch: 1}}
	l := Lease{Type: TypeLeaseGrant, NMembers: 3}
	sc := SnapshotChunk{Total: 5, Data: []byte("hello")}
	scb, err := sc.Append(nil)
	must(t, err)
	for i, c := range []struct{ n, got int }{
		{hb.Len(), len(hb.Append(nil))}, {ack.Len(), len(ack.Append(nil))}, {h.Len(), len(h.Append(nil))},
		{sr.Len(), len(sr.Append(nil))}, {ne.Len(), len(ne.Append(nil))}, {l.Len(), len(l.Append(nil))},
		{sc.Len(), len(scb)},
	} {
		if c.n != c.got {
			t.Errorf("case %d: Len %d, Append wrote %d", i, c.n, c.got)
		}
	}
}

func TestParseConsumesOneFrame(t *testing.T) {
	s := samples(t)
	two := append(bytes.Clone(s["ack"]), s["hash"]...)
	f, n, err := Parse(two)
	must(t, err)
	if f.Type != TypeAck || n != HeaderLen+ackLen {
		t.Fatalf("type %s n %d", f.Type, n)
	}
	f, _, err = Parse(two[n:])
	must(t, err)
	if f.Type != TypeHash {
		t.Fatalf("second frame %s", f.Type)
	}
}

func TestTypeString(t *testing.T) {
	if TypeData.String() != "DATA" || Type(200).String() != "Type(200)" {
		t.Fatal(TypeData.String(), Type(200).String())
	}
}

func TestZeroAllocs(t *testing.T) {
	buf := make([]byte, 0, MaxFrameLen)
	msg := make([]byte, 32)
	b := NewBatch(0)
	s := samples(t)
	nak := Nak{Origin: testOrigin}
	nak.Add(Range{1, 2})
	l := Lease{Type: TypeLeaseRenew, NMembers: 1}
	cases := map[string]func(){
		"batch": func() {
			b.Reset(TypeData, testOrigin, 1)
			for b.Add(msg) {
			}
			_ = b.Bytes()
		},
		"parse+iterate": func() {
			f, _, err := Parse(s["data"])
			if err != nil {
				panic(err)
			}
			it := f.Messages()
			for {
				if _, _, ok := it.Next(); !ok {
					break
				}
			}
		},
		"nak encode+decode": func() {
			f, _, err := Parse(nak.Append(buf[:0]))
			if err != nil {
				panic(err)
			}
			_, _ = DecodeNak(&f)
		},
		"lease encode+decode": func() {
			f, _, err := Parse(l.Append(buf[:0]))
			if err != nil {
				panic(err)
			}
			_, _ = DecodeLease(&f)
		},
		"heartbeat": func() {
			hb := Heartbeat{Origin: testOrigin, HighestSeq: 5}
			f, _, err := Parse(hb.Append(buf[:0]))
			if err != nil {
				panic(err)
			}
			_, _ = DecodeHeartbeat(&f)
		},
	}
	for name, fn := range cases {
		if a := testing.AllocsPerRun(100, fn); a != 0 {
			t.Errorf("%s: %v allocs/op", name, a)
		}
	}
}

func ExampleBatch() {
	b := NewBatch(DefaultDatagramLen)
	b.Reset(TypeData, Origin{Stream: 1, Node: 1, Epoch: 1}, 1)
	b.Add([]byte("buy 100 @ 10"))
	b.Add([]byte("sell 50 @ 11"))
	f, _, err := Parse(b.Bytes())
	if err != nil {
		panic(err)
	}
	it := f.Messages()
	for {
		seq, msg, ok := it.Next()
		if !ok {
			break
		}
		fmt.Println(seq, string(msg))
	}
	// Output:
	// 1 buy 100 @ 10
	// 2 sell 50 @ 11
}

func TestRetype(t *testing.T) {
	s := samples(t)
	c := bytes.Clone(s["data"])
	must(t, Retype(c, TypeRetransmit))
	f, _, err := Parse(c)
	must(t, err)
	if f.Type != TypeRetransmit || f.Count != 3 {
		t.Fatalf("retyped to %s count %d", f.Type, f.Count)
	}
	if err := Retype(c, TypeAck); !errors.Is(err, ErrType) {
		t.Fatalf("retype to ACK: %v", err)
	}
	if err := Retype(bytes.Clone(s["ack"]), TypeData); !errors.Is(err, ErrType) {
		t.Fatalf("retype of an ACK: %v", err)
	}
	if err := Retype(c[:10], TypeData); !errors.Is(err, ErrShort) {
		t.Fatalf("retype of a stub: %v", err)
	}
}

// An ACK marked FlagLeaving decodes with Leaving, and an unmarked one
// without.
func TestAckLeaving(t *testing.T) {
	for _, leaving := range []bool{false, true} {
		a := Ack{Origin: testOrigin, Seq: 41, Leaving: leaving}
		f, _, err := Parse(a.Append(nil))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeAck(&f)
		if err != nil || got != a {
			t.Fatalf("round trip of %+v: %+v %v", a, got, err)
		}
	}
}

// ACK, HEARTBEAT and NEW_EPOCH carry the sender's history id, which
// HistoryOf reads without decoding the rest.
func TestHistoryID(t *testing.T) {
	const id = 0x0123456789abcdef
	a := Ack{Origin: testOrigin, Seq: 3, History: id, AskHistory: true}
	f, _, err := Parse(a.Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeAck(&f); err != nil || got != a || HistoryOf(&f) != id {
		t.Fatalf("ack round trip of %+v: %+v %v, HistoryOf %#x", a, got, err, HistoryOf(&f))
	}
	hb := Heartbeat{Origin: testOrigin, HighestSeq: 3, History: id}
	b := hb.Append(nil)
	b[offFlags] |= byte(FlagAskHistory) // only an ACK may ask
	binary.LittleEndian.PutUint32(b[offChecksum:], checksum(b))
	if _, _, err := Parse(b); !errors.Is(err, ErrFlags) {
		t.Fatalf("a HEARTBEAT asking for the history: %v", err)
	}
	if f, _, err = Parse(hb.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeHeartbeat(&f); err != nil || got != hb || HistoryOf(&f) != id {
		t.Fatalf("heartbeat round trip of %+v: %+v %v", hb, got, err)
	}
	ne := NewEpoch{Origin: Origin{Stream: 1, Node: 2, Epoch: 5}, PrevEpoch: 4, LastSeq: 9, History: id}
	if f, _, err = Parse(ne.Append(nil)); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeNewEpoch(&f); err != nil || got != ne || HistoryOf(&f) != id {
		t.Fatalf("new epoch round trip of %+v: %+v %v", ne, got, err)
	}
	// The layouts before the history id are refused, not misread.
	old := a.Append(nil)
	old = old[:HeaderLen]
	binary.LittleEndian.PutUint32(old[offLength:], 0)
	binary.LittleEndian.PutUint32(old[offChecksum:], checksum(old))
	if _, _, err := Parse(old); !errors.Is(err, ErrLength) {
		t.Fatalf("an ACK without a history id: %v", err)
	}
}

// A LEASE_RELEASE marked FlagDeclined decodes with Declined, and an
// unmarked one without.
func TestLeaseReleaseDeclined(t *testing.T) {
	for _, declined := range []bool{false, true} {
		l := Lease{Type: TypeLeaseRelease, Origin: testOrigin, RequestID: 9, Declined: declined}
		f, _, err := Parse(l.Append(nil))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeLease(&f)
		if err != nil || got != l {
			t.Fatalf("round trip of %+v: %+v %v", l, got, err)
		}
	}
}

// A HEARTBEAT marked FlagLeaseReleased decodes with LeaseReleased, and
// an unmarked one without.
func TestHeartbeatLeaseReleased(t *testing.T) {
	for _, released := range []bool{false, true} {
		hb := Heartbeat{Origin: testOrigin, HighestSeq: 7, Released: 6, MDSeq: 3, LeaseReleased: released}
		f, _, err := Parse(hb.Append(nil))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeHeartbeat(&f)
		if err != nil || got != hb {
			t.Fatalf("round trip of %+v: %+v %v", hb, got, err)
		}
	}
}

// A LEASE_DENY carries Run in the payload's word at 12; any other lease
// frame with that word set is refused, as before.
func TestLeaseDenyRun(t *testing.T) {
	l := Lease{Type: TypeLeaseDeny, Origin: testOrigin, RequestID: 9, Run: 3}
	f, _, err := Parse(l.Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeLease(&f); err != nil || got != l {
		t.Fatalf("round trip of %+v: %+v %v", l, got, err)
	}
	g := Lease{Type: TypeLeaseGrant, Origin: testOrigin, RequestID: 9, DurationNs: 1}
	b := g.Append(nil)
	b[HeaderLen+12] = 1
	binary.LittleEndian.PutUint32(b[offChecksum:], 0)
	binary.LittleEndian.PutUint32(b[offChecksum:], checksum(b))
	if _, _, err := Parse(b); !errors.Is(err, ErrFlags) {
		t.Fatalf("a grant with the run word set: %v", err)
	}
}
