package replica

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/wire"
)

// TestLeaderScenarios plays testdata/leader/*.txt: the leading side
// (replica.Leader) fed as node feeds it, the harness carrying out each
// LeaderReady the way node does: frames sent, the entry appended to a
// journal that can be made to fail, then applied (go test ./replica
// -rewrite regenerates the expectations).
func TestLeaderScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/leader/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no leader scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &lharness{harness: harness{t: t}}
			runScenarioWith(t, path, h.run)
		})
	}
}

// testSM is a state machine for the leader's tests. A command's body is
// up to three bytes: how many outputs to its session (default 1), how
// many market-data updates (default 0), and the outputs' size (default:
// "o<seq>"). Its dedup table answers a client order id at or below the
// session's highest applied one ("a<id>").
type testSM struct {
	applied uint64
	hash    uint64
	highest map[uint64]uint64 // session -> highest client order id applied
	noDedup bool
}

func newTestSM() *testSM { return &testSM{highest: map[uint64]uint64{}} }

func (m *testSM) Apply(seq uint64, cmd []byte, out engine.Emitter) {
	m.applied = seq
	m.hash = m.hash*1_000_003 + seq
	h, err := engine.ParseCommand(cmd)
	if err != nil {
		return
	}
	m.highest[h.Session] = max(m.highest[h.Session], h.ClientOrderID)
	if out == nil {
		return
	}
	outs, md, size := 1, 0, 0
	if len(h.Body) > 0 {
		outs = int(h.Body[0])
	}
	if len(h.Body) > 1 {
		md = int(h.Body[1])
	}
	if len(h.Body) > 2 {
		size = int(h.Body[2])
	}
	var buf [256]byte
	for i := range outs {
		p := fmt.Appendf(buf[:0], "o%d", seq)
		if size > 0 {
			p = buf[:size]
		}
		_ = i
		out.Emit(h.Session, p)
	}
	for range md {
		out.Emit(engine.MarketData, fmt.Appendf(buf[:0], "md%d", seq))
	}
}

func (m *testSM) Answer(cmd []byte, out engine.Emitter) bool {
	h, err := engine.ParseCommand(cmd)
	if m.noDedup || err != nil || h.ClientOrderID == 0 || h.ClientOrderID > m.highest[h.Session] {
		return false
	}
	var buf [32]byte
	out.Emit(h.Session, fmt.Appendf(buf[:0], "a%d", h.ClientOrderID))
	return true
}

func (m *testSM) Snapshot(io.Writer) error { return nil }
func (m *testSM) Restore(io.Reader) error  { return nil }
func (m *testSM) StateHash() uint64        { return m.hash }
func (m *testSM) AppliedSeq() uint64       { return m.applied }

// testRecorder is the session history: it prints nothing, it keeps.
type testRecorder struct{ n int }

func (r *testRecorder) Record(seq, to uint64, payload []byte) { r.n++ }

// testRing is the market-data ring: it keeps updates while enabled, and
// is full when told so.
type testRing struct {
	enabled, full bool
	kept          []string
}

func (r *testRing) Add(cmd uint64, payload []byte) bool {
	if !r.enabled {
		return false
	}
	r.kept = append(r.kept, fmt.Sprintf("%d:%s", cmd, payload))
	return true
}
func (r *testRing) Full() bool { return r.full }

// testJournal is the journal: it keeps what was appended (the
// sequencer's History for old retransmits) and fails when told so.
type testJournal struct {
	recs map[uint64][]byte
	fail bool
}

var errTestJournal = errors.New("test journal: disk full")

func (j *testJournal) Append(seq uint64, cmd []byte) error {
	if j.fail {
		return errTestJournal
	}
	j.recs[seq] = append([]byte(nil), cmd...)
	return nil
}

func (j *testJournal) ReadFrom(from uint64, fn func(epoch, seq uint64, payload []byte) bool) error {
	for s := from; ; s++ {
		p, ok := j.recs[s]
		if !ok || !fn(1, s, p) {
			return nil
		}
	}
}

