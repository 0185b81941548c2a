package replica

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// TestReplicaScenarios plays testdata/replica/*.txt: what a standby's
// Replica says of each replication frame before its payload (Admit),
// of a primary's history id (HeardHistory), and of the lease (WantLead,
// DeclineLead), the harness carrying out each answer the way node does:
// a new primary is addressed at once, an adopted id recorded. go test
// ./replica -rewrite regenerates the expectations.
func TestReplicaScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/replica/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no replica scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &repHarness{harness: harness{t: t}}
			runScenarioWith(t, path, h.run)
		})
	}
}

// repHarness plays a node's runtime around a Replica.
type repHarness struct {
	harness
	r *Replica[netip.AddrPort]
}

// testPeers are the harness's configured nodes 2 and 3 (not 9).
var testPeers = map[uint32]netip.AddrPort{2: netip.MustParseAddrPort("127.0.0.2:7000"), 3: netip.MustParseAddrPort("127.0.0.3:7000")}

var frameTypes = map[string]wire.Type{
	"data": wire.TypeData, "retransmit": wire.TypeRetransmit, "heartbeat": wire.TypeHeartbeat,
	"hash": wire.TypeHash, "need-snapshot": wire.TypeNeedSnapshot, "chunk": wire.TypeSnapshotChunk,
	"new-epoch": wire.TypeNewEpoch, "command": wire.TypeCommand,
}

