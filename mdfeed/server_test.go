package mdfeed

import (
	"slices"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

func rangeReq(first uint64, count uint32) wire.MDRequest {
	return wire.MDRequest{Kind: wire.MDRequestRange, First: first, Count: count}
}

func snapReq(instrument uint32) wire.MDRequest {
	return wire.MDRequest{Kind: wire.MDRequestSnapshot, Instrument: instrument}
}

// TestMDRequestRange: what a range request is answered with, by table.
func TestMDRequestRange(t *testing.T) {
	const from = addr(7)
	type want struct {
		seqs   []uint64          // MD_REPLAY updates (nil: an MD_STATUS)
		code   wire.MDStatusCode // the MD_STATUS
		oldest uint64
		newest uint64
	}
	for _, tc := range []struct {
		name      string
		cfg       Config
		held      [2]uint64 // ring from..to (0, 0: empty)
		released  uint64
		books     *books
		req       wire.MDRequest
		want      want
		malformed uint64
	}{
		{"within", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, rangeReq(5, 3), want{seqs: seqRange(5, 7)}, 0},
		{"capped at released", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, rangeReq(10, 100), want{seqs: seqRange(10, 15)}, 0},
		{"capped at the state's MD seq", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, &books{md: 12}, rangeReq(10, 100), want{seqs: seqRange(10, 12)}, 0},
		{"capped per request", Config{RingUpdates: 4096}, [2]uint64{1, 3000}, 3000, nil, rangeReq(1, 5000), want{seqs: seqRange(1, MaxPerRequest)}, 0},
		{"too old", Config{RingUpdates: 16}, [2]uint64{1, 20}, 15, nil, rangeReq(2, 3), want{code: wire.MDTooOld, oldest: 5, newest: 15}, 0},
		{"not yet", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, rangeReq(16, 3), want{code: wire.MDNotYet, oldest: 1, newest: 15}, 0},
		{"empty ring", Config{RingUpdates: 64}, [2]uint64{}, 0, nil, rangeReq(1, 3), want{code: wire.MDNotYet, oldest: 1, newest: 0}, 0},
		{"no ring", Config{}, [2]uint64{}, 0, nil, rangeReq(1, 3), want{code: wire.MDUnavailable, oldest: 1, newest: 0}, 0},
		{"snapshot without books", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, snapReq(wire.AllInstruments), want{code: wire.MDUnavailable, oldest: 1, newest: 15}, 0},
		{"malformed: unknown kind", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, wire.MDRequest{Kind: 9, First: 1, Count: 1}, want{code: wire.MDUnavailable, oldest: 1, newest: 15}, 1},
		{"malformed: from 0", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, rangeReq(0, 3), want{code: wire.MDUnavailable, oldest: 1, newest: 15}, 1},
		{"malformed: no updates", Config{RingUpdates: 64}, [2]uint64{1, 20}, 15, nil, rangeReq(5, 0), want{code: wire.MDUnavailable, oldest: 1, newest: 15}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, tc.cfg)
			if tc.held[1] > 0 {
				fill(t, f, tc.held[0], tc.held[1], sameCmd)
			}
			f.OnHeartbeat(heartbeatFrame(t, tc.released), 0)
			var bx *books
			if tc.books != nil {
				bx = tc.books
			}
			if bx != nil {
				f.Request(from, tc.req, 0, bx)
			} else {
				f.Request(from, tc.req, 0, nil)
			}
			got := drain(t, f)
			st := f.Stats()
			if st.Requests != 1 || st.Malformed != tc.malformed {
				t.Fatalf("requests %d malformed %d", st.Requests, st.Malformed)
			}
			if tc.want.seqs == nil {
				if len(got) != 1 || got[0].typ != wire.TypeMDStatus || got[0].to != from {
					t.Fatalf("sent %+v, want one MD_STATUS", got)
				}
				s := got[0].st
				if s.Code != tc.want.code || s.First != tc.req.First || s.Oldest != tc.want.oldest || s.Newest != tc.want.newest || s.Origin != origin {
					t.Fatalf("status %+v, want %+v", s, tc.want)
				}
				if st.Refused != 1 || st.Served != 0 {
					t.Fatalf("refused %d served %d", st.Refused, st.Served)
				}
				return
			}
			for _, s := range got {
				if s.typ != wire.TypeMDReplay || s.to != from || s.first != s.seqs[0] {
					t.Fatalf("frame %s to %d seq %d first update %d", s.typ, s.to, s.first, s.seqs[0])
				}
			}
			if seqs := seqsOf(got); !slices.Equal(seqs, tc.want.seqs) {
				t.Fatalf("served %v, want %v", seqs, tc.want.seqs)
			}
			if st.Served != uint64(len(tc.want.seqs)) || st.Refused != 0 {
				t.Fatalf("served %d refused %d", st.Served, st.Refused)
			}
			if len(tc.want.seqs) > 100 && len(got) < 2 {
				t.Fatal("many updates in one frame")
			}
		})
	}
}

