package arbiter

import (
	"errors"
	"testing"
)

// fakeBackend is a Backend whose replies are queued by the test: Tick
// records the keeper's due request and delivers the queued replies, each
// to the keeper first, then to deliver, as Backend.Tick says.
type fakeBackend struct {
	k        *Keeper
	ticks    []int64
	sent     []Request
	queued   []Reply
	proposal InSyncProposal
	closed   int
	released []Request
}

func (b *fakeBackend) Tick(nowNs int64, deliver func(Reply)) {
	b.ticks = append(b.ticks, nowNs)
	if req, ok := b.k.Tick(nowNs); ok {
		b.sent = append(b.sent, req)
	}
	for _, r := range b.queued {
		r.Deliver(b.k)
		deliver(r)
	}
	b.queued = b.queued[:0]
}

func (b *fakeBackend) ProposeInSync(baseVersion uint64, members []NodeID) error {
	p, err := NewInSyncProposal(baseVersion, members)
	if err != nil {
		return err
	}
	b.proposal = p
	return nil
}

func (b *fakeBackend) Close() error { b.closed++; return nil }

func (b *fakeBackend) Release(req Request) { b.released = append(b.released, req) }

func newFakeLink(t *testing.T, after uint64) (*Link, *fakeBackend) {
	t.Helper()
	b := &fakeBackend{}
	l, err := NewLink(1, testConfig, after, func(k *Keeper) (Backend, error) { b.k = k; return b, nil })
	if err != nil {
		t.Fatal(err)
	}
	if b.k != l.Keeper() || l.Backend() != b {
		t.Fatal("the link does not hold the keeper and backend it built")
	}
	return l, b
}

// TestLinkSilence: a link reports its arbiter silent once
// SilentLeases lease durations pass without a reply (from the start, or
// from the last reply, or from when the keeper began asking: a keeper
// that does not want the lease sends nothing), once per episode; a reply ends the episode
// (Replied says so) and a later silence is a new one. A reply delivered
// from Tick counts before that Tick's check.
func TestLinkSilence(t *testing.T) {
	type step struct {
		op      string // "tick", "reply" (Replied at now), "deliver" (a reply from the next Tick)
		nowNs   int64
		silent  bool  // tick: WentSilent
		forNs   int64 // tick: SilentNs when silent
		again   bool  // reply: Replied's answer; tick: what deliver saw
		lastNs  int64 // LastReplyNs after the step
		lastSet bool  // check lastNs
		quiet   bool  // tick: the keeper does not want the lease
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"never answered", []step{
			{op: "tick", nowNs: 0},
			{op: "tick", nowNs: 2999},
			{op: "tick", nowNs: 3000, silent: true, forNs: 3000},
			{op: "tick", nowNs: 3001},
			{op: "tick", nowNs: 100000},
		}},
		{"silent after the last reply", []step{
			{op: "reply", nowNs: 500, lastNs: 500, lastSet: true},
			{op: "tick", nowNs: 3499},
			{op: "tick", nowNs: 3500, silent: true, forNs: 3000},
			{op: "tick", nowNs: 3600},
		}},
		{"answering again starts a new episode", []step{
			{op: "tick", nowNs: 3000, silent: true, forNs: 3000},
			{op: "reply", nowNs: 4000, again: true, lastNs: 4000, lastSet: true},
			{op: "reply", nowNs: 4001, lastNs: 4001, lastSet: true},
			{op: "tick", nowNs: 7000},
			{op: "tick", nowNs: 7001, silent: true, forNs: 3000},
			{op: "tick", nowNs: 9000},
			{op: "reply", nowNs: 9500, again: true},
		}},
		{"replies while answering are not again", []step{
			{op: "reply", nowNs: 100},
			{op: "reply", nowNs: 200},
			{op: "tick", nowNs: 3199},
			{op: "tick", nowNs: 3200, silent: true, forNs: 3000},
		}},
		{"no request, no silence: it counts from when the keeper asks", []step{
			{op: "tick", nowNs: 0, quiet: true},
			{op: "tick", nowNs: 5000, quiet: true},
			{op: "tick", nowNs: 6000},
			{op: "tick", nowNs: 8999},
			{op: "tick", nowNs: 9000, silent: true, forNs: 3000},
			{op: "tick", nowNs: 20000, quiet: true},
		}},
		{"a reply from Tick counts before its check", []step{
			{op: "tick", nowNs: 3000, silent: true, forNs: 3000},
			{op: "deliver"},
			{op: "tick", nowNs: 3500, again: true, lastNs: 3500, lastSet: true},
			{op: "tick", nowNs: 6499},
			{op: "tick", nowNs: 6500, silent: true, forNs: 3000},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, b := newFakeLink(t, 0)
			var again bool
			deliver := func(Reply) { again = l.Replied(b.ticks[len(b.ticks)-1]) }
			for i, s := range tc.steps {
				switch s.op {
				case "tick":
					again = false
					rd := l.Tick(s.nowNs, !s.quiet, deliver)
					want := LinkReady{WentSilent: s.silent}
					if s.silent {
						want.SilentNs = s.forNs
					}
					if rd != want || again != s.again {
						t.Fatalf("step %d: tick at %d = %+v (again %v), want %+v (again %v)", i, s.nowNs, rd, again, want, s.again)
					}
				case "reply":
					if got := l.Replied(s.nowNs); got != s.again {
						t.Fatalf("step %d: Replied(%d) = %v, want %v", i, s.nowNs, got, s.again)
					}
				case "deliver":
					b.queued = append(b.queued, Reply{Kind: ReplyDeny, RequestID: 99})
				}
				if s.lastSet && l.LastReplyNs() != s.lastNs {
					t.Fatalf("step %d: last reply %d, want %d", i, l.LastReplyNs(), s.lastNs)
				}
			}
		})
	}
}