func (h *repHarness) run(w *strings.Builder, line string) {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	fmt.Fprintf(w, "> %s\n", line)
	switch cmd {
	case "replica":
		h.setup(a)
	case "sleep":
		h.nowNs += h.dur(a, "d", 0)
	case "frame":
		h.frame(w, a)
	case "new-epoch":
		// The reconciliation node carries out for a NEW_EPOCH of a newer
		// epoch (kept: nothing to cut), then the sender is learnt.
		ne := wire.NewEpoch{PrevEpoch: h.u64(a, "prev", 0), LastSeq: h.u64(a, "last", 0)}
		ne.Epoch = h.u64(a, "epoch", 0)
		from := uint32(h.u64(a, "from", 2))
		rd := h.r.Roles().NewEpoch(&ne, from, true, h.applied, mapLog(h.log))
		if rd.Reconciling {
			rd = h.r.Roles().Reconciled()
		}
		if rd.Primary != 0 {
			changed, known := h.r.LearnPrimary(rd.Primary, h.nowNs)
			fmt.Fprintf(w, "learn primary %d: changed=%v known=%v\n", rd.Primary, changed, known)
		}
	case "heard":
		take, adopt, latched := h.r.HeardHistory(h.u64(a, "id", 0))
		if adopt {
			h.r.Identity().Adopted(h.u64(a, "id", 0)) // recorded durably first
		}
		if latched {
			h.r.HoldAcks(false)
		}
		fmt.Fprintf(w, "take=%v adopt=%v latched=%v\n", take, adopt, latched)
	case "lease":
		fmt.Fprintf(w, "want-lead=%v decline=%s\n", h.r.WantLead(a.has("broken"), a.has("refetching")), declineName(h.r.DeclineLead(a.has("new-dir"), h.u64(a, "epoch", h.r.Roles().Epoch()+1))))
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	h.state(w)
}

func declineName(d Decline) string {
	return [...]string{"granted", "new-directory", "foreign"}[d]
}

// setup: replica epoch=N [fence=N] [id=N] [confirmed] [no-fencing]
// [applied=N].
func (h *repHarness) setup(a args) {
	h.r = NewReplica(ReplicaConfig[netip.AddrPort]{Roles: RolesConfig{NoFencing: a.has("no-fencing")},
		DiskStallNs: 1_000_000_000, Follower: testFollowerConfig(64), MaxSessions: 4, Peers: testPeers})
	h.nowNs, h.log, h.applied = 1_000_000_000, map[uint64]uint64{}, h.u64(a, "applied", 0)
	epoch := h.u64(a, "epoch", 1)
	_ = h.r.Roles().Fence().Accept(max(h.u64(a, "fence", 0), epoch))
	h.r.Roles().Recovered()
	h.r.Identity().Set(h.u64(a, "id", 0))
	if a.has("confirmed") {
		h.r.Identity().Adopted(h.u64(a, "id", 0))
	}
	if err := h.r.Follower().Reset(h.applied); err != nil {
		h.t.Fatal(err)
	}
}

// frame: frame type=data epoch=N node=N [seq=N count=N] prints the
// Admission as node carries it out.
func (h *repHarness) frame(w *strings.Builder, a args) {
	typ, ok := frameTypes[a["type"]]
	if !ok {
		h.t.Fatalf("frame type %q", a["type"])
	}
	f := wire.Frame{Header: wire.Header{Type: typ, Epoch: h.u64(a, "epoch", h.r.Roles().Epoch()),
		Node: uint32(h.u64(a, "node", 2)), Seq: h.u64(a, "seq", 1)}}
	f.Count = uint16(h.u64(a, "count", 1))
	ad := h.r.Admit(&f, h.nowNs)
	var out []string
	if ad.NewPrimary {
		out = append(out, fmt.Sprintf("new primary %d", f.Node))
	}
	if ad.AskNewEpoch {
		out = append(out, fmt.Sprintf("ask %d for NEW_EPOCH", f.Node))
	}
	if ad.AskHistory {
		to, _ := h.r.PrimaryAddr()
		out = append(out, fmt.Sprintf("ask %s for its history", to))
	}
	if ad.Drop == AdmitTake {
		out = append(out, "take")
	} else {
		out = append(out, "drop: "+ad.Drop.String())
	}
	fmt.Fprintln(w, strings.Join(out, "; "))
}

// state prints the Replica as a standby sees it.
func (h *repHarness) state(w *strings.Builder) {
	r := h.r
	to, addressed := r.PrimaryAddr()
	where := "none"
	if addressed {
		where = to.String()
	}
	fmt.Fprintf(w, "standby epoch=%d primary=%d at=%s history=%d confirmed=%v foreign=%v start=%d\n",
		r.Roles().Epoch(), r.Follower().Standby().Primary(), where, r.Identity().ID(), r.Identity().Confirmed(),
		r.Identity().Foreign(), r.Roles().History().Start())
}

// TestReplicaTerm: a term's hand-overs keep one memory from term to term
// (no promotion allocates it), a step-down drops what waited in the gate
// and is recorded as the simulator's checker reads it, and a new term of
// the node's own keeps the memory of the term it replaced.
func TestReplicaTerm(t *testing.T) {
	mem, err := NewLeaderMemory(termConfig(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplica(ReplicaConfig[string]{Follower: testFollowerConfig(8), MaxSessions: 2, Memory: mem})
	if r.Memory() != mem || r.Leader() != nil || r.LastStepDown() != (StepDownRecord{}) {
		t.Fatalf("new replica: memory %p (want %p), leader %v, step-down %+v", r.Memory(), mem, r.Leader(), r.LastStepDown())
	}
	if err := r.Roles().BecomePrimary(2); err != nil {
		t.Fatal(err)
	}
	a := newTerm(t, r.Memory(), 2, 10)
	r.Lead(a)
	if r.Leader() != a || r.Memory() != nil {
		t.Fatalf("leading: leader %p (want %p), spare memory %p (want none: the term's)", r.Leader(), a, r.Memory())
	}
	if err := a.pub.Enqueue(11, OutSlot{To: 5}); err != nil {
		t.Fatal(err)
	}
	if !r.MayLeadNow(0) {
		t.Fatal("a static primary's term may lead")
	}
	// A new term of its own: the new leader takes the queue, the old
	// term's memory is kept for the next.
	b := newTerm(t, nil, 3, 11)
	b.TakeQueued(a)
	r.Lead(b)
	r.Retired(a)
	if r.Memory() == nil || b.Queued() != 1 {
		t.Fatalf("new term: spare %p, queued %d; want the old term's memory kept and its output carried", r.Memory(), b.Queued())
	}
	spare := r.Memory()
	if dropped := r.EndTerm(3, 5, 4); dropped != 1 {
		t.Fatalf("step-down dropped %d; want the 1 queued output", dropped)
	}
	r.Roles().BecomeStandby()
	want := StepDownRecord{Count: 1, From: 3, To: 5, KeeperEpoch: 4}
	if r.Leader() != nil || r.LastStepDown() != want || r.Memory() == nil || r.Memory() == spare || r.MayLeadNow(0) {
		t.Fatalf("after the step-down: leader %v, record %+v (want %+v), spare %p, may lead %v",
			r.Leader(), r.LastStepDown(), want, r.Memory(), r.MayLeadNow(0))
	}
}

// TestReplicaAck: a primary's ACK path. An ack of an older epoch asks for
// NEW_EPOCH again at once, but at most once a millisecond after the last
// announcement; one flagged Leaving is the Leader's AckLeaving.
func TestReplicaAck(t *testing.T) {
	r := NewReplica(ReplicaConfig[string]{Follower: testFollowerConfig(8), MaxSessions: 2})
	if err := r.Roles().BecomePrimary(3); err != nil {
		t.Fatal(err)
	}
	r.Roles().History().Lead(3, 2, 11)
	r.Lead(newTerm(t, nil, 3, 10))
	ack := func(epoch, seq uint64, flags uint16, nowNs int64) AckStep {
		f := wire.Frame{Header: wire.Header{Type: wire.TypeAck, Node: 2, Epoch: epoch, Seq: seq, Flags: flags}}
		s := r.Ack(&f, nowNs)
		if s.Announce {
			r.Roles().History().Announced(nowNs) // the runtime announces
		}
		return s
	}
	const sec = 1_000_000_000
	for i, c := range []struct {
		epoch, seq uint64
		flags      uint16
		nowNs      int64
		want       AckStep
	}{
		{2, 9, 0, sec, AckStep{Verdict: AckOlderEpoch, Announce: true}},
		{2, 9, 0, sec + 500_000, AckStep{Verdict: AckOlderEpoch}},
		{2, 9, 0, sec + 2_000_000, AckStep{Verdict: AckOlderEpoch, Announce: true}},
		{4, 9, 0, sec + 4_000_000, AckStep{Verdict: AckOtherEpoch}},
		{3, 10, 0, sec + 5_000_000, AckStep{Verdict: AckCounted}},
		{3, 10, wire.FlagLeaving, sec + 6_000_000, AckStep{Verdict: AckCounted, Leaving: true}},
	} {
		if got := ack(c.epoch, c.seq, c.flags, c.nowNs); got != c.want {
			t.Errorf("ack %d (epoch %d seq %d flags %#x): got %+v, want %+v", i, c.epoch, c.seq, c.flags, got, c.want)
		}
	}
}

// BenchmarkReplicaAdmit is a steady standby's admission of one DATA frame
// (its epoch, its primary, its history confirmed): the per-frame cost
// the core adds on the hot path, with no allocation.
func BenchmarkReplicaAdmit(b *testing.B) {
	r := NewReplica(ReplicaConfig[netip.AddrPort]{Follower: testFollowerConfig(8), MaxSessions: 2, Peers: testPeers})
	_ = r.Roles().Fence().Accept(1)
	r.Roles().Recovered()
	r.Identity().Adopted(5)
	f := wire.Frame{Header: wire.Header{Type: wire.TypeData, Epoch: 1, Node: 2, Seq: 1, Count: 1}}
	r.Admit(&f, 1)
	b.ReportAllocs()
	for i := range b.N {
		if a := r.Admit(&f, int64(i)); a.Drop != AdmitTake {
			b.Fatalf("dropped: %s", a.Drop)
		}
	}
}

// TestReplicaLeaseReply: what an arbiter's reply means beyond the lease.
// A standby keeps the in-sync set a grant carries for when it leads; a
// pinned history of another cluster latches the node once; a grant of
// an epoch the node knows used alarms once per run of such grants.
func TestReplicaLeaseReply(t *testing.T) {
	r := NewReplica(ReplicaConfig[netip.AddrPort]{Follower: testFollowerConfig(8), MaxSessions: 2, Peers: testPeers})
	_ = r.Roles().Fence().Accept(3)
	r.Roles().Recovered()
	r.Identity().Set(5)
	set, _ := arbiter.MakeInSyncSet([]arbiter.NodeID{2}, 0)
	grant := arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 4, InSyncVersion: 7, Members: set, History: 5}
	if s := r.LeaseReply(&grant, 1); s != (ReplyStep{}) || r.InSync().Version() != 7 || len(r.InSync().Members()) != 1 {
		t.Fatalf("a standby's grant: %+v, in-sync version %d members %v; want the set kept and nothing to do", s, r.InSync().Version(), r.InSync().Members())
	}
	behind := arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 2, InSyncVersion: 7, Members: set, History: 5}
	for i, want := range []ReplyStep{{WitnessBehind: true}, {}} {
		if s := r.LeaseReply(&behind, 2); s != want {
			t.Fatalf("grant behind #%d: %+v, want %+v", i+1, s, want)
		}
	}
	other := arbiter.Reply{Kind: arbiter.ReplyDeny, Epoch: 4, History: 6}
	for i, want := range []ReplyStep{{Latched: true}, {}} {
		if s := r.LeaseReply(&other, 3); s != want || !r.Identity().Foreign() {
			t.Fatalf("another history #%d: %+v (foreign %v), want %+v", i+1, s, r.Identity().Foreign(), want)
		}
	}
	if r.WantLead(false, false) {
		t.Fatal("a node latched foreign asks for the lease")
	}
}