// lharness plays a primary's runtime around a Leader.
type lharness struct {
	harness
	l        *Leader[string]
	sm       *testSM
	rec      testRecorder
	ring     testRing
	j        testJournal
	sessions *Sessions[string]
	lease    *testLease // with a lease (leader lease): the in-sync set is maintained
	// leaseHeld is the keeper's MayLead as the release's input reports it
	leaseHeld bool
}

// testLease is a lease the harness holds or not; it never names
// another holder.
type testLease struct{ held bool }

func (l *testLease) MayLead(int64) bool { return l.held }
func (l *testLease) Epoch() uint64      { return 1 }
func (l *testLease) LastDeny() (arbiter.NodeID, uint64, int64) {
	return arbiter.NodeNone, 0, 0
}
func (l *testLease) LastDenyRun() uint64 { return 0 }

func (h *lharness) run(w *strings.Builder, line string) {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	fmt.Fprintf(w, "> %s\n", line)
	switch cmd {
	case "leader":
		h.newLeader(w, a)
		return
	case "commands":
		h.commands(w, a)
	case "lease":
		h.leaseHeld = a.has("held")
		h.l.Primary().SetLease(h.leaseHeld)
	case "promoted":
		h.l.Promoted(h.nowNs)
	case "sleep":
		h.nowNs += h.dur(args{"d": fields[1]}, "d", 0)
		return
	case "md-full":
		h.ring.full = !a.has("off")
	case "journal-fail":
		h.j.fail = true
	case "end-batch":
		h.l.EndBatch(h.nowNs)
	case "tick":
		h.nowNs += h.dur(args{"d": fields[1]}, "d", 0)
		h.l.Tick(h.nowNs)
		h.l.Primary().Tick(h.nowNs) // the in-sync upkeep (node's maintainInSync)
	case "ack":
		switch h.l.Ack(uint32(h.u64(a, "from", 2)), h.u64(a, "epoch", h.l.Epoch()), h.u64(a, "seq", 0), h.u64(a, "history", 0), h.nowNs) {
		case AckForeign:
			fmt.Fprintln(w, "ack dropped: another history")
		case AckAhead:
			fmt.Fprintln(w, "ack dropped: ahead of the last seq sequenced")
		case AckOlderEpoch, AckOtherEpoch:
			fmt.Fprintln(w, "ack dropped: another epoch")
		}
	case "durable":
		h.durable = h.u64(args{"": fields[1]}, "", 0)
		h.l.Durable(h.durable)
	case "nak":
		nak := wire.Nak{Origin: wire.Origin{Stream: 9, Node: uint32(h.u64(a, "from", 2)), Epoch: 1}}
		nak.Add(wire.Range{From: h.u64(a, "from-seq", 1), To: h.u64(a, "to-seq", 1)})
		h.l.Nak(&nak, h.nowNs)
	case "release":
		h.release(w)
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	h.ready(w)
}

// newLeader starts a term at epoch (default 1) after applied, a static
// primary requiring standby 2 (peers=none: none). seen=S:ID tells the
// dedup table that session S applied client order ids up to ID before
// the term (a standby's history, promoted).
func (h *lharness) newLeader(w *strings.Builder, a args) {
	h.sm = newTestSM()
	h.sm.applied = h.u64(a, "applied", 0)
	h.sm.noDedup = a.has("no-dedup")
	if v, ok := a["seen"]; ok {
		s, id, _ := strings.Cut(v, ":")
		h.sm.highest[h.u64(args{"": s}, "", 0)] = h.u64(args{"": id}, "", 0)
	}
	epoch := h.u64(a, "epoch", 1)
	h.ring = testRing{enabled: a.has("md-ring")}
	h.j = testJournal{recs: map[uint64][]byte{}}
	h.sessions = NewSessions[string](int(h.u64(a, "sessions", 4)))
	peers := []uint32{2}
	if a["peers"] == "none" {
		peers = nil
	}
	h.durable, h.leaseHeld, h.lease, h.isr = h.sm.applied, true, nil, InSync{}
	var lease Lease
	if a.has("lease") {
		// The witness confirmed no member yet: the primary runs alone
		// until it proposes a caught-up standby.
		h.lease = &testLease{held: true}
		lease = h.lease
		h.isr.Confirm(&arbiter.Reply{Kind: arbiter.ReplyGrant, Epoch: 1, InSyncVersion: 1})
	}
	p, err := NewPrimary(PrimaryConfig{Self: 1, Epoch: epoch, Peers: peers, InSyncTimeoutNs: 200_000_000, RetryNs: 50_000_000}, &h.isr, lease, h.sm.applied, h.sm.applied, h.nowNs)
	if err != nil {
		h.t.Fatal(err)
	}
	if lease != nil {
		p.SetLease(true)
	}
	cfg := LeaderConfig{
		Sequencer: sequencer.Config{Stream: 9, Node: 1, History: h.u64(a, "history", 0)}, Epoch: epoch, Applied: h.sm.applied,
		PublisherCapacity: int(h.u64(a, "capacity", 8)),
		HashEvery:         h.u64(a, "hash", 1000), SnapshotEvery: h.u64(a, "snapshot", 1000),
		JournalBroken: a.has("journal-broken"), MarketData: !a.has("no-md-group"),
	}
	l, err := NewLeader[string](cfg, p, h.sm, &h.j, h.sessions, &h.rec, &h.ring)
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return
	}
	h.l = l
	fmt.Fprintf(w, "leading epoch=%d from=%d required=%v\n", epoch, cfg.Applied+1, p.Gate().InSync(nil))
}

