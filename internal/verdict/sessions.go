package verdict

import (
	"fmt"
	"sort"

	"github.com/seqbus/seqbus/engine"
)

// SessionReport compares, for one client session found in the records,
// what its client delivered (record files hold the delivered outputs, with
// their output seq) with the session's outputs in the final primary's
// history (issue 20): every output in the history delivered exactly once,
// in order, is Missing 0, Duplicated 0, OutOfOrder 0.
type SessionReport struct {
	Session uint64
	// History: the session's numbered outputs in the final primary's
	// replay, output seqs HistoryFrom..HistoryTo (HistoryFrom > 1 when the
	// replay starts from a snapshot).
	History, HistoryFrom, HistoryTo uint64
	// Delivered: numbered outputs in the records; Missing: outputs of the
	// history never delivered though a later one was (a hole); Tail:
	// outputs after the last one delivered (the client stopped, or the
	// run ended, before they came: not a fault of the bus, and reported);
	// Duplicated: delivered again; OutOfOrder: delivered other than right
	// after the one before.
	Delivered, Missing, Tail, Duplicated, OutOfOrder uint64
	// Replayed: delivered from a replay frame (the client had missed them,
	// or the old primary never released them); ReplayedExecutions of them
	// executions: fills the client learnt of by replay.
	Replayed, ReplayedExecutions uint64
}

// OK is true when the session got its history exactly once, in order.
func (s *SessionReport) OK() bool { return s.Missing == 0 && s.Duplicated == 0 && s.OutOfOrder == 0 }

// sessionReports builds one report per session with numbered outputs in
// the records, against the final primary's collected outputs.
func sessionReports(prim *replica, rcv [][]received) []SessionReport {
	type acc struct {
		r         SessionReport
		seen      map[uint64]int
		last, max uint64
	}
	by := map[uint64]*acc{}
	for _, lines := range rcv {
		for i := range lines {
			l := &lines[i]
			if l.OutSeq == 0 || l.Session == engine.MarketData || l.Dropped {
				continue // market data, an unnumbered reject, an old record, or not delivered
			}
			a := by[l.Session]
			if a == nil {
				a = &acc{r: SessionReport{Session: l.Session}, seen: map[uint64]int{}}
				by[l.Session] = a
			}
			a.r.Delivered++
			a.seen[l.OutSeq]++
			if a.seen[l.OutSeq] == 2 {
				a.r.Duplicated++
			}
			if a.last != 0 && l.OutSeq != a.last+1 {
				a.r.OutOfOrder++
			}
			a.last = l.OutSeq
			a.max = max(a.max, l.OutSeq)
			if l.Replay {
				a.r.Replayed++
				if l.Kind == "execution" {
					a.r.ReplayedExecutions++
				}
			}
		}
	}
	out := make([]SessionReport, 0, len(by))
	for s, a := range by {
		for _, o := range prim.outs[s] {
			seq, ok := engine.SessionOutSeq(o.payload)
			if !ok {
				continue
			}
			if a.r.HistoryFrom == 0 {
				a.r.HistoryFrom = seq
			}
			a.r.HistoryTo = seq
			a.r.History++
			switch {
			case a.seen[seq] != 0:
			case seq < a.max:
				a.r.Missing++
			default:
				a.r.Tail++
			}
		}
		out = append(out, a.r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out
}

// addSessions reports the sessions and records a finding for each that
// did not get its history exactly once, in order.
func (r *Result) addSessions(reports []SessionReport) {
	r.Sessions = reports
	for i := range reports {
		s := &reports[i]
		if !s.OK() {
			r.find("session", &r.SessionFaults, "session %d: %d of its %d outputs in the final history missing, %d delivered twice, %d out of order",
				s.Session, s.Missing, s.History, s.Duplicated, s.OutOfOrder)
		}
	}
}

// Line is the report's line for one session.
func (s *SessionReport) Line() string {
	return fmt.Sprintf("session %d: %d outputs in the final history (out seqs %d..%d), %d delivered: missing %d, duplicated %d, out of order %d, %d after the last delivered (not received before the client stopped); %d delivered by replay (%d executions)",
		s.Session, s.History, s.HistoryFrom, s.HistoryTo, s.Delivered, s.Missing, s.Duplicated, s.OutOfOrder, s.Tail, s.Replayed, s.ReplayedExecutions)
}
