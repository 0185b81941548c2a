package engine

import (
	"slices"
	"strings"
	"testing"
)

// TestMatchingRules applies setup commands, then one command, and compares
// that command's outputs with the expected ones.
func TestMatchingRules(t *testing.T) {
	big := testConfig()
	big.MaxOrders = 16
	tests := []struct {
		name  string
		cfg   *Config
		setup [][]byte
		cmd   []byte
		want  []string
	}{{
		name: "rest on empty book",
		cmd:  limitCmd(1, 1, 0, Buy, 100, 5),
		want: []string{"s1 ack c1 o1 i0 B L 100x5", "md1 level i0 B 100x5"},
	}, {
		name:  "no cross rests on both sides",
		setup: [][]byte{limitCmd(1, 1, 0, Buy, 99, 5)},
		cmd:   limitCmd(2, 1, 0, Sell, 100, 5),
		want:  []string{"s2 ack c1 o2 i0 S L 100x5", "md2 level i0 S 100x5"},
	}, {
		name:  "price priority: best ask first, at the resting price",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 101, 5), limitCmd(1, 2, 0, Sell, 100, 5)},
		cmd:   limitCmd(2, 1, 0, Buy, 101, 5),
		want: []string{
			"s2 ack c1 o3 i0 B L 101x5",
			"s2 exec c1 o3/o2 t1 i0 B 100x5 leaves 0 agg",
			"s1 exec c2 o2/o3 t1 i0 S 100x5 leaves 0 pas",
			"md3 trade i0 B 100x5 t1",
			"md4 level i0 S 100x0",
		},
	}, {
		name:  "price priority: best bid first for a sell",
		setup: [][]byte{limitCmd(1, 1, 0, Buy, 100, 2), limitCmd(1, 2, 0, Buy, 101, 2)},
		cmd:   limitCmd(2, 1, 0, Sell, 99, 3),
		want: []string{
			"s2 ack c1 o3 i0 S L 99x3",
			"s2 exec c1 o3/o2 t1 i0 S 101x2 leaves 1 agg",
			"s1 exec c2 o2/o3 t1 i0 B 101x2 leaves 0 pas",
			"md3 trade i0 S 101x2 t1",
			"md4 level i0 B 101x0",
			"s2 exec c1 o3/o1 t2 i0 S 100x1 leaves 0 agg",
			"s1 exec c1 o1/o3 t2 i0 B 100x1 leaves 1 pas",
			"md5 trade i0 S 100x1 t2",
			"md6 level i0 B 100x1",
		},
	}, {
		name:  "time priority at equal price",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 2), limitCmd(3, 1, 0, Sell, 100, 2)},
		cmd:   limitCmd(2, 1, 0, Buy, 100, 3),
		want: []string{
			"s2 ack c1 o3 i0 B L 100x3",
			"s2 exec c1 o3/o1 t1 i0 B 100x2 leaves 1 agg",
			"s1 exec c1 o1/o3 t1 i0 S 100x2 leaves 0 pas",
			"md3 trade i0 B 100x2 t1",
			"md4 level i0 S 100x2",
			"s2 exec c1 o3/o2 t2 i0 B 100x1 leaves 0 agg",
			"s3 exec c1 o2/o3 t2 i0 S 100x1 leaves 1 pas",
			"md5 trade i0 B 100x1 t2",
			"md6 level i0 S 100x1",
		},
	}, {
		name:  "partial fill of the aggressor rests the remainder at its limit",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 2)},
		cmd:   limitCmd(2, 1, 0, Buy, 101, 5),
		want: []string{
			"s2 ack c1 o2 i0 B L 101x5",
			"s2 exec c1 o2/o1 t1 i0 B 100x2 leaves 3 agg",
			"s1 exec c1 o1/o2 t1 i0 S 100x2 leaves 0 pas",
			"md2 trade i0 B 100x2 t1",
			"md3 level i0 S 100x0",
			"md4 level i0 B 101x3",
		},
	}, {
		name:  "limit stops at its price",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 102, 1)},
		cmd:   limitCmd(2, 1, 0, Buy, 101, 2),
		want: []string{
			"s2 ack c1 o3 i0 B L 101x2",
			"s2 exec c1 o3/o1 t1 i0 B 100x1 leaves 1 agg",
			"s1 exec c1 o1/o3 t1 i0 S 100x1 leaves 0 pas",
			"md3 trade i0 B 100x1 t1",
			"md4 level i0 S 100x0",
			"md5 level i0 B 101x1",
		},
	}, {
		name:  "market order sweeps levels, never rests",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 105, 1)},
		cmd:   marketCmd(2, 1, 0, Buy, 5),
		want: []string{
			"s2 ack c1 o3 i0 B M 0x5",
			"s2 exec c1 o3/o1 t1 i0 B 100x1 leaves 4 agg",
			"s1 exec c1 o1/o3 t1 i0 S 100x1 leaves 0 pas",
			"md3 trade i0 B 100x1 t1",
			"md4 level i0 S 100x0",
			"s2 exec c1 o3/o2 t2 i0 B 105x1 leaves 3 agg",
			"s1 exec c2 o2/o3 t2 i0 S 105x1 leaves 0 pas",
			"md5 trade i0 B 105x1 t2",
			"md6 level i0 S 105x0",
			"s2 cancelled c1 o3 i0 B 3 market-unfilled",
		},
	}, {
		name: "market order on an empty book is cancelled",
		cmd:  marketCmd(2, 1, 0, Sell, 5),
		want: []string{"s2 ack c1 o1 i0 S M 0x5", "s2 cancelled c1 o1 i0 S 5 market-unfilled"},
	}, {
		name:  "instruments are independent",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1)},
		cmd:   limitCmd(2, 1, 1, Buy, 100, 1),
		want:  []string{"s2 ack c1 o2 i1 B L 100x1", "md2 level i1 B 100x1"},
	}, {
		name:  "self trade is allowed",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1)},
		cmd:   limitCmd(1, 2, 0, Buy, 100, 1),
		want: []string{
			"s1 ack c2 o2 i0 B L 100x1",
			"s1 exec c2 o2/o1 t1 i0 B 100x1 leaves 0 agg",
			"s1 exec c1 o1/o2 t1 i0 S 100x1 leaves 0 pas",
			"md2 trade i0 B 100x1 t1",
			"md3 level i0 S 100x0",
		},
	}, {
		name:  "cancel",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 100, 4)},
		cmd:   cancelCmd(1, 3, 2),
		want:  []string{"s1 cancelled c3 o2 i0 S 4 requested", "md3 level i0 S 100x1"},
	}, {
		name:  "cancel of another session's order",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1)},
		cmd:   cancelCmd(2, 1, 1),
		want:  []string{"s2 reject c1 unknown-order"},
	}, {
		name:  "cancel twice",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1), cancelCmd(1, 2, 1)},
		cmd:   cancelCmd(1, 3, 1),
		want:  []string{"s1 reject c3 unknown-order"},
	}, {
		name:  "cancel of a filled order",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(2, 1, 0, Buy, 100, 1)},
		cmd:   cancelCmd(1, 2, 1),
		want:  []string{"s1 reject c2 unknown-order"},
	}, {
		name:  "cancel of order id 0 (the index's empty-slot key)",
		setup: [][]byte{limitCmd(1, 1, 0, Sell, 100, 1)},
		cmd:   cancelCmd(1, 2, 0),
		want:  []string{"s1 reject c2 unknown-order"},
	}, {
		name: "cancel of an order id never assigned",
		cmd:  cancelCmd(1, 1, 99),
		want: []string{"s1 reject c1 unknown-order"},
	}, {
		name: "reject unknown instrument",
		cmd:  limitCmd(1, 1, 2, Buy, 100, 1),
		want: []string{"s1 reject c1 unknown-instrument"},
	}, {
		name: "reject bad side",
		cmd:  newCmd(1, 1, Request{Op: OpNewOrder, Side: 3, Type: Limit, Price: 1, Qty: 1}),
		want: []string{"s1 reject c1 bad-side"},
	}, {
		name: "reject bad type",
		cmd:  newCmd(1, 1, Request{Op: OpNewOrder, Side: Buy, Type: 0, Price: 1, Qty: 1}),
		want: []string{"s1 reject c1 bad-type"},
	}, {
		name: "reject qty 0",
		cmd:  limitCmd(1, 1, 0, Buy, 100, 0),
		want: []string{"s1 reject c1 bad-qty"},
	}, {
		name: "reject qty above max",
		cmd:  limitCmd(1, 1, 0, Buy, 100, 1001),
		want: []string{"s1 reject c1 bad-qty"},
	}, {
		name: "reject unknown op",
		cmd:  AppendCommand(nil, 1, 1, []byte{9, 0, 0}),
		want: []string{"s1 reject c1 bad-command"},
	}, {
		name: "reject truncated body",
		cmd:  limitCmd(1, 1, 0, Buy, 100, 1)[:CommandHeaderLen+5],
		want: []string{"s1 reject c1 bad-command"},
	}, {
		name: "reject empty body",
		cmd:  AppendCommand(nil, 1, 1, nil),
		want: []string{"s1 reject c1 bad-command"},
	}, {
		name: "reject client order id 0",
		cmd:  limitCmd(1, 0, 0, Buy, 100, 1),
		want: []string{"s1 reject c0 bad-clordid"},
	}, {
		name: "no output without a header",
		cmd:  []byte{1, 2, 3},
	}, {
		name: "no output for session 0",
		cmd:  limitCmd(0, 1, 0, Buy, 100, 1),
	}, {
		name: "book full rejects a resting order before it trades",
		setup: [][]byte{
			limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 101, 1),
			limitCmd(1, 3, 1, Sell, 100, 1), limitCmd(1, 4, 1, Sell, 100, 1),
		},
		cmd:  limitCmd(2, 1, 0, Buy, 100, 2),
		want: []string{"s2 reject c1 book-full"},
	}, {
		name: "book full accepts an order that fills completely",
		setup: [][]byte{
			limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 101, 1),
			limitCmd(1, 3, 1, Sell, 100, 1), limitCmd(1, 4, 1, Sell, 100, 1),
		},
		cmd: limitCmd(2, 1, 0, Buy, 101, 2),
		want: []string{
			"s2 ack c1 o5 i0 B L 101x2",
			"s2 exec c1 o5/o1 t1 i0 B 100x1 leaves 1 agg",
			"s1 exec c1 o1/o5 t1 i0 S 100x1 leaves 0 pas",
			"md5 trade i0 B 100x1 t1",
			"md6 level i0 S 100x0",
			"s2 exec c1 o5/o2 t2 i0 B 101x1 leaves 0 agg",
			"s1 exec c2 o2/o5 t2 i0 S 101x1 leaves 0 pas",
			"md7 trade i0 B 101x1 t2",
			"md8 level i0 S 101x0",
		},
	}, {
		name: "book full does not limit market orders",
		setup: [][]byte{
			limitCmd(1, 1, 0, Sell, 100, 1), limitCmd(1, 2, 0, Sell, 101, 1),
			limitCmd(1, 3, 1, Sell, 100, 1), limitCmd(1, 4, 1, Sell, 100, 1),
		},
		cmd:  marketCmd(2, 1, 0, Sell, 2),
		want: []string{"s2 ack c1 o5 i0 S M 0x2", "s2 cancelled c1 o5 i0 S 2 market-unfilled"},
	}, {
		name:  "too many sessions",
		setup: [][]byte{cancelCmd(1, 1, 9), cancelCmd(2, 1, 9), cancelCmd(3, 1, 9)},
		cmd:   limitCmd(4, 1, 0, Buy, 100, 1),
		want:  []string{"s4 reject c1 too-many-sessions"},
	}, {
		name:  "client order id older than the window",
		setup: [][]byte{cancelCmd(1, 1, 9), cancelCmd(1, 5, 9)},
		cmd:   limitCmd(1, 1, 0, Buy, 100, 1),
		want:  []string{"s1 reject c1 too-old"},
	}, {
		name:  "unseen id inside the window is applied",
		setup: [][]byte{cancelCmd(1, 1, 9), cancelCmd(1, 5, 9)},
		cmd:   limitCmd(1, 2, 0, Buy, 100, 1),
		want:  []string{"s1 ack c2 o1 i0 B L 100x1", "md1 level i0 B 100x1"},
	}, {
		name:  "resend is a duplicate of the original ack",
		cfg:   &big,
		setup: [][]byte{limitCmd(1, 1, 0, Buy, 100, 1), limitCmd(1, 2, 0, Sell, 100, 1)},
		cmd:   limitCmd(1, 1, 0, Buy, 100, 1),
		want:  []string{"s1 dup[ack c1 o1 i0 B L 100x1]"},
	}, {
		name:  "resend with a different body is still a duplicate",
		setup: [][]byte{limitCmd(1, 1, 0, Buy, 100, 0)},
		cmd:   limitCmd(1, 1, 0, Buy, 100, 7),
		want:  []string{"s1 dup[reject c1 bad-qty]"},
	}, {
		name:  "resend of a cancel",
		setup: [][]byte{limitCmd(1, 1, 0, Buy, 100, 3), cancelCmd(1, 2, 1)},
		cmd:   cancelCmd(1, 2, 1),
		want:  []string{"s1 dup[cancelled c2 o1 i0 B 3 requested]"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				cfg = *tc.cfg
			}
			e := mustNew(t, cfg)
			var rec recorder
			seq := uint64(0)
			for _, c := range tc.setup {
				seq++
				e.Apply(seq, c, &rec)
			}
			rec.take()
			seq++
			e.Apply(seq, tc.cmd, &rec)
			got := formatAll(t, rec.take())
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if err := checkInvariants(e); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	e := mustNew(t, DefaultConfig())
	seq := uint64(0)
	for i, c := range [][]byte{
		limitCmd(1, 1, 0, Buy, 100, 2), limitCmd(1, 2, 0, Buy, 102, 3), limitCmd(2, 1, 0, Buy, 100, 4),
		limitCmd(1, 3, 0, Sell, 105, 1), limitCmd(1, 4, 0, Sell, 103, 1),
	} {
		seq = uint64(i + 1)
		e.Apply(seq, c, nil)
	}
	bids := e.Depth(0, Buy, nil)
	asks := e.Depth(0, Sell, nil)
	if want := []Level{{102, 3, 1}, {100, 6, 2}}; !slices.Equal(bids, want) {
		t.Errorf("bids %v want %v", bids, want)
	}
	if want := []Level{{103, 1, 1}, {105, 1, 1}}; !slices.Equal(asks, want) {
		t.Errorf("asks %v want %v", asks, want)
	}
	if e.RestingOrders() != 5 || e.Sessions() != 2 || e.MDSeq() != 5 || e.AppliedSeq() != 5 {
		t.Errorf("counters: resting %d sessions %d mdseq %d applied %d", e.RestingOrders(), e.Sessions(), e.MDSeq(), e.AppliedSeq())
	}
}

