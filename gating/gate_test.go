package gating

import (
	"errors"
	"slices"
	"testing"
)

func newTestGate(t *testing.T, cfg Config) *Gate {
	t.Helper()
	g, err := NewGate(cfg)
	if err != nil {
		t.Fatalf("NewGate(%+v): %v", cfg, err)
	}
	return g
}

// heldGate returns a Gate holding the lease with applied and durable at 100,
// so the standby acks alone decide the released watermark.
func heldGate(t *testing.T, cfg Config, members ...uint32) *Gate {
	t.Helper()
	g := newTestGate(t, cfg)
	if err := g.SetInSync(1, members, 0); err != nil {
		t.Fatalf("SetInSync: %v", err)
	}
	g.SetApplied(100)
	g.SetDurable(100)
	g.SetLease(true)
	return g
}

func TestNewGateRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{RequiredAcks: -1},
		{RequiredAcks: MaxStandbys + 1},
		{MinInSync: -1},
		{MinInSync: MaxStandbys + 1},
	} {
		if _, err := NewGate(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewGate(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestRequiredAckKOfN proves the k-th highest member ack is required, and
// that k 0 (the default) or k above the set size means every member.
func TestRequiredAckKOfN(t *testing.T) {
	tests := []struct {
		requiredAcks int
		acks         []uint64 // of members 1, 2, 3
		want         uint64
	}{
		{requiredAcks: 0, acks: []uint64{10, 20, 30}, want: 10},
		{requiredAcks: 1, acks: []uint64{10, 20, 30}, want: 30},
		{requiredAcks: 2, acks: []uint64{10, 20, 30}, want: 20},
		{requiredAcks: 3, acks: []uint64{10, 20, 30}, want: 10},
		{requiredAcks: 2, acks: []uint64{30, 10, 20}, want: 20},
		{requiredAcks: 2, acks: []uint64{0, 0, 40}, want: 0},
		{requiredAcks: 1, acks: []uint64{0, 0, 0}, want: 0},
		{requiredAcks: 5, acks: []uint64{10, 20, 30}, want: 10},
		// The ack is capped by applied and durable (100).
		{requiredAcks: 1, acks: []uint64{10, 20, 300}, want: 100},
	}
	for _, tt := range tests {
		g := heldGate(t, Config{RequiredAcks: tt.requiredAcks}, 1, 2, 3)
		for i, ack := range tt.acks {
			g.OnAck(uint32(i+1), ack, 1)
		}
		if got := g.Released(); got != tt.want {
			t.Errorf("k=%d acks=%v: Released() = %d, want %d", tt.requiredAcks, tt.acks, got, tt.want)
		}
	}
}

// TestReleasedIsMinOfAppliedAckDurable proves each of the three inputs alone
// can hold the watermark back.
func TestReleasedIsMinOfAppliedAckDurable(t *testing.T) {
	tests := []struct {
		applied, ack, durable, want uint64
	}{
		{applied: 5, ack: 7, durable: 9, want: 5},
		{applied: 9, ack: 5, durable: 7, want: 5},
		{applied: 7, ack: 9, durable: 5, want: 5},
		{applied: 0, ack: 9, durable: 9, want: 0},
	}
	for _, tt := range tests {
		g := newTestGate(t, Config{MinInSync: 1})
		if err := g.SetInSync(1, []uint32{1}, 0); err != nil {
			t.Fatal(err)
		}
		g.SetLease(true)
		g.SetApplied(tt.applied)
		g.OnAck(1, tt.ack, 1)
		g.SetDurable(tt.durable)
		if got := g.Released(); got != tt.want {
			t.Errorf("%+v: Released() = %d", tt, got)
		}
	}
}

// TestEmptyInSyncSet proves an empty set releases min(applied, durable) with
// MinInSync 0 and nothing with MinInSync 1.
func TestEmptyInSyncSet(t *testing.T) {
	tests := []struct {
		minInSync int
		want      uint64
	}{
		{minInSync: 0, want: 7},
		{minInSync: 1, want: 0},
	}
	for _, tt := range tests {
		g := newTestGate(t, Config{MinInSync: tt.minInSync})
		g.SetLease(true)
		g.SetApplied(9)
		g.SetDurable(7)
		g.OnAck(1, 9, 1) // a non-member: does not count, with or without a set
		if got := g.Released(); got != tt.want {
			t.Errorf("MinInSync %d: Released() = %d, want %d", tt.minInSync, got, tt.want)
		}
	}
}

// TestInSyncBelowMinFreezes proves that shrinking the set below MinInSync
// stops further release but keeps what was released.
func TestInSyncBelowMinFreezes(t *testing.T) {
	g := heldGate(t, Config{MinInSync: 2}, 1, 2)
	g.OnAck(1, 10, 1)
	g.OnAck(2, 10, 1)
	if got := g.Released(); got != 10 {
		t.Fatalf("Released() = %d, want 10", got)
	}
	if err := g.SetInSync(2, []uint32{1}, 2); err != nil {
		t.Fatal(err)
	}
	g.OnAck(1, 50, 3)
	if got := g.Released(); got != 10 {
		t.Fatalf("below MinInSync: Released() = %d, want 10", got)
	}
	if err := g.SetInSync(3, []uint32{1, 2}, 4); err != nil {
		t.Fatal(err)
	}
	g.OnAck(2, 40, 5)
	if got := g.Released(); got != 40 {
		t.Fatalf("back at MinInSync: Released() = %d, want 40", got)
	}
}

// TestLeaseLossFreezesReleased proves no input moves the watermark while the
// lease is not held, that Publish hands nothing out then, and that the
// watermark catches up when the lease is held again.
func TestLeaseLossFreezesReleased(t *testing.T) {
	g := heldGate(t, Config{}, 1)
	g.OnAck(1, 5, 1)
	if got := g.Released(); got != 5 {
		t.Fatalf("Released() = %d, want 5", got)
	}
	p, _ := NewPublisher[int](8)
	_ = p.Enqueue(5, 50)
	_ = p.Enqueue(6, 60)

	g.SetLease(false)
	g.SetApplied(200)
	g.SetDurable(200)
	g.OnAck(1, 150, 2)
	if err := g.SetInSync(2, nil, 3); err != nil {
		t.Fatal(err)
	}
	if got := g.Released(); got != 5 {
		t.Fatalf("lease not held: Released() = %d, want 5", got)
	}
	if seq, _, ok := p.Next(Publishable(g)); ok {
		t.Fatalf("handed out seq %d while the lease is not held", seq)
	}

	g.SetLease(true)
	if got := g.Released(); got != 200 {
		t.Fatalf("lease held again: Released() = %d, want 200", got)
	}
	n := 0
	for bound := Publishable(g); ; n++ {
		if _, _, ok := p.Next(bound); !ok {
			break
		}
	}
	if n != 2 {
		t.Fatalf("handed out %d with the lease, want 2", n)
	}
}

// TestAckRegressionIgnored proves an older ack arriving late changes neither
// the standby's ack, nor its last ack time, nor the watermark.
func TestAckRegressionIgnored(t *testing.T) {
	g := heldGate(t, Config{}, 1)
	g.OnAck(1, 10, 100)
	g.OnAck(1, 4, 200)
	st, ok := g.Standby(1)
	if !ok || st.AckSeq != 10 || st.LastAckNs != 100 {
		t.Fatalf("Standby(1) = %+v %v, want ack 10 at 100", st, ok)
	}
	if got := g.Released(); got != 10 {
		t.Fatalf("Released() = %d, want 10", got)
	}
	if s := g.Stats(); s.AcksRegressed != 1 || s.AcksAccepted != 1 {
		t.Fatalf("Stats() = %+v", s)
	}
	// An equal ack is a live standby repeating itself: it refreshes the time.
	g.OnAck(1, 10, 300)
	if st, _ := g.Standby(1); st.LastAckNs != 300 {
		t.Fatalf("equal ack: LastAckNs = %d, want 300", st.LastAckNs)
	}
}

// TestAppliedDurableRegressionIgnored proves applied and durable are
// watermarks: a lower value changes nothing.
func TestAppliedDurableRegressionIgnored(t *testing.T) {
	g := heldGate(t, Config{}, 1)
	g.SetApplied(50)
	g.SetDurable(50)
	if g.Applied() != 100 || g.Durable() != 100 {
		t.Fatalf("applied %d durable %d, want 100 100", g.Applied(), g.Durable())
	}
}

// TestNonMemberAckIgnored proves a non-member's ack does not count but is
// remembered, so re-adding the standby uses it at once.
func TestNonMemberAckIgnored(t *testing.T) {
	g := heldGate(t, Config{}, 1)
	g.OnAck(1, 10, 1)
	g.OnAck(2, 90, 1)
	if got := g.Released(); got != 10 {
		t.Fatalf("Released() = %d, want 10", got)
	}
	if s := g.Stats(); s.AcksNonMember != 1 {
		t.Fatalf("AcksNonMember = %d, want 1", s.AcksNonMember)
	}
	// Remove 1, add 2: 2's remembered ack counts immediately.
	if err := g.SetInSync(2, []uint32{2}, 2); err != nil {
		t.Fatal(err)
	}
	if got := g.Released(); got != 90 {
		t.Fatalf("after re-adding 2: Released() = %d, want 90", got)
	}
	st, ok := g.Standby(1)
	if !ok || st.Member || st.AckSeq != 10 {
		t.Fatalf("Standby(1) = %+v %v", st, ok)
	}
}

// TestReleasedNeverGoesBackOnMembership proves that changing the set so the
// required ack drops (a low member added, a high member removed in k of n)
// keeps the watermark where it was.
func TestReleasedNeverGoesBackOnMembership(t *testing.T) {
	g := heldGate(t, Config{RequiredAcks: 2}, 1, 2, 3)
	g.OnAck(1, 30, 1)
	g.OnAck(2, 30, 1)
	g.OnAck(3, 2, 1)
	if got := g.Released(); got != 30 {
		t.Fatalf("Released() = %d, want 30", got)
	}
	if err := g.SetInSync(2, []uint32{2, 3}, 2); err != nil {
		t.Fatal(err)
	}
	if got := g.Released(); got != 30 {
		t.Fatalf("after removal: Released() = %d, want 30", got)
	}
	if err := g.SetInSync(3, []uint32{2, 3, 4}, 3); err != nil {
		t.Fatal(err)
	}
	if got := g.Released(); got != 30 {
		t.Fatalf("after adding a new member: Released() = %d, want 30", got)
	}
}

// TestSetInSyncErrorsChangeNothing proves each rejected set leaves the
// membership, version and watermark as they were.
func TestSetInSyncErrorsChangeNothing(t *testing.T) {
	tests := []struct {
		name    string
		version uint64
		members []uint32
		want    error
	}{
		{"stale version", 1, []uint32{2}, ErrStaleInSyncVersion},
		{"zero version", 0, []uint32{2}, ErrStaleInSyncVersion},
		{"too many", 2, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}, ErrTooManyStandbys},
		{"duplicate", 2, []uint32{2, 3, 2}, ErrDuplicateStandby},
	}
	for _, tt := range tests {
		g := heldGate(t, Config{}, 1)
		g.OnAck(1, 10, 1)
		err := g.SetInSync(tt.version, tt.members, 2)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if got := g.InSync(nil); !slices.Equal(got, []uint32{1}) || g.InSyncVersion() != 1 {
			t.Errorf("%s: InSync = %v v%d, want [1] v1", tt.name, got, g.InSyncVersion())
		}
		if got := g.Released(); got != 10 {
			t.Errorf("%s: Released() = %d, want 10", tt.name, got)
		}
	}
	// Exactly MaxStandbys is allowed.
	g := heldGate(t, Config{})
	if err := g.SetInSync(2, []uint32{1, 2, 3, 4, 5, 6, 7, 8}, 0); err != nil {
		t.Fatalf("MaxStandbys members: %v", err)
	}
}

// TestLagging proves members whose last ack (or join, if they never acked)
// is older than the timeout are reported, in set order, and nobody else.
func TestLagging(t *testing.T) {
	g := heldGate(t, Config{})
	if err := g.SetInSync(2, []uint32{3, 1, 2}, 1000); err != nil {
		t.Fatal(err)
	}
	g.OnAck(1, 5, 1500)
	g.OnAck(2, 5, 1900)
	g.OnAck(9, 5, 0) // a non-member, never reported
	tests := []struct {
		nowNs, timeoutNs int64
		want             []uint32
	}{
		{nowNs: 1000, timeoutNs: 0, want: nil},
		{nowNs: 1400, timeoutNs: 500, want: nil},
		{nowNs: 1501, timeoutNs: 500, want: []uint32{3}},
		{nowNs: 2001, timeoutNs: 500, want: []uint32{3, 1}},
		{nowNs: 5000, timeoutNs: 500, want: []uint32{3, 1, 2}},
		{nowNs: 500, timeoutNs: 0, want: nil}, // time before the last ack: not lagging
	}
	for _, tt := range tests {
		got := g.Lagging(tt.nowNs, tt.timeoutNs, nil)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Lagging(%d, %d) = %v, want %v", tt.nowNs, tt.timeoutNs, got, tt.want)
		}
	}
}

// TestLaggingStalledAck: a member that keeps acking the same old seq (a
// standby cut off from the primary's DATA, or stalled) lags once an output
// has waited above its ack for the timeout, however often its acks
// arrive; a member repeating an ack that covers everything applied (idle)
// never lags while alive; a member whose ack keeps advancing does not lag
// even when it stays behind. Before the fix, only silence counted, and the
// repeated acks kept the cut-off member in the set for ever.
func TestLaggingStalledAck(t *testing.T) {
	const timeoutNs = 200
	g := newTestGate(t, Config{})
	if err := g.SetInSync(1, []uint32{1, 2}, 0); err != nil {
		t.Fatal(err)
	}
	g.SetLease(true)
	g.SetApplied(10)
	g.SetDurable(10)
	g.OnAck(1, 10, 5)
	g.OnAck(2, 10, 5)
	// Idle: both repeat ack 10 = applied for a long time. Nobody lags.
	for now := int64(10); now <= 2000; now += 5 {
		g.OnAck(1, 10, now)
		g.OnAck(2, 10, now)
		if got := g.Lagging(now, timeoutNs, nil); len(got) != 0 {
			t.Fatalf("idle at %d: Lagging = %v, want none", now, got)
		}
	}
	// Commands 11..20 arrive at 2001; standby 2 never receives them and
	// goes on acking 10 every 5 ns; standby 1 acks them as they come.
	g.SetApplied(20)
	g.SetDurable(20)
	var removedAt int64
	for now := int64(2001); now <= 3000 && removedAt == 0; now += 5 {
		g.OnAck(1, 20, now)
		g.OnAck(2, 10, now)
		if g.Released() != 10 {
			t.Fatalf("released %d past standby 2's ack 10", g.Released())
		}
		switch got := g.Lagging(now, timeoutNs, nil); {
		case slices.Equal(got, []uint32{2}):
			removedAt = now
		case len(got) != 0:
			t.Fatalf("at %d: Lagging = %v, want [] or [2]", now, got)
		}
	}
	// Standby 2's last progress was its ack of 10 at 2000, while it still
	// covered everything applied.
	if removedAt == 0 || removedAt-2000 <= timeoutNs || removedAt-2000 > timeoutNs+5 {
		t.Fatalf("standby 2 reported lagging at %d, want within one ack after %d", removedAt, 2000+timeoutNs)
	}
	if st, _ := g.Standby(2); removedAt-st.LastAckNs > timeoutNs {
		t.Fatalf("standby 2 was silent (last ack %d): the test must show a live standby", st.LastAckNs)
	}
	// Once removed, release runs ahead without it.
	if err := g.SetInSync(2, []uint32{1}, removedAt); err != nil {
		t.Fatal(err)
	}
	if g.Released() != 20 {
		t.Fatalf("released %d after the removal, want 20", g.Released())
	}
	// It catches up and rejoins: its lag is measured from its joining.
	g.OnAck(1, 20, removedAt+1)
	g.OnAck(2, 20, removedAt+1)
	if err := g.SetInSync(3, []uint32{1, 2}, removedAt+1); err != nil {
		t.Fatal(err)
	}
	g.SetApplied(30)
	g.SetDurable(30)
	if got := g.Lagging(removedAt+1+timeoutNs, timeoutNs, nil); len(got) != 0 {
		t.Fatalf("just rejoined: Lagging = %v, want none", got)
	}
	// A slow standby whose ack advances (one seq per 100 ns) stays.
	for i, now := uint64(21), removedAt+100; i <= 30; i, now = i+1, now+100 {
		g.OnAck(1, 30, now)
		g.OnAck(2, i, now)
		if got := g.Lagging(now, timeoutNs, nil); len(got) != 0 {
			t.Fatalf("advancing at %d: Lagging = %v, want none", now, got)
		}
	}
}

// TestStandbyTableEviction proves that when maxTrackedStandbys standbys are
// remembered, a new one replaces the non-member with the oldest ack, and
// members are never forgotten.
func TestStandbyTableEviction(t *testing.T) {
	g := heldGate(t, Config{}, 1)
	g.OnAck(1, 7, 0) // member, oldest of all
	for id := uint32(2); id <= maxTrackedStandbys; id++ {
		g.OnAck(id, 1, int64(id)*10)
	}
	g.OnAck(100, 1, 1000)
	if _, ok := g.Standby(2); ok {
		t.Fatal("standby 2 (oldest non-member) still remembered")
	}
	if st, ok := g.Standby(1); !ok || !st.Member || st.AckSeq != 7 {
		t.Fatalf("member 1 = %+v %v", st, ok)
	}
	if _, ok := g.Standby(100); !ok {
		t.Fatal("standby 100 not remembered")
	}
	if s := g.Stats(); s.Evicted != 1 {
		t.Fatalf("Evicted = %d, want 1", s.Evicted)
	}
	// A new member set of unknown ids evicts non-members only, never an id
	// of the new set.
	if err := g.SetInSync(2, []uint32{200, 201, 3, 4, 202, 203, 204, 205}, 2000); err != nil {
		t.Fatal(err)
	}
	got := g.InSync(nil)
	if !slices.Equal(got, []uint32{200, 201, 3, 4, 202, 203, 204, 205}) {
		t.Fatalf("InSync = %v", got)
	}
	for _, id := range got {
		if st, ok := g.Standby(id); !ok || !st.Member {
			t.Fatalf("member %d = %+v %v", id, st, ok)
		}
	}
	if got := g.Released(); got != 7 {
		t.Fatalf("Released() = %d, want 7 (new members at 0 do not lower it)", got)
	}
}

// A member that said it is leaving lags at once, whatever the timeout,
// and only until its next plain ack; OnLeavingAck reports a member that
// started leaving, once; a non-member is marked too (not to be added
// while gone); an old ack clears nothing.
func TestLeavingLagsAtOnce(t *testing.T) {
	g := heldGate(t, Config{}, 1, 2)
	g.OnAck(1, 100, 10)
	g.OnAck(2, 100, 10)
	g.OnAck(3, 100, 10) // not a member
	if got := g.Lagging(11, 1e9, nil); len(got) != 0 {
		t.Fatalf("lagging %v before anyone left", got)
	}
	if !g.OnLeavingAck(2, 100, 11) || g.OnLeavingAck(2, 100, 11) || g.OnLeavingAck(3, 100, 11) {
		t.Fatal("OnLeavingAck: want true for member 2's first word only (a repeat, non-member 3: false)")
	}
	if got := g.Lagging(11, 1e9, nil); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("lagging %v, want [2] at once", got)
	}
	if st, _ := g.Standby(3); !st.Leaving {
		t.Fatal("a non-member's leaving is not recorded (it must not be proposed while gone)")
	}
	checkClearedByNewerAck(t, g, 2, 12, "leaving", func(st StandbyState) bool { return st.Leaving })
}

