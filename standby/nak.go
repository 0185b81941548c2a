package standby

// NAK timing, after Aeron's loss detector: a gap is not NAKed the instant it
// is seen (the missing frame is often just reordered and arrives a few
// microseconds later), but after a small randomised delay; a range already
// asked for is not asked for again until a back-off that follows the
// measured round trip to the primary has passed, doubling with each
// attempt up to a cap. Everything is bounded: the ranges tracked, the
// ranges per NAK, the back-off.

// Defaults for NakConfig, each stated with its reason.
const (
	// DefaultNakDelayMaxNs: the first NAK for a new gap waits a random delay
	// in [0, 2 × srtt] capped at 1 ms: long enough for a merely reordered
	// frame to arrive, short enough to cost about one round trip.
	DefaultNakDelayMaxNs = 1_000_000
	// DefaultInitialRttNs: assume 200 µs until measured (a busy loopback or
	// LAN round trip on these machines, see DESIGN.md).
	DefaultInitialRttNs = 200_000
	// DefaultMinBackoffNs: never repeat a NAK for the same range sooner than
	// 100 µs, whatever the RTT says.
	DefaultMinBackoffNs = 100_000
	// DefaultMaxBackoffNs: the repeat interval doubles per attempt up to
	// 50 ms, so a primary that is gone is asked at most 20 times a second.
	DefaultMaxBackoffNs = 50_000_000
	// MaxTrackedRanges bounds the requested-range table; past it the oldest
	// entry is forgotten (its range may be NAKed again early, which is safe).
	MaxTrackedRanges = 64
)

// NakConfig configures a NakScheduler; zero fields take the defaults.
type NakConfig struct {
	DelayMaxNs   int64
	InitialRttNs int64
	MinBackoffNs int64
	MaxBackoffNs int64
	// Seed seeds the delay randomisation (use the node id: deterministic
	// in the simulator, different between standbys so they do not NAK in
	// lockstep).
	Seed uint64
}

type tracked struct {
	r          Range
	firstSeen  int64 // when the gap was first seen
	dueNs      int64 // when it may be (re)NAKed
	lastNakNs  int64
	attempts   uint32
	inUse, rtt bool // rtt: first NAK not yet answered (Karn's rule)
}

// NakStats counts what the scheduler did.
type NakStats struct {
	Naks        uint64 // NAK decisions (frames to send)
	Ranges      uint64 // ranges carried
	Repeats     uint64 // ranges NAKed again after a back-off
	RttSamples  uint64
	Forgotten   uint64 // tracked ranges evicted at the bound
	SrttNs      int64
	LastDelayNs int64
}

// NakScheduler decides when to NAK which gaps. It is pure: the caller
// passes the window's current gaps and the time, and sends what it returns.
type NakScheduler struct {
	cfg    NakConfig
	srttNs int64
	rng    uint64
	table  [MaxTrackedRanges]tracked
	stats  NakStats
}

// NewNakScheduler returns a scheduler with cfg (defaults filled in).
func NewNakScheduler(cfg NakConfig) *NakScheduler {
	if cfg.DelayMaxNs <= 0 {
		cfg.DelayMaxNs = DefaultNakDelayMaxNs
	}
	if cfg.InitialRttNs <= 0 {
		cfg.InitialRttNs = DefaultInitialRttNs
	}
	if cfg.MinBackoffNs <= 0 {
		cfg.MinBackoffNs = DefaultMinBackoffNs
	}
	if cfg.MaxBackoffNs <= 0 {
		cfg.MaxBackoffNs = DefaultMaxBackoffNs
	}
	return &NakScheduler{cfg: cfg, srttNs: cfg.InitialRttNs, rng: cfg.Seed*0x9E3779B97F4A7C15 | 1}
}

// SrttNs is the smoothed round trip to the primary.
func (s *NakScheduler) SrttNs() int64 { return s.srttNs }

// Stats returns the counters.
func (s *NakScheduler) Stats() NakStats {
	st := s.stats
	st.SrttNs = s.srttNs
	return st
}

func (s *NakScheduler) random() uint64 {
	// xorshift64*: deterministic for a seed, no allocation, no global state.
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	return s.rng * 2685821657736338717
}

