package standby

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// entry is one ApplyFunc call as recorded by a test.
type entry struct {
	seq     uint64
	payload string
}

// payloadFor is the payload the primary sequenced at seq: its length
// varies with seq (0..max bytes) and its bytes encode seq, so a payload
// applied at the wrong seq, truncated or overwritten is detected.
func payloadFor(seq uint64, maxBytes int) []byte {
	n := int(seq % uint64(maxBytes+1))
	var tag [8]byte
	binary.LittleEndian.PutUint64(tag[:], seq*0x9E3779B97F4A7C15)
	p := make([]byte, n)
	for i := range p {
		p[i] = tag[i%8] ^ byte(i)
	}
	return p
}

// harness is a Window whose applied log is recorded, driven through a
// shared receive buffer that is scribbled over after every call, the way
// a runtime reuses its datagram buffer.
type harness struct {
	w        *Window
	log      []entry
	recvBuf  []byte
	maxBytes int
}

func newHarness(cfg Config) (*harness, error) {
	h := &harness{}
	w, err := New(cfg, func(seq uint64, payload []byte) {
		h.log = append(h.log, entry{seq, string(payload)})
	})
	if err != nil {
		return nil, err
	}
	h.w = w
	h.maxBytes = w.maxMessageBytes
	h.recvBuf = make([]byte, w.maxMessageBytes+8)
	return h, nil
}

func mustHarness(cfg Config) *harness {
	h, err := newHarness(cfg)
	if err != nil {
		panic(err)
	}
	return h
}

// deliver passes payload through the reused receive buffer.
func (h *harness) deliver(seq uint64, payload []byte) (Range, bool, error) {
	buf := h.recvBuf[:len(payload)]
	copy(buf, payload)
	gap, ok, err := h.w.OnMessage(seq, buf)
	for i := range h.recvBuf {
		h.recvBuf[i] = 0xEE
	}
	return gap, ok, err
}

// observables is everything a caller can see of a Window.
type observables struct {
	applied, ack, highest uint64
	pending               int
	gaps                  []Range
	stats                 Stats
	logLen                int
}

func observe(w *Window, logLen int) observables {
	return observables{
		applied: w.Applied(),
		ack:     w.Ack(),
		highest: w.Highest(),
		pending: w.Pending(),
		gaps:    w.Gaps(make([]Range, 0, 64)),
		stats:   w.Stats(),
		logLen:  logLen,
	}
}

func (o observables) equal(p observables) bool {
	return o.applied == p.applied && o.ack == p.ack && o.highest == p.highest &&
		o.pending == p.pending && slices.Equal(o.gaps, p.gaps) && o.stats == p.stats && o.logLen == p.logLen
}

// model is the obviously correct reference: a map of pending messages and
// an applied log, with no ring, bitmap or preallocation.
type model struct {
	maxPending uint64
	maxBytes   int
	applied    uint64
	highest    uint64
	pending    map[uint64][]byte
	log        []entry
	stats      Stats
}

func newModel(cfg Config) *model {
	m := &model{
		maxPending: uint64(cfg.MaxPending),
		maxBytes:   cfg.MaxMessageBytes,
		applied:    cfg.Start,
		highest:    cfg.Start,
		pending:    map[uint64][]byte{},
	}
	if m.maxPending == 0 {
		m.maxPending = DefaultMaxPending
	}
	if m.maxBytes == 0 {
		m.maxBytes = DefaultMaxMessageBytes
	}
	return m
}

func (m *model) applyOne(seq uint64, payload []byte) {
	m.log = append(m.log, entry{seq, string(payload)})
	m.applied = seq
	m.highest = max(m.highest, seq)
	m.stats.Applied++
}

func (m *model) drain() {
	for {
		if m.applied == ^uint64(0) {
			return
		}
		p, ok := m.pending[m.applied+1]
		if !ok {
			return
		}
		delete(m.pending, m.applied+1)
		m.stats.Drained++
		m.applyOne(m.applied+1, p)
	}
}

func (m *model) firstGap() (Range, bool) {
	if len(m.pending) == 0 {
		return Range{}, false
	}
	first := slices.Min(slices.Collect(maps.Keys(m.pending)))
	return Range{m.applied + 1, first - 1}, true
}

func (m *model) onMessage(seq uint64, payload []byte) (Range, bool, error) {
	switch {
	case len(payload) > m.maxBytes:
		return Range{}, false, ErrMessageTooLarge
	case seq <= m.applied:
		m.stats.Duplicates++
	case seq == m.applied+1:
		m.applyOne(seq, payload)
		m.drain()
	case seq-m.applied-1 > m.maxPending || uint64(len(m.pending)) >= m.maxPending && m.pending[seq] == nil:
		return Range{}, false, ErrNeedSnapshot
	case m.pending[seq] != nil:
		m.stats.Duplicates++
	default:
		m.pending[seq] = bytes.Clone(payload)
		if m.pending[seq] == nil {
			m.pending[seq] = []byte{}
		}
		m.highest = max(m.highest, seq)
		m.stats.Buffered++
	}
	g, ok := m.firstGap()
	return g, ok, nil
}

func (m *model) observeHighest(seq uint64) { m.highest = max(m.highest, seq) }

func (m *model) resetTo(s uint64) (Range, bool) {
	m.stats.Resets++
	if s < m.applied {
		m.stats.Dropped += uint64(len(m.pending))
		clear(m.pending)
		m.applied, m.highest = s, s
		return Range{}, false
	}
	for seq := range m.pending {
		if seq <= s {
			delete(m.pending, seq)
			m.stats.Dropped++
		}
	}
	m.applied = s
	m.highest = max(m.highest, s)
	m.drain()
	return m.firstGap()
}

func (m *model) gaps(limit int) []Range {
	var out []Range
	keys := slices.Sorted(maps.Keys(m.pending))
	start, done := m.applied+1, m.applied == ^uint64(0)
	for _, k := range keys {
		if k > start {
			out = append(out, Range{start, k - 1})
		}
		if k == ^uint64(0) {
			done = true
		}
		start = k + 1
	}
	if !done && start <= m.highest {
		out = append(out, Range{start, m.highest})
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// compare checks every observable of h against m and returns a description
// of the first difference, or "".
func compare(h *harness, m *model) string {
	w := h.w
	if w.Applied() != m.applied || w.Ack() != m.applied {
		return fmt.Sprintf("applied %d ack %d, model %d", w.Applied(), w.Ack(), m.applied)
	}
	if w.Highest() != m.highest {
		return fmt.Sprintf("highest %d, model %d", w.Highest(), m.highest)
	}
	if w.Pending() != len(m.pending) {
		return fmt.Sprintf("pending %d, model %d", w.Pending(), len(m.pending))
	}
	if w.Stats() != m.stats {
		return fmt.Sprintf("stats %+v, model %+v", w.Stats(), m.stats)
	}
	if got, want := w.Gaps(make([]Range, 0, 8)), m.gaps(8); !slices.Equal(got, want) {
		return fmt.Sprintf("gaps %v, model %v", got, want)
	}
	if !slices.Equal(h.log, m.log) {
		return fmt.Sprintf("log differs: len %d vs model %d", len(h.log), len(m.log))
	}
	return ""
}

func fmtRanges(rs []Range) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d-%d", r.From, r.To)
	}
	return b.String()
}