// TestMDRequestReplacesAnUndrainedAnswer: the answer is to the last
// request only; a snapshot request that only waits sends nothing stale.
func TestMDRequestReplacesAnUndrainedAnswer(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 64})
	fill(t, f, 1, 20, sameCmd)
	f.OnHeartbeat(heartbeatFrame(t, 15), 0)
	f.Request(1, rangeReq(1, 5), 0, nil)
	f.Request(2, rangeReq(16, 5), 0, nil)
	if got := drain(t, f); len(got) != 1 || got[0].to != 2 || got[0].st.Code != wire.MDNotYet {
		t.Fatalf("sent %+v", got)
	}
	bx := &books{md: 18, levels: 3}
	f.Request(1, snapReq(1), 0, bx) // waits for md 18
	f.Request(3, rangeReq(1, 5), 0, nil)
	f.Request(2, snapReq(1), 0, bx) // joins
	if got := drain(t, f); len(got) != 0 {
		t.Fatalf("sent %+v after a snapshot request that waits", got)
	}
}

// TestMDRateLimit: a requester gets Burst answers at once, then one per
// RefillNs; another is not affected; served updates cost tokens too.
func TestMDRateLimit(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 4096})
	fill(t, f, 1, 3000, sameCmd)
	f.OnHeartbeat(heartbeatFrame(t, 3000), 0)
	codes := func(from addr, n int, now int64, req wire.MDRequest) (served, limited int) {
		for range n {
			f.Request(from, req, now, nil)
			for _, s := range drain(t, f) {
				switch {
				case s.typ == wire.TypeMDReplay:
					served++
				case s.st.Code == wire.MDRateLimited:
					limited++
				default:
					t.Fatalf("unexpected %+v", s)
				}
			}
		}
		return served, limited
	}
	if s, l := codes(1, Burst+10, 0, rangeReq(1, 1)); s != Burst || l != 10 {
		t.Fatalf("served %d limited %d, want %d and 10", s, l, Burst)
	}
	if st := f.Stats(); st.RateLimited != 10 || st.Refused != 10 {
		t.Fatalf("stats %+v", st)
	}
	if s, l := codes(2, 1, 0, rangeReq(1, 1)); s != 1 || l != 0 {
		t.Fatal("another requester limited")
	}
	if s, l := codes(1, 5, 3*RefillNs, rangeReq(1, 1)); s != 3 || l != 2 {
		t.Fatalf("after 3 refills: served %d limited %d", s, l)
	}
	// A full answer costs 1 + MaxPerRequest/UpdatesPerToken tokens: with
	// Burst = 64 and 2048/64 = 32, two answers, then the third is limited.
	if s, l := codes(3, 3, 0, rangeReq(1, MaxPerRequest)); l != 1 || s < 2*MaxPerRequest/34 {
		t.Fatalf("large answers: %d frames, %d limited", s, l)
	}
}

// TestMDRequesterTable: the rate limiter's table is bounded; idle entries
// make room, otherwise a new requester is refused.
func TestMDRequesterTable(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 64})
	fill(t, f, 1, 10, sameCmd)
	f.OnHeartbeat(heartbeatFrame(t, 10), 0)
	for a := range addr(MaxRequesters) {
		f.Request(a, rangeReq(1, 1), 0, nil)
		drain(t, f)
	}
	f.Request(MaxRequesters, rangeReq(1, 1), RequesterIdleNs, nil)
	if got := drain(t, f); len(got) != 1 || got[0].st.Code != wire.MDRateLimited {
		t.Fatalf("a new requester with a full table: %+v", got)
	}
	f.Request(5, rangeReq(1, 1), RequesterIdleNs, nil)
	if got := drain(t, f); len(got) != 1 || got[0].typ != wire.TypeMDReplay {
		t.Fatalf("a known requester with a full table: %+v", got)
	}
	f.Request(MaxRequesters, rangeReq(1, 1), RequesterIdleNs+1, nil)
	if got := drain(t, f); len(got) != 1 || got[0].typ != wire.TypeMDReplay {
		t.Fatalf("a new requester once others idled: %+v", got)
	}
	if len(f.buckets) != 2 {
		t.Fatalf("%d entries after the idle ones made room", len(f.buckets))
	}
}