func (s *NakScheduler) initialDelay() int64 {
	max := min(2*s.srttNs, s.cfg.DelayMaxNs)
	if max <= 0 {
		return 0
	}
	d := int64(s.random() % uint64(max+1))
	s.stats.LastDelayNs = d
	return d
}

func (s *NakScheduler) backoff(attempts uint32) int64 {
	b := max(2*s.srttNs, s.cfg.MinBackoffNs)
	for i := uint32(1); i < attempts && b < s.cfg.MaxBackoffNs; i++ {
		b *= 2
	}
	return min(b, s.cfg.MaxBackoffNs)
}

// find returns the entry overlapping r, or -1.
func (s *NakScheduler) find(r Range) int {
	for i := range s.table {
		t := &s.table[i]
		if t.inUse && t.r.From <= r.To && r.From <= t.r.To {
			return i
		}
	}
	return -1
}

// slot returns a free entry, evicting the one seen first if none is free.
func (s *NakScheduler) slot() int {
	oldest := 0
	for i := range s.table {
		if !s.table[i].inUse {
			return i
		}
		if s.table[i].firstSeen < s.table[oldest].firstSeen {
			oldest = i
		}
	}
	s.stats.Forgotten++
	return oldest
}

// Poll takes the window's current gaps (Window.Gaps) and the time, forgets
// tracked ranges that are no longer missing, starts timers for new gaps, and
// appends to dst (up to cap(dst)) every gap that is due now. A non-empty
// result is one NAK to send now. Poll never allocates when dst has
// capacity.
func (s *NakScheduler) Poll(gaps []Range, nowNs int64, dst []Range) []Range {
	// Forget ranges that have been filled: not overlapping any gap.
	for i := range s.table {
		t := &s.table[i]
		if !t.inUse {
			continue
		}
		alive := false
		for _, g := range gaps {
			if t.r.From <= g.To && g.From <= t.r.To {
				alive = true
				break
			}
		}
		if !alive {
			t.inUse = false
		}
	}
	for _, g := range gaps {
		i := s.find(g)
		if i < 0 {
			i = s.slot()
			s.table[i] = tracked{r: g, firstSeen: nowNs, dueNs: nowNs + s.initialDelay(), inUse: true}
		}
		t := &s.table[i]
		t.r = g // a gap shrinks as frames arrive; track its current extent
		if nowNs < t.dueNs || len(dst) == cap(dst) {
			continue
		}
		dst = append(dst, g)
		if t.attempts > 0 {
			s.stats.Repeats++
		}
		t.attempts++
		t.rtt = t.attempts == 1
		t.lastNakNs = nowNs
		t.dueNs = nowNs + s.backoff(t.attempts)
	}
	if len(dst) > 0 {
		s.stats.Naks++
		s.stats.Ranges += uint64(len(dst))
	}
	return dst
}

// OnRetransmit tells the scheduler a RETRANSMIT covering seqs from..to
// arrived. The first answer to a range NAKed once gives an RTT sample
// (Karn's rule: never from a repeated NAK, whose answer is ambiguous).
func (s *NakScheduler) OnRetransmit(from, to uint64, nowNs int64) {
	i := s.find(Range{From: from, To: to})
	if i < 0 {
		return
	}
	t := &s.table[i]
	// Progress on a range: the primary answers a large NAK in bounded
	// bursts, so ask for the rest one back-off from now, not after a
	// back-off that doubled while the answer was arriving (ACK clocking,
	// as TCP does). Still never sooner than MinBackoffNs.
	t.attempts = min(t.attempts, 1)
	t.dueNs = min(t.dueNs, nowNs+s.backoff(1))
	if !t.rtt || nowNs < t.lastNakNs {
		return
	}
	t.rtt = false
	sample := nowNs - t.lastNakNs
	s.srttNs += (sample - s.srttNs) / 8
	s.srttNs = max(s.srttNs, 1_000)
	s.stats.RttSamples++
}

// Tracked is the number of ranges being timed.
func (s *NakScheduler) Tracked() int {
	n := 0
	for i := range s.table {
		if s.table[i].inUse {
			n++
		}
	}
	return n
}
