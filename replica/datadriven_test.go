package replica

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// Scenario tests as data, in etcd/raft's datadriven shape: each block of
// testdata/*.txt is one or more commands, a line "----", then what the
// runtime is asked to do, printed as text, up to a blank line. The
// harness plays the runtime: after every command it asks the lease what
// to do (LeaseChanged / StandbyLease), carries the decision out, then
// takes the primary's Ready and Advances it. go test ./replica -rewrite
// regenerates the expectations.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the output the code gives")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runScenario(t, path) })
	}
}

// block is one command group and its expectation.
type block struct {
	line     int
	cmds     []string
	expected string
}

func parseBlocks(t *testing.T, path string) (preamble []string, blocks []block) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var cur *block
	inOutput := false
	var out []string
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inOutput && line == "":
			cur.expected = strings.Join(out, "\n")
			blocks = append(blocks, *cur)
			cur, inOutput, out = nil, false, nil
		case inOutput:
			out = append(out, line)
		case line == "----":
			if cur == nil {
				t.Fatalf("%s:%d: ---- without a command", path, n)
			}
			inOutput = true
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
			if cur == nil {
				preamble = append(preamble, line)
			}
		default:
			if cur == nil {
				cur = &block{line: n}
			}
			cur.cmds = append(cur.cmds, line)
		}
	}
	if inOutput {
		cur.expected = strings.Join(out, "\n")
		blocks = append(blocks, *cur)
	} else if cur != nil {
		t.Fatalf("%s:%d: commands without ----", path, cur.line)
	}
	return preamble, blocks
}

func runScenario(t *testing.T, path string) { runScenarioWith(t, path, newHarness(t).run) }

// runScenarioWith plays path's blocks through run, one command a call.
func runScenarioWith(t *testing.T, path string, run func(w *strings.Builder, line string)) {
	_, blocks := parseBlocks(t, path)
	var rewritten strings.Builder
	src, _ := os.ReadFile(path)
	// Keep the file's comments: rewrite only what follows each ----.
	lines := strings.Split(string(src), "\n")
	next := 0
	for _, b := range blocks {
		var got strings.Builder
		for _, c := range b.cmds {
			run(&got, c)
		}
		out := strings.TrimRight(got.String(), "\n")
		if *rewrite {
			for next < b.line-1 {
				rewritten.WriteString(lines[next] + "\n")
				next++
			}
			for _, c := range b.cmds {
				rewritten.WriteString(c + "\n")
				next++
			}
			for next < len(lines) && lines[next] != "----" {
				next++
			}
			rewritten.WriteString("----\n" + out + "\n\n")
			next++
			for next < len(lines) && lines[next] != "" {
				next++
			}
			next++
			continue
		}
		if out != b.expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, b.line, strings.Join(b.cmds, "; "), out, b.expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness plays one node's runtime around the pure types.
type harness struct {
	t       *testing.T
	self    arbiter.NodeID
	nowNs   int64
	keeper  *arbiter.Keeper
	leaseNs int64
	isr     InSync
	p       *Primary
	pcfg    PrimaryConfig
	peers   []uint32 // configured standbys (keeper command)
	// probe bounds (keeper command: probe-after=, probe-silent=)
	probeAfter, probeSilent int64
	required                string  // the gate's required acks, as last printed
	sb                      Standby // the follower commands' state
	hist                    History
	epoch                   uint64 // followed (standby) or led (primary)
	applied                 uint64
	durable                 uint64
	log                     map[uint64]uint64 // seq -> epoch of the journal's record
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, self: 1, log: map[uint64]uint64{}}
}

// args is a command's key=value arguments; a bare word is key "".
type args map[string]string

func parseArgs(fields []string) args {
	a := args{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			a[f] = ""
			continue
		}
		a[k] = v
	}
	return a
}

func (h *harness) u64(a args, k string, def uint64) uint64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		h.t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

