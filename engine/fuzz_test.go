package engine

import (
	"bytes"
	"testing"
)

// splitCommands cuts fuzz input into commands: a length byte (mod 48),
// then that many bytes.
func splitCommands(data []byte) [][]byte {
	var cmds [][]byte
	for len(data) > 0 {
		n := int(data[0]) % 48
		data = data[1:]
		n = min(n, len(data))
		cmds = append(cmds, data[:n])
		data = data[n:]
	}
	return cmds
}

func joinCommands(cmds ...[]byte) []byte {
	var b []byte
	for _, c := range cmds {
		b = append(b, byte(len(c)))
		b = append(b, c...)
	}
	return b
}

// FuzzApply feeds arbitrary bytes as commands: no panic, every output
// parses and is addressed consistently, the engine agrees with the model,
// invariants and the incremental hash hold, and the final state survives a
// snapshot round trip.
func FuzzApply(f *testing.F) {
	f.Add(joinCommands(limitCmd(1, 1, 0, Buy, 100, 5), limitCmd(2, 1, 0, Sell, 99, 7), cancelCmd(2, 2, 2)))
	f.Add(joinCommands(limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 100, 1), marketCmd(2, 1, 0, Buy, 5), limitCmd(1, 1, 0, Sell, 100, 1)))
	f.Add(joinCommands(limitCmd(1, 1, 1, Buy, 1, 1), limitCmd(1, 9, 1, Buy, 1, 1), limitCmd(1, 2, 1, Buy, 1, 1), limitCmd(3, 1, 0, Buy, 1, 1)))
	f.Add([]byte{})
	f.Add([]byte{16, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	cfg := Config{MaxInstruments: 2, MaxOrders: 6, MaxSessions: 3, DedupWindow: 4, MaxOrderQty: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := mustNew(t, cfg)
		m := newModel(cfg)
		var rec recorder
		for i, c := range splitCommands(data) {
			e.Apply(uint64(i+1), c, &rec)
			got := rec.take()
			want := m.apply(c)
			if len(got) != len(want) {
				t.Fatalf("cmd %d: %d outputs, model %d", i, len(got), len(want))
			}
			for j, x := range got {
				o, err := ParseOutput(x.payload)
				if err != nil {
					t.Fatalf("cmd %d: unparsable output %x", i, x.payload)
				}
				if (o.Kind == KindMarketData) != (x.to == MarketData) {
					t.Fatalf("cmd %d: %v addressed to %d", i, o.Kind, x.to)
				}
				if x.to != want[j].to || o != want[j].o {
					t.Fatalf("cmd %d output %d: %s, model %s", i, j, format(x.to, o), format(want[j].to, want[j].o))
				}
			}
		}
		if err := checkInvariants(e); err != nil {
			t.Fatal(err)
		}
		var snap bytes.Buffer
		if err := e.Snapshot(&snap); err != nil {
			t.Fatal(err)
		}
		r := mustNew(t, cfg)
		if err := r.Restore(&snap); err != nil || r.StateHash() != e.StateHash() {
			t.Fatalf("snapshot round trip: %v", err)
		}
	})
}