// TestMDSnapshot: scenarios of book snapshot requests, by table.
func TestMDSnapshot(t *testing.T) {
	per := wire.MaxMDSnapshotLevels(wire.DefaultDatagramLen)
	type step struct {
		op    string // "req", "hb" (released md), "serve"
		from  addr
		instr uint32
		nowNs int64
		md    uint64 // hb: released; req: the books' MD seq
		want  []addr // chunks' addressees in order, or a refusal as -to
		code  wire.MDStatusCode
	}
	chunks := func(n int, to ...addr) []addr {
		var out []addr
		for _, a := range to {
			for range n {
				out = append(out, a)
			}
		}
		return out
	}
	const levels = 100
	nch := (levels + per - 1) / per
	for _, tc := range []struct {
		name    string
		levels  int
		steps   []step
		served  uint64
		expired uint64
	}{
		{"released: sent at once", levels, []step{{op: "req", from: 1, md: 10, want: chunks(nch, 1)}}, 1, 0},
		{"empty books: one chunk", 0, []step{{op: "req", from: 1, md: 10, want: chunks(1, 1)}}, 1, 0},
		{"held back until released, waiters join", levels, []step{
			{op: "req", from: 1, md: 18},
			{op: "req", from: 2, md: 18},
			{op: "req", from: 1, md: 18}, // asked again: one copy
			{op: "hb", md: 17},
			{op: "hb", md: 18, want: chunks(nch, 1, 2)},
		}, 2, 0},
		{"another instrument while one waits", levels, []step{
			{op: "req", from: 1, md: 18, instr: 1},
			{op: "req", from: 2, md: 18, instr: 2, code: wire.MDUnavailable},
		}, 0, 0},
		{"spaced", levels, []step{
			{op: "req", from: 1, md: 10, nowNs: 1, want: chunks(nch, 1)},
			{op: "req", from: 2, md: 10, nowNs: SnapshotEveryNs, code: wire.MDUnavailable},
			{op: "req", from: 2, md: 10, nowNs: SnapshotEveryNs + 1, want: chunks(nch, 2)},
		}, 2, 0},
		{"too large", MaxSnapshotLevels + 1, []step{{op: "req", from: 1, md: 10, code: wire.MDUnavailable}}, 0, 0},
		{"expires unreleased", levels, []step{
			{op: "req", from: 1, md: 18, nowNs: 5},
			{op: "serve", nowNs: 5 + SnapshotWaitNs},
			{op: "serve", nowNs: 6 + SnapshotWaitNs},
			{op: "hb", md: 18, nowNs: 6 + SnapshotWaitNs},
		}, 0, 1},
		{"expired when the next asks", levels, []step{
			{op: "req", from: 1, md: 18, nowNs: 5},
			{op: "req", from: 2, md: 10, nowNs: 6 + SnapshotWaitNs, want: chunks(nch, 2)},
		}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t, Config{RingUpdates: 64})
			fill(t, f, 1, 20, sameCmd)
			f.OnHeartbeat(heartbeatFrame(t, 15), 0)
			for i, s := range tc.steps {
				switch s.op {
				case "req":
					f.Request(s.from, snapReq(s.instr), s.nowNs, &books{md: s.md, levels: tc.levels})
				case "hb":
					f.OnHeartbeat(heartbeatFrame(t, s.md), s.nowNs)
				case "serve":
					f.ServeSnapshot(s.nowNs)
				}
				got := drain(t, f)
				if s.code != 0 {
					if len(got) != 1 || got[0].typ != wire.TypeMDStatus || got[0].st.Code != s.code || got[0].to != s.from {
						t.Fatalf("step %d: sent %+v, want an MD_STATUS %d", i, got, s.code)
					}
					continue
				}
				var to []addr
				for c, g := range got {
					if g.typ != wire.TypeMDSnapshot || g.snap.MDSeq != s.md && s.op == "req" || int(g.snap.Chunks) != len(s.want)/max(1, countDistinct(s.want)) || int(g.snap.Chunk) != c%int(g.snap.Chunks) {
						t.Fatalf("step %d: frame %d: %s %+v", i, c, g.typ, g.snap)
					}
					to = append(to, g.to)
				}
				if !slices.Equal(to, s.want) {
					t.Fatalf("step %d: chunks to %v, want %v", i, to, s.want)
				}
			}
			st := f.Stats()
			if st.SnapshotsServed != tc.served || st.SnapshotsExpired != tc.expired {
				t.Fatalf("served %d expired %d, want %d %d", st.SnapshotsServed, st.SnapshotsExpired, tc.served, tc.expired)
			}
		})
	}
}

func countDistinct(a []addr) int {
	var seen []addr
	for _, x := range a {
		if !slices.Contains(seen, x) {
			seen = append(seen, x)
		}
	}
	return len(seen)
}

// TestMDSnapshotWaiters: at most MaxSnapshotWaiters wait for one snapshot.
func TestMDSnapshotWaiters(t *testing.T) {
	f := newFeed(t, Config{RingUpdates: 64})
	fill(t, f, 1, 20, sameCmd)
	bx := &books{md: 18, levels: 1}
	for a := range addr(MaxSnapshotWaiters) {
		f.Request(a, snapReq(1), 0, bx)
		if got := drain(t, f); len(got) != 0 {
			t.Fatalf("waiter %d: sent %+v", a, got)
		}
	}
	f.Request(MaxSnapshotWaiters, snapReq(1), 0, bx)
	if got := drain(t, f); len(got) != 1 || got[0].st.Code != wire.MDUnavailable {
		t.Fatalf("one waiter too many: %+v", got)
	}
	f.OnHeartbeat(heartbeatFrame(t, 18), 0)
	if got := drain(t, f); len(got) != MaxSnapshotWaiters {
		t.Fatalf("%d chunks to %d waiters", len(got), MaxSnapshotWaiters)
	}
	if st := f.Stats(); st.SnapshotsServed != MaxSnapshotWaiters || st.SnapshotChunks != MaxSnapshotWaiters || st.Refused != 1 {
		t.Fatalf("stats %+v", st)
	}
}