// checkClearedByNewerAck: an older, reordered ack from member id at nowNs
// keeps the mark marked reports; its next ack clears it, and the member
// lags no more.
func checkClearedByNewerAck(t *testing.T, g *Gate, id uint32, nowNs int64, what string, marked func(StandbyState) bool) {
	t.Helper()
	g.OnAck(id, 99, nowNs) // reordered, older
	if st, _ := g.Standby(id); !marked(st) {
		t.Fatalf("an old ack cleared %s", what)
	}
	g.OnAck(id, 100, nowNs+1)
	if got := g.Lagging(nowNs+2, 1e9, nil); len(got) != 0 {
		t.Fatalf("lagging %v after standby %d acked again", got, id)
	}
	if st, _ := g.Standby(id); marked(st) {
		t.Fatalf("an ack did not clear %s", what)
	}
}

// A member whose port refused a probe sent after its last ack lags at
// once and until its next accepted ack; a refusal of a probe sent before
// its last ack (it came back meanwhile) marks nothing; OnUnreachable
// reports a member marked just now, once.
func TestUnreachableLagsAtOnce(t *testing.T) {
	g := heldGate(t, Config{}, 1, 2)
	g.OnAck(1, 100, 10)
	g.OnAck(2, 100, 20)
	if g.OnUnreachable(2, 20) || g.OnUnreachable(9, 20) {
		t.Fatal("a refusal of a probe sent no later than the last ack (or to an unknown id) marked it")
	}
	if got := g.Lagging(21, 1e9, nil); len(got) != 0 {
		t.Fatalf("lagging %v after a stale refusal", got)
	}
	if !g.OnUnreachable(2, 21) || g.OnUnreachable(2, 22) {
		t.Fatal("OnUnreachable: want true for member 2's first refusal only")
	}
	if got := g.Lagging(23, 1e9, nil); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("lagging %v, want [2] at once", got)
	}
	if got := g.Overdue(23, 0, 0, nil); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("overdue %v, want [1]: a marked member is not probed again", got)
	}
	if st, _ := g.Standby(2); !st.Unreachable {
		t.Fatal("StandbyState.Unreachable not set")
	}
	checkClearedByNewerAck(t, g, 2, 24, "the unreachable mark", func(st StandbyState) bool { return st.Unreachable })
}

// Overdue applies Lagging's two tests with their own bounds: silence
// against silentNs, and a stall (an output waits above the ack) against
// stalledNs.
func TestOverdue(t *testing.T) {
	g := heldGate(t, Config{}, 1, 2)
	g.OnAck(1, 100, 100)
	g.OnAck(2, 100, 100)
	if got := g.Overdue(150, 10, 100, nil); len(got) != 0 {
		t.Fatalf("overdue %v while idle and heard from 50 ago", got)
	}
	if got := g.Overdue(201, 10, 100, nil); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatalf("overdue %v, want both silent past 100", got)
	}
	g.SetApplied(105)
	g.SetDurable(105)
	g.OnAck(1, 105, 202)
	g.OnAck(2, 100, 202) // alive, but not advancing: stalled since 100
	if got := g.Overdue(205, 200, 1000, nil); len(got) != 0 {
		t.Fatalf("overdue %v within the stall bound", got)
	}
	if got := g.Overdue(205, 100, 1000, nil); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("overdue %v, want [2] stalled past 100", got)
	}
}
