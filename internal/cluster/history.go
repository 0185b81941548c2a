package cluster

import (
	"fmt"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
)

// The checks CheckHistory makes, by name.
const (
	CheckAllAnswered   = "every command answered"
	CheckInHistory     = "every answer in the final history"
	CheckIdentical     = "every output received identical in the final engine"
	CheckAppliedOnce   = "no (session, client order id) applied twice"
	CheckReplicas      = "standby identical to the final primary"
	CheckMDDuplicate   = "no market-data seq received twice"
	CheckMDReuse       = "no market-data seq reused with other content"
	CheckMDMonotonic   = "market-data seqs only increase across the failover"
	CheckDeposedSilent = "the deposed primary releases nothing after its lease"
)

// History is what a run of one client against a primary and a standby
// left, once every process has stopped.
type History struct {
	// The load: commands sent, how it ended, every result it got, and
	// every output its socket received (Tap), in arrival order.
	Sent    uint64
	LoadErr error
	Stats   client.Stats
	Results []client.Result
	Seen    []Seen
	// MD is every market-data output received (Observer).
	MD []Seen
	// The final statuses and journals. Primary is the final primary's
	// journal read with Replay (for the client's session).
	PrimaryStatus, StandbyStatus Status
	Primary, Standby             *Journal
}

// HistoryCounts is what CheckHistory looked at.
type HistoryCounts struct {
	Answers, Received, Resent, MDReceived, MDInHistory int
}

// CheckHistory checks a stopped run against everything its client and
// market-data observer received, calling add for every violation: every
// command answered; every answer in the final primary's history with the
// result the history gives it; every output received identical there; no
// order applied twice; the standby's journal, applied seq and state hash
// equal to the primary's, whose journal replays to its reported hash; no
// market-data seq received twice, reused with other content or going
// back.
func CheckHistory(h *History, add func(check, format string, args ...any)) HistoryCounts {
	if h.LoadErr != nil || h.Stats.Answered != h.Sent {
		add(CheckAllAnswered, "answered %d of %d (%v)", h.Stats.Answered, h.Sent, h.LoadErr)
	}
	checkReplicas(h, add)
	r := h.Primary
	n := HistoryCounts{Answers: len(h.Results), Received: len(h.Seen), MDInHistory: len(r.MD)}
	// Answers: each (session, id) answered is in the history, with the
	// same result the history produces.
	for _, res := range h.Results {
		if r.Records[res.ClientOrderID] == 0 {
			add(CheckInHistory, "order %d answered %s (duplicate %v) but not in the final journal", res.ClientOrderID, client.KindName(res.Kind), res.Duplicate)
			continue
		}
		got := r.Results[res.ClientOrderID]
		if len(got) == 0 || got[0].Kind != res.Kind {
			add(CheckInHistory, "order %d answered %s; the final history answers %v", res.ClientOrderID, client.KindName(res.Kind), got)
		}
	}
	for id, k := range r.Records {
		if k > 1 {
			n.Resent++
		}
		if k := len(r.Results[id]); k > 1 {
			add(CheckAppliedOnce, "order %d has %d results in the final history: %v", id, k, r.Results[id])
		}
	}
	checkReceived(h, add)
	n.MDReceived = checkMarketData(h, add)
	return n
}

