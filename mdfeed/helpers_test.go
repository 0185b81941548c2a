package mdfeed

import (
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// addr is a requester's address in the tests.
type addr uint32

var origin = wire.Origin{Stream: 9, Node: 1, Epoch: 2}

// update is the reference engine's market-data payload for MD seq md.
func update(md uint64) []byte {
	return engine.AppendOutput(nil, &engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDLevel,
		MDSeq: md, Instrument: 1, Side: engine.Buy, Price: int64(md), Qty: 1})
}

func newFeed(t testing.TB, cfg Config) *Feed[addr] {
	t.Helper()
	f, err := New[addr](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fill adds MD seqs from..to, update md emitted by command cmdOf(md).
func fill(t testing.TB, f *Feed[addr], from, to uint64, cmdOf func(md uint64) uint64) {
	t.Helper()
	for md := from; md <= to; md++ {
		if !f.Add(cmdOf(md), update(md)) {
			t.Fatalf("Add(md %d) refused", md)
		}
	}
}

func sameCmd(md uint64) uint64 { return md }

// books is a BookExporter with levels levels at MD seq md.
type books struct {
	md     uint64
	levels int
}

func (b *books) MDSeq() uint64 { return b.md }

func (b *books) AppendBook(dst []engine.BookLevel, instrument uint32) []engine.BookLevel {
	for i := range b.levels {
		dst = append(dst, engine.BookLevel{Instrument: 1, Side: engine.Buy, Price: int64(i), Qty: 1})
	}
	return dst
}

// sent is one frame Next handed out, parsed.
type sent struct {
	to    addr
	typ   wire.Type
	seqs  []uint64 // MD_REPLAY / OUTPUT: the MD seqs of the updates
	first uint64   // frame seq
	st    wire.MDStatus
	snap  wire.MDSnapshot
}

// drain parses every frame Next has to send.
func drain(t testing.TB, f *Feed[addr]) []sent {
	t.Helper()
	var out []sent
	for i := 0; ; i++ {
		b, to, ok := f.Next(origin)
		if !ok {
			return out
		}
		if i > 100_000 {
			t.Fatal("Next never ends")
		}
		out = append(out, parse(t, b, to))
	}
}

func parse(t testing.TB, b []byte, to addr) sent {
	t.Helper()
	fr, _, err := wire.Parse(b)
	if err != nil {
		t.Fatalf("frame does not parse: %v", err)
	}
	s := sent{to: to, typ: fr.Type, first: fr.Seq}
	switch fr.Type {
	case wire.TypeMDReplay, wire.TypeOutput:
		m := fr.Messages()
		for {
			_, msg, ok := m.Next()
			if !ok {
				break
			}
			o, err := engine.ParseOutput(msg)
			if err != nil {
				t.Fatal(err)
			}
			s.seqs = append(s.seqs, o.MDSeq)
		}
	case wire.TypeMDStatus:
		s.st, err = wire.DecodeMDStatus(&fr)
	case wire.TypeMDSnapshot:
		s.snap, err = wire.DecodeMDSnapshot(&fr, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publishAll runs Publish until it returns 0 and returns the frames.
func publishAll(t testing.TB, f *Feed[addr], released, stateMD uint64) []sent {
	t.Helper()
	b := wire.NewBatch(0)
	var out []sent
	for k := f.Publish(b, origin, released, stateMD); k > 0; k = f.Publish(b, origin, released, stateMD) {
		s := parse(t, b.Bytes(), 0)
		if len(s.seqs) != k {
			t.Fatalf("Publish said %d, the frame holds %d", k, len(s.seqs))
		}
		out = append(out, s)
	}
	return out
}

func seqsOf(frames []sent) []uint64 {
	var out []uint64
	for _, s := range frames {
		out = append(out, s.seqs...)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