func TestApplyPanicsOnNonIncreasingSeq(t *testing.T) {
	e := mustNew(t, testConfig())
	e.Apply(5, cancelCmd(1, 1, 1), nil)
	for _, seq := range []uint64{5, 4, 0} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("seq %d after 5 did not panic", seq)
				}
			}()
			e.Apply(seq, cancelCmd(1, 2, 1), nil)
		}()
	}
	e.Apply(9, cancelCmd(1, 2, 1), nil) // gaps are allowed
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.MaxInstruments = 0 },
		func(c *Config) { c.MaxOrders = 0 },
		func(c *Config) { c.MaxOrders = maxMaxOrders + 1 },
		func(c *Config) { c.MaxSessions = 0 },
		func(c *Config) { c.DedupWindow = 0 },
		func(c *Config) { c.DedupWindow = 3 },
		func(c *Config) { c.MaxOrderQty = 0 },
		func(c *Config) { c.MaxOrderQty = ^uint64(0) },
		func(c *Config) { c.MaxSessions, c.DedupWindow = maxMaxSessions, maxDedupWindow },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := New(c); err != ErrBadConfig {
			t.Errorf("config %+v: err %v, want ErrBadConfig", c, err)
		}
	}
}

// TestMarketDataSeqSurvivesNilEmitter: market-data numbering is state, so
// a replica applying without an emitter (catching up) keeps counting.
func TestMarketDataSeqSurvivesNilEmitter(t *testing.T) {
	a, b := mustNew(t, testConfig()), mustNew(t, testConfig())
	var rec recorder
	a.Apply(1, limitCmd(1, 1, 0, Buy, 100, 1), nil)
	b.Apply(1, limitCmd(1, 1, 0, Buy, 100, 1), &rec)
	if a.MDSeq() != 1 || a.StateHash() != b.StateHash() {
		t.Fatalf("mdseq %d, hashes %x %x", a.MDSeq(), a.StateHash(), b.StateHash())
	}
}