// checkReplicas compares the standby with the final primary.
func checkReplicas(h *History, add func(check, format string, args ...any)) {
	ps, ss := h.PrimaryStatus, h.StandbyStatus
	for _, s := range []Status{ps, ss} {
		if s.Node["HashMismatches"] != 0 {
			add(CheckReplicas, "node %d counted %d hash mismatches", s.ID, s.Node["HashMismatches"])
		}
	}
	if ps.Role != "primary" || ss.Role != "standby" {
		add(CheckReplicas, "final roles: node %d %s, node %d %s", ps.ID, ps.Role, ss.ID, ss.Role)
	}
	if ss.Applied != ps.Applied || ss.StateHash != ps.StateHash || ss.Epoch != ps.Epoch {
		add(CheckReplicas, "standby %d at applied %d hash %#x epoch %d; primary %d at %d %#x epoch %d",
			ss.ID, ss.Applied, ss.StateHash, ss.Epoch, ps.ID, ps.Applied, ps.StateHash, ps.Epoch)
	}
	pd, sd := h.Primary, h.Standby
	if pd.Last != sd.Last || sd.First < pd.First {
		add(CheckReplicas, "journals: primary [%d, %d], standby [%d, %d]", pd.First, pd.Last, sd.First, sd.Last)
	} else {
		for seq := sd.First; seq <= sd.Last; seq++ {
			if sd.Digests[seq-sd.First] != pd.Digests[seq-pd.First] {
				add(CheckReplicas, "standby journal differs from the primary's at seq %d", seq)
				break
			}
		}
	}
	if pd.Applied != ps.Applied || pd.Hash != uint64(ps.StateHash) {
		add(CheckReplicas, "replaying the primary's journal gives applied %d hash %#x; it reported %d %#x",
			pd.Applied, pd.Hash, ps.Applied, ps.StateHash)
	}
}

// checkReceived: every output the client received (acks, rejects,
// executions, cancels, duplicates as their original) is in the final
// history.
func checkReceived(h *History, add func(check, format string, args ...any)) {
	for _, s := range h.Seen {
		o := s.O
		if o.Kind == engine.KindMarketData {
			continue
		}
		if o.Kind == engine.KindDuplicate {
			o.Kind, o.Original = o.Original, 0
		}
		if h.Primary.Outputs[o] == 0 {
			add(CheckIdentical, "%s of order %d (order id %d, trade %d) from node %d epoch %d is not in the final history",
				client.KindName(s.O.Kind), o.ClientOrderID, o.OrderID, o.TradeID, s.Node, s.Epoch)
		}
	}
}

// checkMarketData: within an epoch no seq twice and seqs increasing;
// every update equal to the history's. A primary promoted after a
// failover publishes again, byte for byte, the updates above the last
// release it learned from the old primary (README: consumers drop exact
// duplicates by MD seq), so a later epoch may repeat an earlier epoch's
// seqs (CheckMDReuse still holds their content to the history's). It
// returns how many distinct seqs were received.
func checkMarketData(h *History, add func(check, format string, args ...any)) int {
	md := h.Primary.MD
	firstEpoch := map[uint64]uint64{} // md seq -> epoch it was first received in
	var last, lastEpoch uint64
	for _, s := range h.MD {
		o := s.O
		if o.Kind != engine.KindMarketData {
			continue
		}
		if e, seen := firstEpoch[o.MDSeq]; !seen {
			firstEpoch[o.MDSeq] = s.Epoch
		} else if e == s.Epoch {
			add(CheckMDDuplicate, "md seq %d received twice in epoch %d (now from node %d)", o.MDSeq, s.Epoch, s.Node)
		}
		if o.MDSeq == 0 || o.MDSeq > uint64(len(md)) || md[o.MDSeq-1] != o {
			add(CheckMDReuse, "md seq %d from node %d epoch %d differs from the final history's", o.MDSeq, s.Node, s.Epoch)
		}
		if s.Epoch != lastEpoch {
			last, lastEpoch = 0, s.Epoch // a new primary continues from what it learned
		}
		if o.MDSeq <= last {
			add(CheckMDMonotonic, "md seq %d from node %d epoch %d after seq %d", o.MDSeq, s.Node, s.Epoch, last)
		}
		last = max(last, o.MDSeq)
	}
	return len(firstEpoch)
}

// String is the counts as the e2e tests log them.
func (n HistoryCounts) String() string {
	return fmt.Sprintf("%d answers, %d outputs received, %d journaled twice (resends), %d market-data messages received of %d in the history",
		n.Answers, n.Received, n.Resent, n.MDReceived, n.MDInHistory)
}