func (h *harness) dur(a args, k string, def int64) int64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
	if err != nil {
		h.t.Fatalf("%s=%q: %v", k, v, err)
	}
	return int64(d)
}

func (h *harness) ids(a args, k string) []uint32 {
	var out []uint32
	if a[k] == "" {
		return out
	}
	for _, s := range strings.Split(a[k], ",") {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			h.t.Fatalf("%s=%q: %v", k, a[k], err)
		}
		out = append(out, uint32(n))
	}
	return out
}

func (h *harness) run(w *strings.Builder, line string) {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	fmt.Fprintf(w, "> %s\n", line)
	switch cmd {
	case "reset":
		*h = *newHarness(h.t)
		return
	case "keeper":
		h.newKeeper(a)
	case "primary":
		h.newPrimary(w, h.primaryConfig(a))
	case "grant", "deny":
		h.reply(w, cmd, a)
	case "command":
		for range h.u64(a, "n", 1) {
			h.applied++
			h.log[h.applied] = h.epoch
		}
		if h.p != nil {
			h.p.Applied(h.applied)
		}
	case "ack":
		from, epoch, seq := uint32(h.u64(a, "from", 0)), h.u64(a, "epoch", h.epoch), h.u64(a, "seq", 0)
		v := AckCounted
		if h.u64(a, "leaving", 0) == 1 {
			var started bool
			v, started = h.p.AckLeaving(from, epoch, seq, h.nowNs)
			fmt.Fprintf(w, "leaving: started=%v\n", started)
			if started {
				h.p.Tick(h.nowNs) // the runtime's standbyLeaving
			}
		} else {
			v = h.p.Ack(from, epoch, seq, h.nowNs)
		}
		switch v {
		case AckOlderEpoch:
			again := h.hist.StaleAck(h.nowNs)
			if again {
				h.hist.Announced(h.nowNs) // the runtime announces
			}
			fmt.Fprintf(w, "ack dropped: older epoch (repeat NEW_EPOCH: %v)\n", again)
		case AckOtherEpoch:
			fmt.Fprintln(w, "ack dropped: newer epoch")
		}
	case "refused":
		// The prober heard "port unreachable" for a probe to from.
		marked := h.p.Unreachable(uint32(h.u64(a, "from", 0)))
		fmt.Fprintf(w, "unreachable: marked=%v\n", marked)
		if marked {
			h.p.Tick(h.nowNs) // the runtime's standbyGone
		}
	case "durable":
		// The syncer's path (onDurable): it releases at once, with no
		// lease decision first, so the release itself checks the lease.
		h.durable = h.u64(args{"": fields[1]}, "", 0)
		h.p.Durable(h.durable)
		h.ready(w)
		return
	case "sleep":
		// The process is paused: time passes, nothing runs.
		h.nowNs += h.dur(args{"d": fields[1]}, "d", 0)
		return
	case "journal-failed":
		h.p.JournalFailed()
	case "tick":
		h.nowNs += h.dur(args{"d": fields[1]}, "d", 0)
		if h.p != nil {
			h.p.Tick(h.nowNs)
		}
	case "standby", "new-epoch", "retransmit", "epoch-of", "lead", "announce":
		h.history(w, cmd, a)
		return
	case "follower", "frame", "window":
		h.follower(w, cmd, a)
		return
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	h.carryOut(w)
}

func (h *harness) newKeeper(a args) {
	cfg := arbiter.DefaultConfig()
	cfg.LeaseDurationNs = h.dur(a, "lease", cfg.LeaseDurationNs)
	k, err := arbiter.NewKeeper(arbiter.NodeID(h.u64(a, "node", 1)), cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.self, h.keeper, h.leaseNs = arbiter.NodeID(h.u64(a, "node", 1)), k, cfg.LeaseDurationNs
	h.peers = h.ids(a, "peers")
	h.probeAfter, h.probeSilent = h.dur(a, "probe-after", 0), h.dur(a, "probe-silent", 0)
	h.keeper.SetWantLead(true)
}

// primaryConfig builds a primary's configuration from a command's
// arguments; peers default to the keeper's.
func (h *harness) primaryConfig(a args) PrimaryConfig {
	peers := h.ids(a, "peers")
	if !a.has("peers") {
		peers = h.peers
	}
	return PrimaryConfig{
		Self: h.self, Epoch: h.u64(a, "epoch", 1), Peers: peers, MinInSync: int(h.u64(a, "min-insync", 0)),
		InSyncTimeoutNs: h.dur(a, "insync-timeout", 200_000_000), RetryNs: 50_000_000,
		NoGating: a.has("no-gating"), NoFencing: a.has("no-fencing"),
		ProbeAfterNs: h.probeAfter, ProbeSilentNs: h.probeSilent,
	}
}

// newPrimary starts a term as the runtime does: the core, then the lease
// as the keeper sees it, then the history's fork point.
func (h *harness) newPrimary(w *strings.Builder, cfg PrimaryConfig) {
	var lease Lease
	if h.keeper != nil {
		lease = h.keeper
	}
	p, err := NewPrimary(cfg, &h.isr, lease, h.applied, h.durable, h.nowNs)
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return
	}
	if lease != nil {
		p.SetLease(h.keeper.MayLead(h.nowNs))
	}
	h.p, h.pcfg, h.epoch = p, cfg, cfg.Epoch
	h.required = fmt.Sprint(p.Gate().InSync(nil))
	h.hist.Lead(cfg.Epoch, ForkEpoch(h.applied, cfg.Epoch, mapLog(h.log)), h.applied+1)
	fmt.Fprintf(w, "leading epoch=%d from=%d required=%v\n", cfg.Epoch, h.applied+1, p.Gate().InSync(nil))
}

func (a args) has(k string) bool { _, ok := a[k]; return ok }

// reply delivers a grant or a refusal of the keeper's next request.
func (h *harness) reply(w *strings.Builder, kind string, a args) {
	h.keeper.Hurry(h.nowNs)
	req, ok := h.keeper.Tick(h.nowNs)
	if !ok {
		h.t.Fatalf("the keeper has no request to answer at %d", h.nowNs)
	}
	r := arbiter.Reply{RequestID: req.ID, Epoch: h.u64(a, "epoch", 1), InSyncVersion: h.u64(a, "version", 0)}
	members := make([]arbiter.NodeID, 0, 8)
	for _, id := range h.ids(a, "members") {
		members = append(members, arbiter.NodeID(id))
	}
	set, ok := arbiter.MakeInSyncSet(members, h.self) // the witness never lists the holder
	if !ok {
		h.t.Fatalf("members=%s: not a valid in-sync set for holder %d", a["members"], h.self)
	}
	r.Members = set
	if kind == "grant" {
		r.Kind, r.DurationNs = arbiter.ReplyGrant, h.dur(a, "dur", h.leaseNs)
	} else {
		r.Kind, r.Holder, r.RemainingNs, r.Run = arbiter.ReplyDeny, arbiter.NodeID(h.u64(a, "holder", 0)), h.leaseNs, h.u64(a, "run", 0)
	}
	if !r.Deliver(h.keeper) {
		fmt.Fprintf(w, "keeper ignored the %s\n", kind)
	}
	if h.p != nil {
		if h.p.ConfirmInSync(&r, h.nowNs) {
			fmt.Fprintf(w, "in-sync version=%d members=%v required=%v\n", h.isr.Version(), h.isr.Members(), h.p.Gate().InSync(nil))
		}
	} else if h.isr.Confirm(&r) {
		fmt.Fprintf(w, "in-sync version=%d members=%v\n", h.isr.Version(), h.isr.Members())
	}
}

// carryOut is the runtime's loop between batches: the lease decision,
// then Ready, then Advance.
func (h *harness) carryOut(w *strings.Builder) {
	if h.p == nil {
		if h.keeper == nil {
			return
		}
		if d := StandbyLease(h.keeper, h.epoch, h.nowNs); d.Do == Promote {
			fmt.Fprintf(w, "lead: %s epoch=%d\n", d.Do, d.Epoch)
			h.durable = h.applied // promotion makes what it applied durable
			cfg := h.primaryConfig(args{})
			cfg.Epoch = d.Epoch
			h.newPrimary(w, cfg)
		}
		return
	}
	switch d := h.p.LeaseChanged(h.nowNs); d.Do {
	case Stay:
	case NewTerm:
		fmt.Fprintf(w, "lead: %s epoch=%d\n", d.Do, d.Epoch)
		cfg := h.pcfg
		cfg.Epoch = d.Epoch
		h.newPrimary(w, cfg)
	case StepDown:
		fmt.Fprintf(w, "lead: %s epoch=%d (queued outputs dropped; following)\n", d.Do, d.Epoch)
		h.p = nil
		return
	default:
		fmt.Fprintf(w, "lead: %s\n", d.Do)
	}
	h.ready(w)
}

// ready takes the primary's Ready, prints it and Advances.
func (h *harness) ready(w *strings.Builder) {
	rd := h.p.Ready(h.nowNs)
	var b strings.Builder
	fmt.Fprintf(&b, "ready: release=%d", rd.Release)
	if req := fmt.Sprint(h.p.Gate().InSync(nil)); req != h.required {
		// The gate's required acks changed inside the core.
		h.required = req
		fmt.Fprintf(&b, " required=%s", req)
	}
	if rd.RunningAlone {
		b.WriteString(" running-alone")
	}
	if rd.Propose != nil {
		fmt.Fprintf(&b, " propose=%v base=%d lagging=%v", rd.Propose, rd.ProposeBase, rd.Lagging)
		h.p.Proposed(rd.Propose, h.p.Epoch(), h.nowNs)
	}
	if rd.InSyncError != nil {
		fmt.Fprintf(&b, " in-sync-error=%q", rd.InSyncError)
	}
	if len(rd.Probe) > 0 {
		fmt.Fprintf(&b, " probe=%v", rd.Probe)
	}
	w.WriteString(b.String() + "\n")
	h.p.Advance(rd)
}

// history runs the standby's history commands.
func (h *harness) history(w *strings.Builder, cmd string, a args) {
	switch cmd {
	case "standby":
		// standby epoch=2 verified=1 log=1:1-30,2:31-40
		h.p, h.epoch = nil, h.u64(a, "epoch", 1)
		h.hist.Reset()
		h.hist.verified = h.u64(a, "verified", 0)
		h.log, h.applied = map[uint64]uint64{}, 0
		for _, r := range strings.Split(a["log"], ",") {
			if r == "" {
				continue
			}
			var e, from, to uint64
			if _, err := fmt.Sscanf(r, "%d:%d-%d", &e, &from, &to); err != nil {
				h.t.Fatalf("log %q: %v", r, err)
			}
			for s := from; s <= to; s++ {
				h.log[s] = e
			}
			h.applied = max(h.applied, to)
		}
		fmt.Fprintf(w, "following epoch=%d applied=%d\n", h.epoch, h.applied)
	case "new-epoch":
		ne := wire.NewEpoch{PrevEpoch: h.u64(a, "prev", 0), LastSeq: h.u64(a, "last", 0)}
		ne.Epoch = h.u64(a, "epoch", h.epoch+1)
		if step := h.sb.OnNewEpoch(ne.Epoch, h.epoch, h.p != nil); step != NewEpochFollow {
			fmt.Fprintf(w, "new epoch %d at %d: %s\n", ne.Epoch, h.epoch, step)
			return
		}
		if h.p != nil {
			fmt.Fprintf(w, "step down from %d (queued outputs dropped)\n", h.epoch)
			h.p = nil
		}
		act := h.hist.Reconcile(&ne, h.applied, mapLog(h.log))
		switch act {
		case Truncate:
			for s := ne.LastSeq + 1; s <= h.applied; s++ {
				delete(h.log, s)
			}
			h.applied = ne.LastSeq
		case Discard:
			h.log, h.applied = map[uint64]uint64{}, 0
		}
		h.hist.Follow(&ne)
		h.epoch = ne.Epoch
		fmt.Fprintf(w, "reconcile: %s; following epoch=%d from=%d applied=%d\n", act, h.epoch, h.hist.Start(), h.applied)
	case "retransmit":
		f := wire.Frame{Header: wire.Header{Type: wire.TypeRetransmit, Epoch: h.u64(a, "epoch", 0),
			Node: uint32(h.u64(a, "node", 2)), Seq: h.u64(a, "from", 1)}}
		f.Count = uint16(h.u64(a, "to", f.Seq) - f.Seq + 1)
		if h.hist.IsOlder(&f, h.epoch, uint32(h.u64(a, "primary", 2))) {
			h.hist.Note(f.Seq, f.LastSeq(), f.Epoch)
			fmt.Fprintf(w, "older history: seqs %d-%d are epoch %d\n", f.Seq, f.LastSeq(), f.Epoch)
		} else {
			fmt.Fprintf(w, "not older history: fenced as epoch %d\n", f.Epoch)
		}
	case "epoch-of":
		s := h.u64(a, "seq", 1)
		fmt.Fprintf(w, "seq %d journals under epoch %d\n", s, h.hist.EpochOf(s, h.epoch, h.applied, h.u64(a, "journal-highest", 0)))
	case "lead":
		h.hist.Lead(h.u64(a, "epoch", 1), h.u64(a, "prev", 0), h.u64(a, "from", 1))
		h.hist.Announced(h.nowNs)
		fallthrough
	case "announce":
		prev, last := h.hist.Announcement()
		fmt.Fprintf(w, "NEW_EPOCH prev=%d last=%d verified=%d due=%v\n", prev, last, h.hist.Verified(), h.hist.AnnounceDue(h.nowNs))
	}
}

type mapLog map[uint64]uint64

func (m mapLog) EpochAt(seq uint64) (uint64, bool) {
	e, ok := m[seq]
	return e, ok
}

// follower runs the standby's fence and ack commands.
func (h *harness) follower(w *strings.Builder, cmd string, a args) {
	switch cmd {
	case "follower":
		// follower epoch=2 interval=5ms delay=0
		h.p, h.epoch = nil, h.u64(a, "epoch", 1)
		h.sb = NewStandby(StandbyConfig{AckIntervalNs: h.dur(a, "interval", 5_000_000), AckDelayNs: h.dur(a, "delay", 0), NoFencing: a.has("no-fencing")})
		h.sb.Reset()
		fmt.Fprintf(w, "following epoch=%d\n", h.epoch)
	case "frame":
		// frame epoch=2 node=3 [refused]
		id := uint32(h.u64(a, "node", 2))
		switch v := h.sb.Fence(h.u64(a, "epoch", h.epoch), h.epoch, a.has("refused")); v {
		case Pass:
			changed := h.sb.SawPrimary(id, h.nowNs)
			fmt.Fprintf(w, "fence: %s; primary=%d changed=%v\n", v, h.sb.Primary(), changed)
		case AwaitNewEpoch:
			fmt.Fprintf(w, "fence: %s; ask for NEW_EPOCH now=%v\n", v, h.sb.AskNewEpoch(h.nowNs))
		default:
			fmt.Fprintf(w, "fence: %s\n", v)
		}
	case "window":
		// window ack=10 durable=8 [periodic]
		ack := Ack(h.u64(a, "ack", 0), h.u64(a, "durable", 0))
		if !h.sb.AckDue(ack, h.nowNs, a.has("periodic")) {
			fmt.Fprintf(w, "no ack (ack %d, last sent %d)\n", ack, h.sb.AckSent())
			return
		}
		h.sb.Acked(ack, h.nowNs)
		fmt.Fprintf(w, "send ACK seq=%d\n", ack)
	}
}