// TestLinkTick: Tick sets whether the node wants the lease before the
// backend runs the keeper (no request without wanting, an acquire at
// once when it starts wanting), hands the backend nowNs, and a reply the
// backend delivers has reached the keeper when deliver sees it; MayLead
// and Lease then report the grant, timed from the request's send.
func TestLinkTick(t *testing.T) {
	l, b := newFakeLink(t, 0)
	var deliveredMayLead []bool
	deliver := func(r Reply) {
		l.Replied(b.ticks[len(b.ticks)-1])
		deliveredMayLead = append(deliveredMayLead, l.MayLead(b.ticks[len(b.ticks)-1]))
	}
	l.Tick(10, false, deliver)
	if len(b.sent) != 0 || len(b.ticks) != 1 || b.ticks[0] != 10 {
		t.Fatalf("not wanting: sent %+v, ticks %v", b.sent, b.ticks)
	}
	l.Tick(20, true, deliver)
	if len(b.sent) != 1 || b.sent[0].Kind != RequestAcquire || b.sent[0].SentAtNs != 20 {
		t.Fatalf("wanting: sent %+v", b.sent)
	}
	if held, rem, epoch := l.Lease(30); held || rem != 0 || epoch != 0 || l.MayLead(30) {
		t.Fatalf("before a grant: held %v remaining %d epoch %d", held, rem, epoch)
	}
	b.queued = append(b.queued, Reply{Kind: ReplyGrant, RequestID: b.sent[0].ID, Epoch: 4, DurationNs: 1000})
	l.Tick(40, true, deliver)
	if len(deliveredMayLead) != 1 || !deliveredMayLead[0] || l.LastReplyNs() != 40 {
		t.Fatalf("grant delivered: may lead inside deliver %v, last reply %d", deliveredMayLead, l.LastReplyNs())
	}
	// The view runs from the send at 20 for 1000 ns (margin 150).
	if held, rem, epoch := l.Lease(100); !held || rem != 920 || epoch != 4 {
		t.Fatalf("granted: held %v remaining %d epoch %d", held, rem, epoch)
	}
	if held, rem, epoch := l.Lease(900); held || rem != 120 || epoch != 4 || l.MayLead(900) {
		t.Fatalf("inside the margin: held %v remaining %d epoch %d", held, rem, epoch)
	}
	if held, rem, _ := l.Lease(5000); held || rem != 0 {
		t.Fatalf("ended: held %v remaining %d", held, rem)
	}
	l.Tick(50, false, deliver)
	if len(b.sent) != 1 {
		t.Fatalf("no longer wanting, yet sent %+v", b.sent[1:])
	}
	if err := l.Close(); err != nil || b.closed != 1 {
		t.Fatalf("close %v, backend closed %d times", err, b.closed)
	}
}

