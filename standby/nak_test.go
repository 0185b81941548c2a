package standby

import (
	"testing"

	"pgregory.net/rapid"
)

func TestNakDelayedThenBackedOff(t *testing.T) {
	s := NewNakScheduler(NakConfig{DelayMaxNs: 1000, InitialRttNs: 10_000, MinBackoffNs: 5000, MaxBackoffNs: 40_000, Seed: 1})
	gaps := []Range{{5, 9}}
	var dst [16]Range
	// Within the random delay (<= 1000 ns) nothing is due at t=0 unless the
	// draw was 0; by t=1000 it must be.
	at := int64(0)
	got := s.Poll(gaps, 0, dst[:0])
	if len(got) == 0 {
		at = 1000
		got = s.Poll(gaps, at, dst[:0])
	}
	if len(got) != 1 || got[0] != (Range{5, 9}) {
		t.Fatalf("first NAK %v", got)
	}
	if d := s.Stats().LastDelayNs; d < 0 || d > 1000 {
		t.Fatalf("delay %d outside [0,1000]", d)
	}
	// Back-off 1: max(2*srtt, min) = 20 µs.
	if got := s.Poll(gaps, at+19_999, dst[:0]); len(got) != 0 {
		t.Fatalf("repeated inside the back-off: %v", got)
	}
	if got := s.Poll(gaps, at+20_000, dst[:0]); len(got) != 1 {
		t.Fatal("not repeated after the back-off")
	}
	// Back-off 2 doubles to 40 µs, then the cap holds it there.
	at += 20_000
	if got := s.Poll(gaps, at+39_999, dst[:0]); len(got) != 0 {
		t.Fatal("second back-off did not double")
	}
	if got := s.Poll(gaps, at+40_000, dst[:0]); len(got) != 1 {
		t.Fatal("not repeated after the doubled back-off")
	}
	at += 40_000
	if got := s.Poll(gaps, at+40_000, dst[:0]); len(got) != 1 {
		t.Fatal("back-off exceeded its cap")
	}
	if s.Stats().Repeats != 3 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

func TestNakFilledGapForgotten(t *testing.T) {
	s := NewNakScheduler(NakConfig{DelayMaxNs: 1, Seed: 2})
	var dst [16]Range
	s.Poll([]Range{{1, 2}, {10, 12}}, 0, dst[:0])
	s.Poll([]Range{{1, 2}, {10, 12}}, 10, dst[:0])
	if s.Tracked() != 2 {
		t.Fatalf("tracked %d", s.Tracked())
	}
	s.Poll([]Range{{10, 12}}, 20, dst[:0])
	if s.Tracked() != 1 {
		t.Fatalf("a filled gap is still tracked: %d", s.Tracked())
	}
	// A gap that shrinks (11 arrived) keeps its timer: no immediate repeat.
	if got := s.Poll([]Range{{12, 12}}, 30, dst[:0]); len(got) != 0 {
		t.Fatalf("shrunk gap re-NAKed at once: %v", got)
	}
}

func TestNakRespectsCapacity(t *testing.T) {
	s := NewNakScheduler(NakConfig{DelayMaxNs: 1, Seed: 3})
	var gaps []Range
	for i := uint64(0); i < 20; i++ {
		gaps = append(gaps, Range{i*10 + 1, i*10 + 2})
	}
	var dst [16]Range
	s.Poll(gaps, 0, dst[:0:0]) // starts the timers, room for nothing
	got := s.Poll(gaps, 100, dst[:0])
	if len(got) != 16 {
		t.Fatalf("%d ranges in one NAK", len(got))
	}
	got = s.Poll(gaps, 101, dst[:0])
	if len(got) != 4 {
		t.Fatalf("the 4 left over were not sent next: %d", len(got))
	}
}

func TestNakRttFollowsSamples(t *testing.T) {
	s := NewNakScheduler(NakConfig{DelayMaxNs: 1, InitialRttNs: 1_000_000, Seed: 4})
	var dst [16]Range
	now := int64(0)
	for i := 0; i < 100; i++ {
		g := []Range{{uint64(i*10 + 1), uint64(i*10 + 1)}}
		s.Poll(g, now, dst[:0:0])
		now += 2
		if len(s.Poll(g, now, dst[:0])) != 1 {
			t.Fatal("no NAK")
		}
		now += 50_000 // answered in 50 µs
		s.OnRetransmit(uint64(i*10+1), uint64(i*10+1), now)
		s.Poll(nil, now, dst[:0])
	}
	if srtt := s.SrttNs(); srtt < 45_000 || srtt > 60_000 {
		t.Fatalf("srtt %d did not converge to 50 µs", srtt)
	}
	// A repeated NAK's answer is not sampled (Karn).
	before := s.Stats().RttSamples
	g := []Range{{5000, 5000}}
	s.Poll(g, now, dst[:0:0])
	s.Poll(g, now+2, dst[:0])
	s.Poll(g, now+10_000_000, dst[:0]) // repeat
	s.OnRetransmit(5000, 5000, now+10_000_001)
	if s.Stats().RttSamples != before {
		t.Fatal("sampled the RTT from a repeated NAK")
	}
}

// TestPropertyNakEventuallyAsks: every gap that stays open is NAKed within
// DelayMax, and then again within every MaxBackoff, never more often than
// MinBackoff; the table never exceeds its bound.
func TestPropertyNakEventuallyAsks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := NakConfig{DelayMaxNs: 1000, MinBackoffNs: 2000, MaxBackoffNs: 50_000, Seed: rapid.Uint64().Draw(t, "seed")}
		s := NewNakScheduler(cfg)
		n := rapid.IntRange(1, 100).Draw(t, "gaps")
		gaps := make([]Range, n)
		for i := range gaps {
			gaps[i] = Range{uint64(i*10 + 1), uint64(i*10 + 1 + rapid.IntRange(0, 5).Draw(t, "len"))}
		}
		last := map[uint64]int64{}
		var dst [16]Range
		now := int64(0)
		for step := 0; step < 200; step++ {
			now += int64(rapid.IntRange(1, 3000).Draw(t, "dt"))
			for _, r := range s.Poll(gaps, now, dst[:0]) {
				// Past the table bound an evicted range may be asked for
				// early (documented); below it the back-off holds.
				if prev, ok := last[r.From]; ok && n <= MaxTrackedRanges && now-prev < cfg.MinBackoffNs {
					t.Fatalf("range %v repeated after %d ns", r, now-prev)
				}
				last[r.From] = now
			}
			if s.Tracked() > MaxTrackedRanges {
				t.Fatalf("tracked %d", s.Tracked())
			}
		}
		if n <= MaxTrackedRanges && now > 3*cfg.MaxBackoffNs {
			for _, g := range gaps {
				if p, ok := last[g.From]; !ok || now-p > cfg.MaxBackoffNs+3000*int64(n/16+2) {
					t.Fatalf("gap %v not asked for recently (last %d, now %d)", g, p, now)
				}
			}
		}
	})
}