// commands delivers a COMMAND frame from client `from` (default c7) of n
// commands of session s, ids id, id+1, ... (id=0: all 0), each with the
// body outs,md,size (pad=p adds p bytes to it); bad=k makes the k-th (1-based) too short to parse.
// The harness then runs node's loop: Next, the Ready, the append, Apply,
// the Ready.
func (h *lharness) commands(w *strings.Builder, a args) {
	s, id, n := h.u64(a, "s", 7), h.u64(a, "id", 1), int(h.u64(a, "n", 1))
	body := []byte{byte(h.u64(a, "outs", 1)), byte(h.u64(a, "md", 0)), byte(h.u64(a, "size", 0))}
	if body[2] == 0 {
		body = body[:2]
	}
	if pad := int(h.u64(a, "pad", 0)); pad > 0 {
		body = append(body[:3:3], make([]byte, pad)...)
	}
	msgs := make([][]byte, n)
	for i := range msgs {
		cid := id
		if id != 0 {
			cid = id + uint64(i)
		}
		msgs[i] = engine.AppendCommand(nil, s, cid, body)
		if int(h.u64(a, "bad", 0)) == i+1 {
			msgs[i] = msgs[i][:3]
		}
	}
	b, err := wire.AppendData(nil, wire.TypeCommand, wire.Origin{Stream: 9}, 1, msgs...)
	if err != nil {
		h.t.Fatal(err)
	}
	fr, _, err := wire.Parse(b)
	if err != nil {
		h.t.Fatal(err)
	}
	from := a["from"]
	if from == "" {
		from = "c7"
	}
	h.l.Commands(&fr, from, h.nowNs)
	for {
		e, ok := h.l.Next()
		h.ready(w)
		if !ok {
			return
		}
		hd, _ := engine.ParseCommand(e.Cmd)
		if err := h.j.Append(e.Seq, e.Cmd); err != nil {
			fmt.Fprintf(w, "append %d (s=%d id=%d): %v: JournalFailed dropped %d queued\n", e.Seq, hd.Session, hd.ClientOrderID, err, h.l.JournalFailed())
			return
		}
		fmt.Fprintf(w, "append %d (s=%d id=%d), apply\n", e.Seq, hd.Session, hd.ClientOrderID)
		h.l.Apply(e)
		h.ready(w)
	}
}

