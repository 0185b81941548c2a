package bus

import (
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// fataler is what both *testing.T and *rapid.T provide.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// drain reads everything due now from c (never waits).
func drain(t fataler, c *MemConn) []string {
	t.Helper()
	b := newBatch(BatchSizeMax, 256)
	var out []string
	for i := 0; i < MemQueueMax; i++ {
		n, err := c.Receive(b.bufs, b.sizes, b.from, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for k := 0; k < n; k++ {
			out = append(out, string(b.bufs[k][:b.sizes[k]]))
		}
	}
	return out
}

func memPair(t fataler, seed uint64, f Faults) (*MemNetwork, *MemConn, *MemConn) {
	n := NewMemNetwork(seed, f)
	a, err := n.Listen(netip.MustParseAddrPort("10.0.0.1:1000"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Listen(netip.MustParseAddrPort("10.0.0.2:1000"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return n, a, b
}

// Property: whatever the faults, every datagram is accounted for exactly
// once, and the receiver sees exactly what the router says it delivered.
func TestMemRouterConservation(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := Faults{
			DropPpm:      rapid.Uint32Range(0, 1_000_000).Draw(rt, "drop"),
			DuplicatePpm: rapid.Uint32Range(0, 1_000_000).Draw(rt, "dup"),
			ReorderPpm:   rapid.Uint32Range(0, 1_000_000).Draw(rt, "reorder"),
		}
		n, a, b := memPair(rt, rapid.Uint64().Draw(rt, "seed"), f)
		count := rapid.IntRange(0, 300).Draw(rt, "count")
		if err := a.Send(payloads(count), b.LocalAddr()); err != nil {
			rt.Fatal(err)
		}
		got := drain(rt, b)
		s := n.Stats()
		if s.Sent != uint64(count) {
			rt.Fatalf("Sent %d, want %d", s.Sent, count)
		}
		if s.Delivered+s.Overflows != s.Sent-s.Dropped+s.Duplicated {
			rt.Fatalf("stats do not balance: %+v", s)
		}
		if uint64(len(got)) != s.Delivered {
			rt.Fatalf("received %d, router delivered %d", len(got), s.Delivered)
		}
		if c := b.Counters(); c.DatagramsReceived != s.Delivered {
			rt.Fatalf("receiver counted %d, router delivered %d", c.DatagramsReceived, s.Delivered)
		}
		if f.DropPpm == 0 && f.DuplicatePpm == 0 && f.ReorderPpm == 0 {
			for i, g := range got {
				if g != string(payloads(count)[i]) {
					rt.Fatalf("fault-free network reordered: %d is %q", i, g)
				}
			}
		}
	})
}

// Property: the router is a function of the seed and the sends.
func TestMemRouterDeterministic(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		f := Faults{DropPpm: 200_000, DuplicatePpm: 100_000, ReorderPpm: 300_000}
		var runs [2][]string
		for i := range runs {
			_, a, b := memPair(rt, seed, f)
			if err := a.Send(payloads(100), b.LocalAddr()); err != nil {
				rt.Fatal(err)
			}
			runs[i] = drain(rt, b)
		}
		if fmt.Sprint(runs[0]) != fmt.Sprint(runs[1]) {
			rt.Fatalf("same seed, different deliveries:\n%v\n%v", runs[0], runs[1])
		}
	})
}

func TestMemRouterRules(t *testing.T) {
	cases := []struct {
		name  string
		f     Faults
		check func(t *testing.T, got []string, s MemStats)
	}{
		{"drop all", Faults{DropPpm: 1_000_000}, func(t *testing.T, got []string, s MemStats) {
			if len(got) != 0 || s.Dropped != 10 {
				t.Errorf("got %d, dropped %d", len(got), s.Dropped)
			}
		}},
		{"duplicate all", Faults{DuplicatePpm: 1_000_000}, func(t *testing.T, got []string, s MemStats) {
			if len(got) != 20 || got[0] != got[1] || s.Duplicated != 10 {
				t.Errorf("got %q", got)
			}
		}},
		{"reorder all", Faults{ReorderPpm: 1_000_000}, func(t *testing.T, got []string, s MemStats) {
			// Each datagram overtakes the one before it.
			if len(got) != 10 || got[0] == "msg-0|" || s.Reordered != 9 {
				t.Errorf("got %q, reordered %d", got, s.Reordered)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, a, b := memPair(t, 7, tc.f)
			if err := a.Send(payloads(10), b.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			tc.check(t, drain(t, b), n.Stats())
		})
	}
}

func TestMemPartition(t *testing.T) {
	n, a, b := memPair(t, 1, Faults{})
	n.Partition(a.LocalAddr().Addr(), b.LocalAddr().Addr())
	a.Send([][]byte{[]byte("lost")}, b.LocalAddr())
	b.Send([][]byte{[]byte("lost too")}, a.LocalAddr())
	if got := append(drain(t, a), drain(t, b)...); len(got) != 0 || n.Stats().Partitioned != 2 {
		t.Fatalf("partitioned hosts exchanged %q", got)
	}
	n.Heal()
	a.Send([][]byte{[]byte("healed")}, b.LocalAddr())
	if got := drain(t, b); len(got) != 1 {
		t.Fatalf("after Heal got %q", got)
	}
}

func TestMemDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, b := memPair(t, 1, Faults{DelayMin: 5 * time.Millisecond, DelayMax: 5 * time.Millisecond})
		defer a.Close()
		defer b.Close()
		a.Send([][]byte{[]byte("late")}, b.LocalAddr())
		if got := drain(t, b); len(got) != 0 {
			t.Fatalf("delayed datagram arrived at once: %q", got)
		}
		bt := newBatch(4, 64)
		start := time.Now()
		nr, err := b.Receive(bt.bufs, bt.sizes, bt.from, time.Second)
		if nr != 1 || err != nil || time.Since(start) != 5*time.Millisecond {
			t.Fatalf("Receive = %d, %v after %v; want the datagram after exactly 5ms", nr, err, time.Since(start))
		}
		_ = n
	})
}

func TestMemMulticastAndOverflow(t *testing.T) {
	n := NewMemNetwork(1, Faults{})
	group := netip.MustParseAddrPort("239.1.1.1:2000")
	s, _ := n.Listen(netip.MustParseAddrPort("10.0.0.1:5"), nil)
	r1, _ := n.Listen(netip.MustParseAddrPort("10.0.0.2:2000"), nil)
	r2, _ := n.Listen(netip.MustParseAddrPort("10.0.0.3:2000"), nil)
	other, _ := n.Listen(netip.MustParseAddrPort("10.0.0.4:2001"), nil)
	for _, c := range []*MemConn{r1, r2, other} {
		if err := c.JoinGroup(group.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	if err := r1.JoinGroup(netip.MustParseAddr("10.0.0.9")); err == nil {
		t.Error("joined a unicast address")
	}
	s.Send([][]byte{[]byte("hi")}, group)
	if len(drain(t, r1)) != 1 || len(drain(t, r2)) != 1 || len(drain(t, other)) != 0 {
		t.Fatal("group delivery wrong")
	}
	r2.Close()
	s.Send(payloads(MemQueueMax+10), group)
	if got := len(drain(t, r1)); got != MemQueueMax {
		t.Errorf("r1 got %d, want the queue bound %d", got, MemQueueMax)
	}
	if c := r1.Counters(); c.ReceiveOverflows != 10 {
		t.Errorf("overflows %d, want 10", c.ReceiveOverflows)
	}
	if _, err := n.Listen(r1.LocalAddr(), nil); err == nil {
		t.Error("listened twice on one address")
	}
}
