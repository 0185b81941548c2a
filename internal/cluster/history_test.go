package cluster

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/status"
)

// cleanHistory is a run of 20 orders of session 9, every one answered,
// with identical primary and standby.
func cleanHistory(t *testing.T, base string) *History {
	t.Helper()
	p, err := ReadJournal(filepath.Join(base, "p"), JournalOptions{Replay: true, Engine: engine.DefaultConfig(), Session: 9})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadJournal(filepath.Join(base, "s"), JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &History{Sent: 20, Stats: client.Stats{Answered: 20}, Primary: p, Standby: s}
	h.PrimaryStatus = Status{ID: 1, Role: "primary", Epoch: 1, Applied: p.Applied}
	h.PrimaryStatus.StateHash = status.Hash64(p.Hash)
	h.StandbyStatus = h.PrimaryStatus
	h.StandbyStatus.ID, h.StandbyStatus.Role = 2, "standby"
	for id := uint64(1); id <= 20; id++ {
		o := p.Results[id][0]
		h.Results = append(h.Results, client.Result{ClientOrderID: id, Kind: o.Kind})
		h.Seen = append(h.Seen, Seen{Node: 1, Epoch: 1, Seq: id, O: o})
	}
	for i, o := range p.MD {
		h.MD = append(h.MD, Seen{Node: 1, Epoch: 1, Seq: uint64(i + 1), O: o})
	}
	return h
}

func checked(h *History) map[string][]string {
	got := map[string][]string{}
	CheckHistory(h, func(check, format string, args ...any) {
		got[check] = append(got[check], fmt.Sprintf(format, args...))
	})
	return got
}

// TestCheckHistory: a clean run passes every check, and each kind of
// break is caught by its check.
func TestCheckHistory(t *testing.T) {
	base := t.TempDir()
	writeJournal(t, filepath.Join(base, "p"), 20, 0)
	writeJournal(t, filepath.Join(base, "s"), 20, 0)
	if got := checked(cleanHistory(t, base)); len(got) != 0 {
		t.Fatalf("clean run: %v", got)
	}
	// A primary promoted after a failover publishes again, byte for
	// byte, what the old one may have sent after its last heartbeat: a
	// later epoch repeating earlier seqs is no finding; a repeat within
	// one epoch, or with other content, is.
	h := cleanHistory(t, base)
	if len(h.MD) < 4 {
		t.Fatalf("only %d market-data updates in the plan", len(h.MD))
	}
	for _, m := range h.MD[len(h.MD)-3:] {
		m.Node, m.Epoch = 2, 2
		h.MD = append(h.MD, m)
	}
	if got := checked(h); len(got) != 0 {
		t.Fatalf("a new epoch's exact republish flagged: %v", got)
	}
	h.MD[len(h.MD)-1].O.Qty++
	if got := checked(h); len(got[CheckMDReuse]) == 0 {
		t.Fatalf("a republish with other content not caught: %v", got)
	}
	for _, tc := range []struct {
		check   string
		breakIt func(h *History)
	}{
		{CheckAllAnswered, func(h *History) { h.Stats.Answered = 19 }},
		{CheckInHistory, func(h *History) {
			h.Results = append(h.Results, client.Result{ClientOrderID: 99, Kind: engine.KindAck})
		}},
		{CheckIdentical, func(h *History) { h.Seen[3].O.OrderID += 1000 }},
		{CheckReplicas, func(h *History) { h.StandbyStatus.Applied-- }},
		{CheckReplicas, func(h *History) { h.Standby.Digests[4]++ }},
		{CheckReplicas, func(h *History) { h.PrimaryStatus.StateHash++; h.StandbyStatus.StateHash++ }},
		{CheckAppliedOnce, func(h *History) {
			h.Primary.Results[2] = append(h.Primary.Results[2], h.Primary.Results[2][0])
		}},
		{CheckMDDuplicate, func(h *History) { h.MD = append(h.MD, h.MD[0]) }},
		{CheckMDReuse, func(h *History) { h.MD[0].O.Qty++ }},
		{CheckMDMonotonic, func(h *History) { h.MD[0], h.MD[1] = h.MD[1], h.MD[0] }},
	} {
		h := cleanHistory(t, base)
		tc.breakIt(h)
		got := checked(h)
		if len(got[tc.check]) == 0 {
			t.Errorf("%s: not caught (got %v)", tc.check, got)
		}
		if tc.check == CheckIdentical && !strings.Contains(got[tc.check][0], "not in the final history") {
			t.Errorf("%s: %v", tc.check, got[tc.check])
		}
	}
}