// ready carries out the Leader's Ready as node does and prints it.
func (h *lharness) ready(w *strings.Builder) {
	if !h.l.HasReady() {
		return
	}
	rd := h.l.Ready()
	for _, o := range rd.Frames {
		fr, _, err := wire.Parse(o.Frame)
		if err != nil {
			h.t.Fatalf("the sequencer's frame does not parse: %v", err)
		}
		to := "group"
		if !o.Group {
			to = fmt.Sprintf("node %d", o.Node)
		}
		switch fr.Type {
		case wire.TypeData, wire.TypeRetransmit:
			fmt.Fprintf(w, "send %s %d..%d to %s\n", fr.Type, fr.Seq, fr.LastSeq(), to)
		default:
			fmt.Fprintf(w, "send %s seq=%d to %s\n", fr.Type, fr.Seq, to)
		}
	}
	if c := rd.Counts; c != (LeaderCounts{}) {
		fmt.Fprintf(w, "count %s\n", countsString(c))
	}
	if rd.Lost != nil {
		fmt.Fprintf(w, "lost: %v\n", rd.Lost)
	}
	if rd.FirstRelease != 0 {
		fmt.Fprintf(w, "first release after promotion: released=%d after=%v\n", rd.FirstRelease, time.Duration(rd.SincePromotionNs))
	}
	snap := rd.Snapshot // the Leader's: Advance clears it
	h.l.Advance()
	if snap != 0 {
		fmt.Fprintf(w, "cut snapshot at %d\n", snap)
	}
}

func countsString(c LeaderCounts) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    uint64
	}{
		{"commands", c.Commands}, {"bad", c.BadCommands}, {"not-leading", c.NotLeading},
		{"sessions-full", c.SessionsFull}, {"backpressure", c.Backpressure},
		{"answered", c.AnsweredFromTable}, {"lost", c.OutputsLost}, {"released", c.OutputsReleased},
	} {
		if f.v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, f.v))
		}
	}
	return strings.Join(parts, " ")
}

// release carries out the Leader's release step as node's release
// does: the in-sync news (a proposal handed to the arbiter), the
// watermark, the observer's event, each frame (where it goes and its
// outputs), then the Ready.
func (h *lharness) release(w *strings.Builder) {
	rr := h.l.Release(h.nowNs, ReleaseInput{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: h.l.Epoch()}, Durable: h.durable, LeaseHeld: h.leaseHeld})
	if rr.RunningAlone {
		fmt.Fprintln(w, "running alone")
	}
	if rr.InSyncError != nil {
		fmt.Fprintf(w, "in-sync error: %v\n", rr.InSyncError)
	}
	if rr.Propose != nil {
		fmt.Fprintf(w, "propose %v base=%d lagging=%v\n", rr.Propose, rr.ProposeBase, rr.Lagging)
		h.l.Primary().Proposed(rr.Propose, h.l.Primary().Epoch(), h.nowNs)
	}
	fmt.Fprintf(w, "release <= %d\n", rr.Released)
	if rr.Released == 0 {
		return
	}
	if e := rr.Event; rr.Report {
		ack := fmt.Sprint(e.RequiredAck)
		if e.RequiredAck == math.MaxUint64 {
			ack = "none"
		}
		fmt.Fprintf(w, "  observe released=%d epoch=%d applied=%d durable=%d required-ack=%s ok=%v lease=%v\n",
			e.Released, e.Epoch, e.Applied, e.Durable, ack, e.RequiredOK, e.LeaseHeld)
	}
	for fr, ok := h.l.NextFrame(); ok; fr, ok = h.l.NextFrame() {
		to := "market-data"
		if !fr.MarketData {
			to = fmt.Sprintf("s%d", fr.Session)
			if addr, ok := h.sessions.Addr(fr.Session); ok {
				to += "@" + addr
			}
		}
		f, _, err := wire.Parse(fr.Bytes)
		if err != nil || f.Type != wire.TypeOutput {
			h.t.Fatalf("a released frame: %v %v", f.Type, err)
		}
		var outs []string
		for it := f.Messages(); ; {
			_, m, ok := it.Next()
			if !ok {
				break
			}
			outs = append(outs, fmt.Sprintf("%q", m))
		}
		label := fmt.Sprintf("seq=%d", f.Seq)
		if f.Epoch != 1 {
			label = fmt.Sprintf("epoch=%d seq=%d", f.Epoch, f.Seq)
		}
		fmt.Fprintf(w, "  OUTPUT %s to %s: %s\n", label, to, strings.Join(outs, " "))
	}
	if len(h.ring.kept) > 0 {
		sort.Strings(h.ring.kept)
		fmt.Fprintf(w, "  md ring holds %v\n", h.ring.kept)
	}
}
