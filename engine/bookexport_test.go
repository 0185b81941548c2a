package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

type levelKey struct {
	inst  uint32
	side  Side
	price int64
}

// foldLevels applies MDLevel updates to a book built from the stream.
func foldLevels(t *testing.T, book map[levelKey]uint64, outs []emitted, upTo uint64) {
	t.Helper()
	for _, o := range outs {
		if o.to != MarketData {
			continue
		}
		md, err := ParseOutput(o.payload)
		if err != nil {
			t.Fatal(err)
		}
		if md.MDSeq > upTo || md.MDKind != MDLevel {
			continue
		}
		k := levelKey{md.Instrument, md.Side, md.Price}
		if md.Qty == 0 {
			delete(book, k)
		} else {
			book[k] = md.Qty
		}
	}
}

func exportMap(levels []BookLevel) map[levelKey]uint64 {
	m := map[levelKey]uint64{}
	for _, l := range levels {
		m[levelKey{l.Instrument, l.Side, l.Price}] = l.Qty
	}
	return m
}

// TestAppendBookIsTheFoldOfTheStream: after every command, the export
// equals the books a consumer builds from every MDLevel update so far,
// and a consumer that starts from an export at one point and applies the
// updates after it agrees with the stream at every later point.
func TestAppendBookIsTheFoldOfTheStream(t *testing.T) {
	cfg := Config{MaxInstruments: 3, MaxOrders: 64, MaxSessions: 4, DedupWindow: 8, MaxOrderQty: 50}
	e := mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	stream := map[levelKey]uint64{}
	var fromExport map[levelKey]uint64
	var rec recorder
	for seq := uint64(1); seq <= 2000; seq++ {
		side := Side(1 + rng.IntN(2))
		cmd := limitCmd(1+uint64(rng.IntN(3)), seq, uint32(rng.IntN(3)), side, 100+int64(rng.IntN(10)), 1+uint64(rng.IntN(20)))
		if rng.IntN(5) == 0 {
			cmd = marketCmd(1, seq, uint32(rng.IntN(3)), side, 1+uint64(rng.IntN(30)))
		}
		e.Apply(seq, cmd, &rec)
		outs := rec.take()
		foldLevels(t, stream, outs, e.MDSeq())
		exp := e.AppendBook(nil, AllInstruments)
		if got := exportMap(exp); fmt.Sprint(got) != fmt.Sprint(stream) {
			t.Fatalf("seq %d md %d: export %v, stream %v", seq, e.MDSeq(), got, stream)
		}
		if seq == 500 {
			fromExport = exportMap(exp)
		} else if seq > 500 {
			foldLevels(t, fromExport, outs, e.MDSeq())
			if fmt.Sprint(fromExport) != fmt.Sprint(stream) {
				t.Fatalf("seq %d: export at 500 plus the stream differs", seq)
			}
		}
	}
}

func TestAppendBookOrderAndFilter(t *testing.T) {
	e := mustNew(t, Config{MaxInstruments: 2, MaxOrders: 16, MaxSessions: 2, DedupWindow: 4, MaxOrderQty: 100})
	cmds := [][]byte{
		limitCmd(1, 1, 1, Buy, 10, 5), limitCmd(1, 2, 1, Buy, 12, 1), limitCmd(1, 3, 1, Sell, 20, 2),
		limitCmd(1, 4, 1, Sell, 15, 3), limitCmd(1, 5, 0, Buy, 7, 4), limitCmd(1, 6, 1, Buy, 12, 2),
	}
	for i, c := range cmds {
		e.Apply(uint64(i+1), c, nil)
	}
	want := []BookLevel{{0, Buy, 7, 4}, {1, Buy, 12, 3}, {1, Buy, 10, 5}, {1, Sell, 15, 3}, {1, Sell, 20, 2}}
	if got := e.AppendBook(nil, AllInstruments); !slices.Equal(got, want) {
		t.Fatalf("all: %v", got)
	}
	if got := e.AppendBook(nil, 1); !slices.Equal(got, want[1:]) {
		t.Fatalf("instrument 1: %v", got)
	}
	if got := e.AppendBook(nil, 2); len(got) != 0 {
		t.Fatalf("out of range: %v", got)
	}
	dst := make([]BookLevel, 0, 8)
	if a := testing.AllocsPerRun(100, func() { dst = e.AppendBook(dst[:0], AllInstruments) }); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}
