package session

import "github.com/seqbus/seqbus/engine"

// History is the bounded output history: parallel columns indexed by
// entry number mod capacity, so a scan for one session reads 8 bytes an
// entry. It never allocates after NewHistory. The zero of *History (nil)
// is "no history"; its methods are not to be called on nil (Replay checks).
type History struct {
	session []uint64
	outSeq  []uint64
	seq     []uint64 // the command's seq (the gate's watermark is in seqs)
	size    []uint16
	payload [][MaxOutputBytes]byte
	next    uint64 // entries ever recorded: the newest is next-1
}

// NewHistory returns a history of capacity outputs over all sessions, or
// nil (no history) when capacity <= 0. The caller bounds capacity
// (MaxHistory): it allocates about 150 bytes an entry at once.
func NewHistory(capacity int) *History {
	if capacity <= 0 {
		return nil
	}
	return &History{
		session: make([]uint64, capacity), outSeq: make([]uint64, capacity), seq: make([]uint64, capacity),
		size: make([]uint16, capacity), payload: make([][MaxOutputBytes]byte, capacity),
	}
}

// Record keeps one output of the command at seq if it is numbered in a
// session's history (not market data, not an unnumbered reject, not a
// duplicate answer, which repeats an output already held, not larger than
// a slot). It reports whether it kept it; the oldest entry makes room.
func (h *History) Record(seq, to uint64, payload []byte) bool {
	if to == engine.MarketData || len(payload) > MaxOutputBytes {
		return false
	}
	out, ok := engine.SessionOutSeq(payload)
	if !ok || out == 0 {
		return false
	}
	i := h.next % uint64(len(h.session))
	h.session[i], h.outSeq[i], h.seq[i] = to, out, seq
	h.size[i] = uint16(copy(h.payload[i][:], payload))
	h.next++
	return true
}

// Reset forgets every entry (a snapshot replaced the state: the outputs of
// the commands it skipped were never seen here).
func (h *History) Reset() { h.next = 0 }

// Cap is the number of entries the history holds at most.
func (h *History) Cap() int { return len(h.session) }

// oldest is the entry number of the oldest entry held.
func (h *History) oldest() uint64 {
	return h.next - min(h.next, uint64(len(h.session)))
}

// Plan is what the history can answer for (session, from) under a released
// watermark: entries First..End (entry numbers, End exclusive) hold the
// session's outputs from..Next-1 (none when First == End). Highest is the
// session's newest output held (0: none). TooOld: outputs from..Next-1
// left the history (or a hole cuts them off); nothing is to be sent.
type Plan struct {
	First, End    uint64
	Next, Highest uint64
	TooOld        bool
}

// Plan finds what to replay of session from output seq from on, at most
// max outputs, none of a command above released. It walks back from the
// newest entry to the one holding output from (so a reconnect, which asks
// for recent outputs, reads little), then forward under released.
func (h *History) Plan(session, from, released uint64, max int) Plan {
	p := Plan{Next: from}
	lo := h.oldest()
	start := h.next // entry number of output `from`, if held
	lowest := uint64(0)
	c := uint64(len(h.session))
	for e := h.next; e > lo; e-- {
		i := (e - 1) % c
		if h.session[i] != session {
			continue
		}
		if p.Highest == 0 {
			p.Highest = h.outSeq[i]
		} else if h.outSeq[i] != lowest-1 {
			// A hole (a rebuild whose journal ended below its snapshot):
			// only the run above it can be replayed.
			break
		}
		lowest = h.outSeq[i]
		if h.outSeq[i] < from {
			break
		}
		start = e - 1
	}
	switch {
	case p.Highest == 0 || from > p.Highest:
		// Nothing of the session at or after from: nothing to send.
		p.First, p.End = start, start
		return p
	case lowest > from:
		// The outputs from..lowest-1 left the history.
		p.TooOld, p.Next = true, lowest
		return p
	}
	p.First = start
	e, sent := start, 0
	for ; e < h.next && sent < max; e++ {
		i := e % c
		if h.seq[i] > released {
			break
		}
		if h.session[i] == session {
			p.Next = h.outSeq[i] + 1
			sent++
		}
	}
	p.End = e
	return p
}

// Output is one output to replay: the command's seq (an OUTPUT frame's seq
// is its first output's), the session's output seq and the encoding.
type Output struct {
	Seq, OutSeq uint64
	Payload     []byte
}

// AppendOutputs appends the session's outputs of plan p to dst, in order.
// Their payloads point into the history: valid until the next Record.
func (h *History) AppendOutputs(dst []Output, session uint64, p Plan) []Output {
	c := uint64(len(h.session))
	for e := p.First; e < p.End; e++ {
		i := e % c
		if h.session[i] == session {
			dst = append(dst, Output{Seq: h.seq[i], OutSeq: h.outSeq[i], Payload: h.payload[i][:h.size[i]]})
		}
	}
	return dst
}