func TestNakZeroAllocs(t *testing.T) {
	s := NewNakScheduler(NakConfig{Seed: 5})
	gaps := []Range{{1, 3}, {10, 20}}
	var dst [16]Range
	now := int64(0)
	if a := testing.AllocsPerRun(1000, func() {
		now += 1000
		s.Poll(gaps, now, dst[:0])
		s.OnRetransmit(1, 3, now)
	}); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}

// TestNakProgressResetsBackoff: while a large gap is being answered in
// bursts, each burst brings the next NAK for the rest one base back-off
// away instead of a doubled one.
func TestNakProgressResetsBackoff(t *testing.T) {
	s := NewNakScheduler(NakConfig{DelayMaxNs: 1, InitialRttNs: 10_000, MinBackoffNs: 5000, MaxBackoffNs: 1_000_000, Seed: 9})
	var dst [16]Range
	gap := []Range{{1, 10_000}}
	s.Poll(gap, 0, dst[:0:0])
	now := int64(10)
	for i := 0; i < 5; i++ { // escalate: 20, 40, 80, 160, 320 µs
		if len(s.Poll(gap, now, dst[:0])) != 1 {
			t.Fatalf("attempt %d not sent at %d", i, now)
		}
		if i < 4 {
			now += s.backoff(uint32(i + 1))
		}
	}
	// Mid-wait (320 µs), a burst answers 1..64; the rest is due one base
	// back-off later.
	now += 1000
	s.OnRetransmit(1, 64, now)
	gap = []Range{{65, 10_000}}
	base := s.backoff(1)
	if got := s.Poll(gap, now+base-1, dst[:0]); len(got) != 0 {
		t.Fatal("asked again before the base back-off")
	}
	if got := s.Poll(gap, now+base, dst[:0]); len(got) != 1 {
		t.Fatalf("the rest was not asked for one base back-off after progress (%d ns)", base)
	}
}
