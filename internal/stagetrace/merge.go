package stagetrace

import (
	"errors"
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Stage names, in path order. Each is a histogram of nanoseconds.
const (
	StageIntendedToSent = "intended->sent"       // the load generator's own lateness
	StageSequenced      = "sent->sequenced"      // client sent -> primary sequenced
	StageStandby        = "sequenced->standby"   // -> applied at the last standby
	StageAcked          = "sequenced->acked"     // -> the acks the gate needs covered it
	StageDurable        = "sequenced->durable"   // -> durable in the primary's journal
	StageReleased       = "sequenced->released"  // -> released through the gate
	StageReceived       = "released->received"   // released -> received by the client
	StageEndToEnd       = "end-to-end"           // intended send time -> received (wrk2 style)
	StageEndToEndSent   = "end-to-end-from-sent" // actual send time -> received
)

// Stages lists the stages Merge fills, in path order.
var Stages = []string{StageIntendedToSent, StageSequenced, StageStandby, StageAcked, StageDurable,
	StageReleased, StageReceived, StageEndToEnd, StageEndToEndSent}

// HistogramHighestNs is every stage histogram's upper bound (a minute);
// 3 significant digits.
const HistogramHighestNs = int64(60e9)

// NewHist is the histogram every stage uses.
func NewHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, HistogramHighestNs, 3) }

// Merged is one histogram per stage and what did not fit.
type Merged struct {
	Hist map[string]*hdrhistogram.Histogram
	// Commands is the client order ids measured (past the warm-up) with
	// an answer; Unanswered those sent but never received.
	Commands, Unanswered int
	// Unmatched: answered commands the primary's trace has no seq for
	// (past its capacity, or another session's).
	Unmatched int
	// Backwards counts pairs whose later stage is earlier than the
	// former (a clock bug or a mismatch); they are not recorded.
	Backwards int
	// FirstIntendedNs, FirstSentNs and LastReceivedNs bound the measured
	// commands (a flat-out run's intended times run ahead of its sends,
	// so its rate is timed from the first send).
	FirstIntendedNs, FirstSentNs, LastReceivedNs int64
	// Intervals are the end-to-end latencies by second of intended send
	// time: Intervals[i] holds the commands meant to leave in second i
	// after the first measured one's intended time (an interval log).
	Intervals []*hdrhistogram.Histogram
}

// intervalsMax bounds Intervals (a day of seconds).
const intervalsMax = 86_400

// ErrMissing is returned when a needed trace or column is absent.
var ErrMissing = errors.New("stagetrace: trace missing")

// Merge joins a client's trace with the primary's and the standbys'. The
// client's rows are client order ids; the primary maps each seq to the
// (session, client order id) it sequenced, so the join is exact whatever
// the batching. Client order ids 1..warmup are left out. With several
// standbys, sequenced->standby is the last of them (the gate waits for
// all).
func Merge(client, primary *Trace, standbys []*Trace, warmup int) (*Merged, error) {
	if client == nil || primary == nil {
		return nil, fmt.Errorf("%w: need the client's and the primary's", ErrMissing)
	}
	intended, sent, received := client.Col(ColIntended), client.Col(ColSent), client.Col(ColReceived)
	sequenced, session, orderID := primary.Col(ColSequenced), primary.Col(ColSession), primary.Col(ColOrderID)
	acked, durable, released := primary.Col(ColAcked), primary.Col(ColDurable), primary.Col(ColReleased)
	if intended == nil || sent == nil || received == nil {
		return nil, fmt.Errorf("%w: client trace without intended/sent/received", ErrMissing)
	}
	if sequenced == nil || session == nil || orderID == nil || acked == nil || durable == nil || released == nil {
		return nil, fmt.Errorf("%w: primary trace without its columns", ErrMissing)
	}
	var applied [][]int64
	for _, s := range standbys {
		if c := s.Col(ColApplied); c != nil {
			applied = append(applied, c)
		}
	}
	seqOf := seqsOf(client.ID, session, orderID, len(intended))
	m := &Merged{Hist: map[string]*hdrhistogram.Histogram{}}
	for _, s := range Stages {
		m.Hist[s] = NewHist()
	}
	rec := m.rec
	base := firstIntended(intended, warmup)
	for id := warmup + 1; id < len(intended); id++ {
		if intended[id] == 0 {
			continue // never sent
		}
		rec(StageIntendedToSent, intended[id], sent[id])
		if received[id] == 0 {
			m.Unanswered++
			continue
		}
		m.Commands++
		if m.FirstIntendedNs == 0 || intended[id] < m.FirstIntendedNs {
			m.FirstIntendedNs = intended[id]
		}
		if v := sent[id]; v != 0 && (m.FirstSentNs == 0 || v < m.FirstSentNs) {
			m.FirstSentNs = v
		}
		m.LastReceivedNs = max(m.LastReceivedNs, received[id])
		rec(StageEndToEnd, intended[id], received[id])
		rec(StageEndToEndSent, sent[id], received[id])
		if sec := (intended[id] - base) / 1e9; received[id] >= intended[id] && sec < intervalsMax {
			for int64(len(m.Intervals)) <= sec {
				m.Intervals = append(m.Intervals, NewHist())
			}
			_ = m.Intervals[sec].RecordValue(min(max(received[id]-intended[id], 1), HistogramHighestNs))
		}
		seq := seqOf[id]
		if seq == 0 {
			m.Unmatched++
			continue
		}
		sq := sequenced[seq]
		rec(StageSequenced, sent[id], sq)
		if last := lastApplied(applied, seq); len(applied) > 0 && last > 0 {
			rec(StageStandby, sq, last)
		}
		rec(StageAcked, sq, at(acked, seq))
		rec(StageDurable, sq, at(durable, seq))
		rec(StageReleased, sq, at(released, seq))
		rec(StageReceived, at(released, seq), received[id])
	}
	return m, nil
}

// seqsOf maps each client order id of session id (below n) to the seq
// that sequenced it first (a resend sequenced twice: the first counts).
func seqsOf(id uint32, session, orderID []int64, n int) []uint64 {
	seqOf := make([]uint64, n)
	for seq := 1; seq < len(orderID); seq++ {
		oid := orderID[seq]
		if uint32(session[seq]) != id || session[seq] == 0 || oid <= 0 || oid >= int64(len(seqOf)) {
			continue
		}
		if seqOf[oid] == 0 {
			seqOf[oid] = uint64(seq)
		}
	}
	return seqOf
}

// firstIntended is the first measured intended time (past the warm-up).
func firstIntended(intended []int64, warmup int) int64 {
	var base int64
	for id := warmup + 1; id < len(intended); id++ {
		if v := intended[id]; v != 0 && (base == 0 || v < base) {
			base = v
		}
	}
	return base
}

// lastApplied is the last standby's applied time of seq, or -1 when one
// standby did not record it (no sample).
func lastApplied(applied [][]int64, seq uint64) int64 {
	var last int64
	for _, a := range applied {
		v := at(a, seq)
		if v == 0 {
			return -1
		}
		last = max(last, v)
	}
	return last
}

// rec records one stage's sample; a stamp missing gives none, a stamp
// before its start counts as backwards.
func (m *Merged) rec(stage string, from, to int64) {
	if from == 0 || to == 0 {
		return
	}
	if to < from {
		m.Backwards++
		return
	}
	_ = m.Hist[stage].RecordValue(min(max(to-from, 1), HistogramHighestNs))
}

// at is col[i], or 0 past its end.
func at(col []int64, i uint64) int64 {
	if i < uint64(len(col)) {
		return col[i]
	}
	return 0
}
