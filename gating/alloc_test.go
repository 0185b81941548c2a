package gating

import (
	"fmt"
	"testing"
)

// benchGate returns a Gate holding the lease with n in-sync standbys.
func benchGate(tb testing.TB, n int, cfg Config) *Gate {
	tb.Helper()
	g, err := NewGate(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	members := make([]uint32, n)
	for i := range members {
		members[i] = uint32(i + 1)
	}
	if err := g.SetInSync(1, members, 0); err != nil {
		tb.Fatal(err)
	}
	g.SetLease(true)
	return g
}

// TestAckReleasedAllocs proves the ack hot path (OnAck, SetApplied,
// SetDurable, Released, Lagging into a sized buffer) does not allocate.
func TestAckReleasedAllocs(t *testing.T) {
	for _, cfg := range []Config{{}, {RequiredAcks: 2}} {
		g := benchGate(t, MaxStandbys, cfg)
		lagging := make([]uint32, 0, MaxStandbys)
		seq := uint64(0)
		sink := uint64(0)
		allocs := testing.AllocsPerRun(1000, func() {
			seq++
			g.SetApplied(seq)
			g.SetDurable(seq)
			for id := uint32(1); id <= MaxStandbys; id++ {
				g.OnAck(id, seq, int64(seq))
			}
			sink += g.Released()
			lagging = g.Lagging(int64(seq), 1, lagging[:0])
		})
		if allocs != 0 {
			t.Errorf("%+v: %v allocs per ack round, want 0", cfg, allocs)
		}
		if sink == 0 {
			t.Error("nothing released")
		}
	}
}

// TestEnqueueReleaseAllocs proves Enqueue, Next, Publishable and DropAll
// do not allocate.
func TestEnqueueReleaseAllocs(t *testing.T) {
	g := benchGate(t, 1, Config{})
	p := newTestPublisher(t, 64)
	seq := uint64(0)
	var total uint64
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		for range 3 {
			if err := p.Enqueue(seq, testOutput{session: seq}); err != nil {
				t.Fatal(err)
			}
		}
		g.SetApplied(seq)
		g.SetDurable(seq)
		g.OnAck(1, seq, int64(seq))
		n := 0
		for bound := Publishable(g); ; n++ {
			s, out, ok := p.Next(bound)
			if !ok {
				break
			}
			total += s + out.session
		}
		if n != 3 {
			t.Fatal("Next did not hand out 3 outputs")
		}
		_ = p.Enqueue(seq+1, testOutput{})
		p.DropAll()
	})
	if allocs != 0 {
		t.Errorf("%v allocs per enqueue/release round, want 0", allocs)
	}
	if total == 0 {
		t.Error("nothing emitted")
	}
}

func BenchmarkOnAckReleased(b *testing.B) {
	for _, n := range []int{1, 3, MaxStandbys} {
		for _, cfg := range []Config{{}, {RequiredAcks: (n + 1) / 2}} {
			b.Run(fmt.Sprintf("standbys=%d/k=%d", n, cfg.RequiredAcks), func(b *testing.B) {
				g := benchGate(b, n, cfg)
				g.SetApplied(1 << 62)
				g.SetDurable(1 << 62)
				b.ReportAllocs()
				var sink uint64
				seq := uint64(0)
				for i := 0; b.Loop(); i++ {
					if i%n == 0 {
						seq++
					}
					g.OnAck(uint32(i%n)+1, seq, int64(i))
					sink += g.Released()
				}
				if sink == 0 {
					b.Fatal("nothing released")
				}
			})
		}
	}
}

func BenchmarkEnqueueRelease(b *testing.B) {
	p, err := NewPublisher[testOutput](1024)
	if err != nil {
		b.Fatal(err)
	}
	var total uint64
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		seq++
		if err := p.Enqueue(seq, testOutput{session: seq}); err != nil {
			b.Fatal(err)
		}
		for {
			_, out, ok := p.Next(seq)
			if !ok {
				break
			}
			total += out.session
		}
	}
	if total == 0 {
		b.Fatal("nothing emitted")
	}
}

// BenchmarkEnqueueReleaseBatch hands out 64 outputs per Release, as a burst
// released by one ack would.
func BenchmarkEnqueueReleaseBatch(b *testing.B) {
	p, err := NewPublisher[testOutput](1024)
	if err != nil {
		b.Fatal(err)
	}
	var total uint64
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		for range 64 {
			seq++
			if err := p.Enqueue(seq, testOutput{session: seq}); err != nil {
				b.Fatal(err)
			}
		}
		for {
			_, out, ok := p.Next(seq)
			if !ok {
				break
			}
			total += out.session
		}
	}
	if total == 0 {
		b.Fatal("nothing emitted")
	}
}