// TestLinkRequestIDs: the keeper's request IDs start right after the
// number NewLink is given, so a reply to a request of an earlier run
// (IDs at or below it) matches nothing.
func TestLinkRequestIDs(t *testing.T) {
	for _, after := range []uint64{0, 7, 1 << 40} {
		l, b := newFakeLink(t, after)
		l.Tick(0, true, func(Reply) {})
		if len(b.sent) != 1 || b.sent[0].ID != after+1 {
			t.Fatalf("after %d: first request %+v", after, b.sent)
		}
		old := Reply{Kind: ReplyGrant, RequestID: after, Epoch: 1, DurationNs: 1000}
		if after > 0 && old.Deliver(l.Keeper()) {
			t.Fatalf("after %d: a grant of an earlier run's request was used", after)
		}
	}
}

// TestNewLinkErrors: a bad keeper config, the backend's own error and a
// nil backend are refused.
func TestNewLinkErrors(t *testing.T) {
	ok := func(k *Keeper) (Backend, error) { return &fakeBackend{k: k}, nil }
	if _, err := NewLink(NodeNone, testConfig, 0, ok); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NodeNone: %v", err)
	}
	if _, err := NewLink(1, Config{}, 0, ok); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("zero config: %v", err)
	}
	boom := errors.New("boom")
	if _, err := NewLink(1, testConfig, 0, func(*Keeper) (Backend, error) { return nil, boom }); err != boom {
		t.Fatalf("backend error: %v", err)
	}
	if _, err := NewLink(1, testConfig, 0, func(*Keeper) (Backend, error) { return nil, nil }); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil backend: %v", err)
	}
}

// TestLinkProposeInSync: a proposal the backend takes hurries the renew
// that carries it (sent at once, not at the renew interval); one it
// refuses returns its error and hurries nothing.
func TestLinkProposeInSync(t *testing.T) {
	l, b := newFakeLink(t, 0)
	nop := func(Reply) {}
	l.Tick(0, true, nop)
	b.queued = append(b.queued, Reply{Kind: ReplyGrant, RequestID: b.sent[0].ID, Epoch: 1, DurationNs: 1000, InSyncVersion: 1})
	l.Tick(10, true, nop) // the grant: the next renew is due at 250
	if len(b.sent) != 1 {
		t.Fatalf("sent %+v", b.sent)
	}
	if err := l.ProposeInSync(0, nil, 100); !errors.Is(err, ErrProposal) {
		t.Fatalf("base 0: %v", err)
	}
	l.Tick(100, true, nop)
	if len(b.sent) != 1 {
		t.Fatalf("a refused proposal hurried the renew: %+v", b.sent[1:])
	}
	if err := l.ProposeInSync(1, []NodeID{2}, 120); err != nil {
		t.Fatal(err)
	}
	if b.proposal.BaseVersion != 1 || b.proposal.N != 1 || b.proposal.Members[0] != 2 {
		t.Fatalf("backend proposal %+v", b.proposal)
	}
	l.Tick(120, true, nop)
	if len(b.sent) != 2 || b.sent[1].Kind != RequestRenew || b.sent[1].SentAtNs != 120 {
		t.Fatalf("the proposal's renew was not hurried: %+v", b.sent)
	}
}

// nopBackend runs the keeper and sends nothing.
type nopBackend struct{ k *Keeper }

func (b nopBackend) Tick(nowNs int64, _ func(Reply))    { b.k.Tick(nowNs) }
func (nopBackend) ProposeInSync(uint64, []NodeID) error { return nil }
func (nopBackend) Close() error                         { return nil }
func (nopBackend) Release(Request)                      {}

// TestLinkTickAllocs: a Tick (with a backend that allocates nothing)
// allocates nothing, silent or not, wanting the lease or not.
func TestLinkTickAllocs(t *testing.T) {
	l, err := NewLink(1, testConfig, 0, func(k *Keeper) (Backend, error) { return nopBackend{k}, nil })
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(Reply) {}
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += 100
		l.Tick(now, now%300 != 0, deliver)
		if now%5000 == 0 {
			l.Replied(now)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per Tick", n)
	}
}
