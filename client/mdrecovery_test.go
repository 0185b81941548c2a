package client

import (
	"slices"
	"testing"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

func mdPayload(seq uint64) []byte {
	return engine.AppendOutput(nil, &engine.Output{Kind: engine.KindMarketData, MDKind: engine.MDLevel, MDSeq: seq, Instrument: 1, Side: engine.Buy, Price: int64(seq), Qty: 1})
}

// mdHarness runs MDRecovery against a fake set of nodes whose ring holds
// oldest..newest.
type mdHarness struct {
	t         *testing.T
	r         *MDRecovery
	got       []uint64
	asked     []wire.MDRequest
	servers   []int
	snapshots []uint64
}

func newMDHarness(t *testing.T, fromStart bool) *mdHarness {
	h := &mdHarness{t: t}
	h.r = NewMDRecovery(MDRecoveryConfig{
		Servers: 2, FromStart: fromStart, RetryNs: 10, ProbeNs: 100, MaxRetries: 3,
		Send: func(server int, req wire.MDRequest) {
			h.asked = append(h.asked, req)
			h.servers = append(h.servers, server)
		},
		Deliver:    func(seq uint64, _ []byte, _ bool) { h.got = append(h.got, seq) },
		OnSnapshot: func(mdSeq uint64, _ []wire.MDLevel) { h.snapshots = append(h.snapshots, mdSeq) },
	})
	return h
}

func (h *mdHarness) feed(now int64, seqs ...uint64) {
	for _, s := range seqs {
		h.r.Update(s, mdPayload(s), false, now)
	}
}

// answer serves the last request from a ring holding oldest..newest.
func (h *mdHarness) answer(now int64, oldest, newest uint64) {
	req := h.asked[len(h.asked)-1]
	if req.Kind == wire.MDRequestSnapshot {
		h.r.SnapshotChunk(&wire.MDSnapshot{MDSeq: newest, Chunk: 0, Chunks: 2}, now)
		h.r.SnapshotChunk(&wire.MDSnapshot{MDSeq: newest, Chunk: 1, Chunks: 2}, now)
		return
	}
	if req.First < oldest {
		h.r.Status(wire.MDStatus{First: req.First, Code: wire.MDTooOld, Oldest: oldest, Newest: newest}, now)
		return
	}
	if req.First > newest {
		h.r.Status(wire.MDStatus{First: req.First, Code: wire.MDNotYet, Oldest: oldest, Newest: newest}, now)
		return
	}
	for s := req.First; s < req.First+uint64(req.Count) && s <= newest; s++ {
		h.r.Update(s, mdPayload(s), true, now)
	}
}

func seqs(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestMDRecoveryFillsAGapByReRequest: updates after a gap wait; one
// request asks for the whole gap; the answer and the buffered updates are
// delivered once, in order; duplicates are dropped.
func TestMDRecoveryFillsAGapByReRequest(t *testing.T) {
	h := newMDHarness(t, false)
	h.feed(1, 1, 2, 3, 6, 8, 7)
	if len(h.asked) != 1 || h.asked[0].First != 4 || h.asked[0].Count != 3 {
		t.Fatalf("asked %+v", h.asked)
	}
	h.answer(2, 1, 8)
	h.feed(3, 9, 5, 10)
	if !slices.Equal(h.got, seqs(1, 10)) {
		t.Fatalf("delivered %v", h.got)
	}
	tr := h.r.Tracker()
	if tr.Gaps != 0 || tr.Filled != 2 || tr.Dups != 2 || tr.Conflicts != 0 || len(h.asked) != 1 {
		t.Fatalf("%+v, asked %d", tr, len(h.asked))
	}
	h.r.Update(9, mdPayload(99), false, 4)
	if tr := h.r.Tracker(); tr.Conflicts != 1 {
		t.Fatalf("a reused MD seq with other content: %+v", tr)
	}
}

// TestMDRecoveryRetriesTheNextNodeThenGivesUp: an unanswered request goes
// to the other node; after MaxRetries the gap is reported and delivery
// resumes at the first buffered update.
func TestMDRecoveryRetriesTheNextNodeThenGivesUp(t *testing.T) {
	h := newMDHarness(t, false)
	h.feed(1, 1, 4, 5)
	for now := int64(1); now <= 100; now += 10 {
		h.r.Tick(now)
	}
	if !slices.Equal(h.servers, []int{0, 1, 0, 1}) {
		t.Fatalf("servers %v", h.servers)
	}
	tr := h.r.Tracker()
	if tr.Gaps != 1 || tr.Missing != 2 || tr.LastGapFrom != 2 || tr.LastGapTo != 3 || !slices.Equal(h.got, []uint64{1, 4, 5}) {
		t.Fatalf("%+v delivered %v", tr, h.got)
	}
}

// TestMDRecoveryWaitsOutAFailover: the primary died just after releasing
// updates the consumer lost; the standby knows them only once it leads,
// so it answers NotYet meanwhile, and the dead node never answers. The
// consumer keeps asking past MaxRetries timeouts (a live node said not
// yet) and the promoted node fills the gap: no hole. Before, the retry
// budget (25 x 20 ms by default) ran out inside a 1 s lease.
func TestMDRecoveryWaitsOutAFailover(t *testing.T) {
	h := newMDHarness(t, false)
	h.r.cfg.WaitNs = 1000
	h.feed(1, 1, 2, 3, 6) // 4 and 5 lost; 6 the dead primary's last
	now := int64(1)
	for ; now < 200; now++ {
		if h.servers[len(h.servers)-1] == 1 {
			h.answer(now, 1, 3) // the standby: released 3 as far as it knows
		}
		h.r.Tick(now)
	}
	if n := len(h.asked); n < 2*(h.r.cfg.MaxRetries+1) {
		t.Fatalf("asked %d times in 200 ns of a failover", n)
	}
	if tr := h.r.Tracker(); tr.Gaps != 0 || !slices.Equal(h.got, []uint64{1, 2, 3}) {
		t.Fatalf("gave up while a live node said not yet: %+v delivered %v", tr, h.got)
	}
	for ; h.servers[len(h.servers)-1] != 1; now++ {
		h.r.Tick(now)
	}
	h.answer(now, 1, 6) // promoted: it publishes and serves 4..6
	if tr := h.r.Tracker(); tr.Gaps != 0 || tr.Filled != 2 || !slices.Equal(h.got, seqs(1, 6)) {
		t.Fatalf("%+v delivered %v", tr, h.got)
	}
}

// TestMDRecoveryWaitIsBounded: a node that says not yet for ever (no
// primary comes) holds delivery up for WaitNs, then the gap is reported.
func TestMDRecoveryWaitIsBounded(t *testing.T) {
	h := newMDHarness(t, false)
	h.r.cfg.WaitNs = 500
	h.feed(1, 1, 4, 5)
	now := int64(2)
	for ; now < 2000 && h.r.Tracker().Gaps == 0; now++ {
		h.answer(now, 1, 1) // every node: not yet
		h.r.Tick(now)
	}
	if tr := h.r.Tracker(); tr.Gaps != 1 || tr.Missing != 2 || now < 500 || now > 500+3*10 {
		t.Fatalf("%+v at %d, want the gap 2..3 reported 500 after its first ask", tr, now)
	}
	if !slices.Equal(h.got, []uint64{1, 4, 5}) {
		t.Fatalf("delivered %v", h.got)
	}
}

// TestMDRecoveryResyncsFromASnapshotPastTheRing: a gap older than the
// ring is answered TooOld; the consumer asks for the books, takes them at
// their MD seq and resumes after it, then fills the rest by re-request.
func TestMDRecoveryResyncsFromASnapshotPastTheRing(t *testing.T) {
	h := newMDHarness(t, false)
	h.feed(1, 1, 2, 500)
	h.answer(2, 100, 450) // TooOld: asks for the books
	if k := h.asked[len(h.asked)-1].Kind; k != wire.MDRequestSnapshot {
		t.Fatalf("asked %+v", h.asked)
	}
	h.answer(3, 100, 450) // the books at 450; then asks 451..500
	if req := h.asked[len(h.asked)-1]; req.Kind != wire.MDRequestRange || req.First != 451 || req.Count != 50 {
		t.Fatalf("after the snapshot asked %+v", req)
	}
	h.answer(4, 100, 500)
	if !slices.Equal(h.snapshots, []uint64{450}) || !slices.Equal(h.got, append([]uint64{1, 2}, seqs(451, 500)...)) {
		t.Fatalf("snapshots %v delivered %v", h.snapshots, h.got)
	}
	if tr := h.r.Tracker(); tr.Resyncs != 1 || tr.Resynced != 448 || tr.Gaps != 0 {
		t.Fatalf("%+v", tr)
	}
}

// TestMDRecoveryLateJoinerFromStart: a consumer that joins at MD seq 900
// with FromStart recovers 1..899 first.
func TestMDRecoveryLateJoinerFromStart(t *testing.T) {
	h := newMDHarness(t, true)
	h.feed(1, 900)
	if h.asked[0].First != 1 || h.asked[0].Count != 900 {
		t.Fatalf("asked %+v", h.asked)
	}
	h.answer(2, 1, 900)
	if !slices.Equal(h.got, seqs(1, 900)) {
		t.Fatalf("delivered %d updates", len(h.got))
	}
}

// TestMDRecoveryProbesAQuietTail: the last updates lost and the feed
// silent: a probe after ProbeNs finds them; a probe answered NotYet ends.
func TestMDRecoveryProbesAQuietTail(t *testing.T) {
	h := newMDHarness(t, false)
	h.feed(1, 1, 2)
	h.r.Tick(50)
	if len(h.asked) != 0 {
		t.Fatal("probed before ProbeNs")
	}
	h.r.Tick(101)
	if len(h.asked) != 1 || h.asked[0].First != 3 {
		t.Fatalf("asked %+v", h.asked)
	}
	h.answer(102, 1, 4)
	if !slices.Equal(h.got, seqs(1, 4)) {
		t.Fatalf("delivered %v", h.got)
	}
	h.r.Tick(300)
	h.answer(301, 1, 4) // NotYet
	h.r.Tick(305)
	if tr := h.r.Tracker(); tr.Gaps != 0 || tr.Filled != 2 {
		t.Fatalf("%+v", tr)
	}
}

// TestMDRecoveryOffReportsGaps: without nodes to ask, a gap is reported
// at once (the old MDTracker behaviour).
func TestMDRecoveryOffReportsGaps(t *testing.T) {
	var got []uint64
	r := NewMDRecovery(MDRecoveryConfig{Deliver: func(seq uint64, _ []byte, _ bool) { got = append(got, seq) }})
	for _, s := range []uint64{1, 2, 5, 6} {
		r.Update(s, mdPayload(s), false, 0)
	}
	if tr := r.Tracker(); tr.Gaps != 1 || tr.Missing != 2 || !slices.Equal(got, []uint64{1, 2, 5, 6}) {
		t.Fatalf("%+v %v", tr, got)
	}
}
