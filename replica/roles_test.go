package replica

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/wire"
)

// TestRolesScenarios plays testdata/term/*.txt: the term's role changes
// (replica.Roles) fed as node feeds them, each input's RolesReady printed
// as the runtime would carry it out, and the outcome of the runtime's
// I/O given back as its own command (drained, drain-failed, led,
// lead-failed, reconciled, reset-failed), as node reports it. The
// harness keeps the runtime's journal (seq -> epoch) and its queued
// outputs, and cuts, drops or keeps them as each RolesReady asks. go test
// ./replica -rewrite regenerates the expectations.
func TestRolesScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/term/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no term scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &rharness{harness: harness{t: t, log: map[uint64]uint64{}}}
			runScenarioWith(t, path, h.run)
		})
	}
}

// rharness plays a node's runtime around a Roles.
type rharness struct {
	harness
	r      Roles
	queued int      // outputs waiting in the gate (the runtime's leader)
	peers  []uint32 // configured nodes
}

func (h *rharness) run(w *strings.Builder, line string) {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	fmt.Fprintf(w, "> %s\n", line)
	switch cmd {
	case "node":
		h.setup(a)
	case "fence":
		// A fence raised outside a role change (a snapshot of a newer
		// epoch installed, as node's installSnapshot does).
		_ = h.r.Fence().Accept(h.u64(a, "epoch", 0))
	case "queued":
		h.queued = int(h.u64(a, "n", 0))
	case "lease":
		h.carryOut(w, h.r.Lease(Decision{Do: leadershipOf(h.t, a["do"]), Epoch: h.u64(a, "epoch", 0)}))
	case "drained":
		h.carryOut(w, h.r.Drained(h.applied, mapLog(h.log)))
	case "drain-failed":
		h.r.DrainFailed()
	case "led":
		h.carryOut(w, h.r.Led())
	case "lead-failed":
		h.carryOut(w, h.r.LeadFailed())
	case "new-epoch":
		ne := wire.NewEpoch{PrevEpoch: h.u64(a, "prev", 0), LastSeq: h.u64(a, "last", 0)}
		ne.Epoch = h.u64(a, "epoch", 0)
		from := uint32(h.u64(a, "from", 2))
		known := false
		for _, p := range h.peers {
			known = known || p == from
		}
		h.carryOut(w, h.r.NewEpoch(&ne, from, known, h.applied, mapLog(h.log)))
	case "retransmit":
		f := wire.Frame{Header: wire.Header{Type: wire.TypeRetransmit, Epoch: h.u64(a, "epoch", 0),
			Node: uint32(h.u64(a, "node", 2)), Seq: h.u64(a, "from", 1)}}
		f.Count = uint16(h.u64(a, "to", f.Seq) - f.Seq + 1)
		if h.r.OlderHistory(&f, uint32(h.u64(a, "primary", 2))) {
			h.r.History().Note(f.Seq, f.LastSeq(), f.Epoch)
			fmt.Fprintf(w, "older history: seqs %d-%d are epoch %d\n", f.Seq, f.LastSeq(), f.Epoch)
		} else {
			fmt.Fprintf(w, "not older history: fenced as epoch %d\n", f.Epoch)
		}
	case "reconciled":
		h.carryOut(w, h.r.Reconciled())
	case "reset-failed":
		h.r.ResetFailed()
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	h.state(w)
}

// setup: node [primary] epoch=N [fence=N] [no-fencing] [verified=N]
// [log=E:A-B,...] [peers=2,3].
func (h *rharness) setup(a args) {
	h.r = NewRoles(RolesConfig{NoFencing: a.has("no-fencing")})
	h.peers = h.ids(a, "peers")
	if len(h.peers) == 0 {
		h.peers = []uint32{2, 3}
	}
	h.log, h.applied, h.queued = map[uint64]uint64{}, 0, 0
	for _, rg := range strings.Split(a["log"], ",") {
		if rg == "" {
			continue
		}
		var e, from, to uint64
		if _, err := fmt.Sscanf(rg, "%d:%d-%d", &e, &from, &to); err != nil {
			h.t.Fatalf("log %q: %v", rg, err)
		}
		for s := from; s <= to; s++ {
			h.log[s] = e
		}
		h.applied = max(h.applied, to)
	}
	epoch := h.u64(a, "epoch", 1)
	_ = h.r.Fence().Accept(max(h.u64(a, "fence", 0), epoch))
	h.r.Recovered()
	h.r.hist.verified = h.u64(a, "verified", 0)
	if a.has("primary") {
		if err := h.r.BecomePrimary(epoch); err != nil {
			h.t.Fatal(err)
		}
		h.r.History().Lead(epoch, h.u64(a, "prev", 0), h.u64(a, "from", 1))
	}
}

// carryOut prints rd in its fields' order and does the runtime's part
// that the harness models: the queued outputs and the journal cut.
func (h *rharness) carryOut(w *strings.Builder, rd RolesReady) {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if rd.Drop != DropNone {
		add("drop: %s", rd.Drop)
	}
	if rd.Ignored {
		add("ignored (UNSAFE: a deposed primary leads on)")
	}
	if rd.Repeat {
		add("repeat: learn primary %d", rd.Primary)
	}
	if rd.Regained {
		add("lease regained: releases resume")
	}
	if rd.LeaseLost {
		add("lease lost: drop %d queued", h.queued)
		h.queued = 0
	}
	if rd.StepDown {
		add("step down from=%d to=%d: drop %d queued, follow", rd.From, rd.To, h.queued)
		h.queued = 0
	}
	if rd.Drain {
		add("drain (flush, sync) for epoch %d new-term=%v", rd.Epoch, rd.NewTerm)
	}
	if rd.Lead {
		add("build leader epoch=%d from=%d prev=%d", rd.Epoch, rd.LeadFrom, rd.PrevEpoch)
		_ = h.r.BecomePrimary(rd.Epoch) // the runtime's becomePrimary
	}
	if rd.Announce {
		prev, last := h.r.History().Announcement()
		add("announce NEW_EPOCH prev=%d last=%d", prev, last)
	}
	if rd.KeepQueued {
		add("keep %d queued", h.queued)
	}
	if rd.Reconciling {
		if rd.Reconcile == Keep {
			add("reconcile: keep")
		} else {
			add("reconcile: %s cut-after=%d", rd.Reconcile, rd.CutAfter)
		}
		h.cut(rd)
	}
	if rd.Follow {
		if rd.Primary != 0 {
			add("follow epoch=%d primary=%d", rd.Epoch, rd.Primary)
		} else {
			add("follow epoch=%d (primary not known yet)", rd.Epoch)
		}
	}
	if len(out) == 0 {
		out = append(out, "nothing")
	}
	fmt.Fprintln(w, strings.Join(out, "; "))
}

// cut is the runtime's resetHistory: the journal cut after rd.CutAfter
// (Truncate) or emptied (Discard).
func (h *rharness) cut(rd RolesReady) {
	switch rd.Reconcile {
	case Truncate:
		for s := rd.CutAfter + 1; s <= h.applied; s++ {
			delete(h.log, s)
		}
		h.applied = rd.CutAfter
	case Discard:
		h.log, h.applied = map[uint64]uint64{}, 0
	}
}

func (h *rharness) state(w *strings.Builder) {
	role := "standby"
	if h.r.Primary() {
		role = "primary"
	}
	hs := h.r.History()
	fmt.Fprintf(w, "%s epoch=%d fence=%d applied=%d history: start=%d prev=%d verified=%d\n",
		role, h.r.Epoch(), h.r.Fence().Highest(), h.applied, hs.Start(), hs.PrevEpoch(), hs.Verified())
}

func leadershipOf(t *testing.T, s string) Leadership {
	for i, n := range leadershipNames {
		if n == s {
			return Leadership(i)
		}
	}
	t.Fatalf("unknown lease decision %q", s)
	return Stay
}
