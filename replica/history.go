package replica

import "github.com/seqbus/seqbus/wire"

// History is where a node's history stands against the epochs that wrote
// it: the current epoch's history starts at Start; before it lies
// PrevEpoch's (from NEW_EPOCH). It also remembers which epoch this
// process verified its history against, and which epoch older records
// resent by the primary were sequenced under. The zero value is a node
// that has verified nothing; call Reset before use.
type History struct {
	prevEpoch, start uint64
	// verified is the epoch whose history this process has checked ours
	// against (followed after NEW_EPOCH, or led): 0 after a restart.
	verified uint64
	epochs   []historyEpoch
	// lastAnnounceNs is when this primary last sent NEW_EPOCH.
	lastAnnounceNs int64
}

// historyEpoch says which epoch a range of seqs before the current epoch
// was sequenced under, learnt from RETRANSMIT frames.
type historyEpoch struct{ from, to, epoch uint64 }

// maxHistoryEpochs bounds the table; past it the oldest entry is dropped
// and its seqs fall back to PrevEpoch (a later fork check then refetches
// state rather than trust the label).
const maxHistoryEpochs = 64

// AnnounceEveryNs: a primary repeats NEW_EPOCH every 100 ms for its whole
// term, so a node that missed it (lost, paused, restarted) still learns
// where the new history starts before it accepts any of it.
const AnnounceEveryNs = 100_000_000

// Reset says the whole history is one epoch's from seq 1 (a start-up, or
// a static primary whose history is all its own).
func (h *History) Reset() { h.prevEpoch, h.start = 0, 1 }

// PrevEpoch is the epoch of the records before Start.
func (h *History) PrevEpoch() uint64 { return h.prevEpoch }

// Start is the first seq of the current epoch.
func (h *History) Start() uint64 { return h.start }

// Verified is the epoch this process checked its history against.
func (h *History) Verified() uint64 { return h.verified }

// Lead starts a term of epoch at seq from (applied+1) whose records
// before lie in epoch prev: our own history is the epoch's, verified.
// The runtime announces it at once (Announced).
func (h *History) Lead(epoch, prev, from uint64) {
	h.prevEpoch, h.start, h.verified = prev, from, epoch
}

// Announcement is what NEW_EPOCH says: the previous epoch and its last
// seq, the fork point.
func (h *History) Announcement() (prevEpoch, lastSeq uint64) { return h.prevEpoch, h.start - 1 }

// AnnounceDue reports whether the primary should repeat NEW_EPOCH now.
func (h *History) AnnounceDue(nowNs int64) bool {
	return nowNs-h.lastAnnounceNs >= AnnounceEveryNs
}

// Announced records that NEW_EPOCH was sent at nowNs.
func (h *History) Announced(nowNs int64) { h.lastAnnounceNs = nowNs }

// StaleAck reports whether an ack stamped with an older epoch should make
// the primary repeat NEW_EPOCH now (at most once a millisecond): a standby
// still on an older epoch learns the fork point at once.
func (h *History) StaleAck(nowNs int64) bool {
	if nowNs-h.lastAnnounceNs <= 1_000_000 {
		return false
	}
	h.lastAnnounceNs = 0
	return h.AnnounceDue(nowNs)
}

// IsOlder reports whether f is a RETRANSMIT from our current primary
// (primaryID, leading epoch) of records wholly before the current epoch,
// stamped with the (older) epoch they were sequenced under. Only the
// current primary is believed, and only below where its epoch starts.
func (h *History) IsOlder(f *wire.Frame, epoch uint64, primaryID uint32) bool {
	return f.Type == wire.TypeRetransmit && f.Epoch < epoch && f.Epoch <= h.prevEpoch &&
		f.Node == primaryID && primaryID != 0 && f.LastSeq() < h.start
}

// Note records that seqs from..to were sequenced under epoch.
func (h *History) Note(from, to, epoch uint64) {
	if k := len(h.epochs); k > 0 {
		last := &h.epochs[k-1]
		if last.epoch == epoch && last.to+1 >= from && from >= last.from {
			last.to = max(last.to, to)
			return
		}
	}
	if len(h.epochs) == maxHistoryEpochs {
		h.epochs = h.epochs[1:]
	}
	h.epochs = append(h.epochs, historyEpoch{from, to, epoch})
}

// EpochOf is the epoch a standby following epoch journals seq under: the
// current epoch from its start on; before it, the epoch the RETRANSMIT
// carrying it was stamped with, else PrevEpoch. It never goes below the
// journal's highest epoch (a node that discarded its history keeps its
// fence), so in that rare case a record can be labelled too high; a later
// reconcile that cannot prove agreement refetches state, so a wrong label
// can cost a snapshot, never a wrong history. Entries already applied
// past are forgotten.
func (h *History) EpochOf(seq, epoch, applied, journalHighest uint64) uint64 {
	e := epoch
	if seq < h.start {
		e = h.prevEpoch
		for len(h.epochs) > 0 && h.epochs[0].to < seq && h.epochs[0].to < applied {
			h.epochs = h.epochs[1:]
		}
		for _, he := range h.epochs {
			if he.from <= seq && seq <= he.to {
				e = he.epoch
				break
			}
		}
	}
	return max(e, journalHighest)
}

// ForkEpoch is the previous epoch a promotion to epoch announces: that of
// our last applied record, 0 with none, or when the journal does not hold
// it or labels it at or above the new epoch (which cannot be history).
func ForkEpoch(applied, epoch uint64, log Log) uint64 {
	prev, _ := log.EpochAt(applied)
	if applied == 0 || prev >= epoch {
		return 0
	}
	return prev
}

// Log is the read-only view of the journal reconciliation needs.
type Log interface {
	// EpochAt returns the epoch of the record at seq; ok is false when
	// the journal does not hold it.
	EpochAt(seq uint64) (epoch uint64, ok bool)
}

// Action says what a standby does with its history when a new epoch
// starts.
type Action uint8

const (
	// Keep: our history is a prefix of the new primary's; follow.
	Keep Action = iota
	// Truncate: our history agrees up to the fork point; drop the
	// unreplicated suffix above it (journal cut after Fork) and follow.
	Truncate
	// Discard: agreement cannot be shown; throw the history away and
	// fetch the state from the new primary.
	Discard
)

var actionNames = [...]string{"keep", "truncate", "discard"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action?"
}

// Reconcile decides what to do with our history (applied up to applied,
// journaled in log) when NEW_EPOCH ne arrives: the histories agree up to
// ne.LastSeq when our record there has the epoch the new primary says its
// record has (the log-matching rule: one primary per epoch, so equal
// (seq, epoch) means equal history up to there). Then we drop any suffix
// above LastSeq and follow. When we cannot show agreement, we discard.
// It changes nothing; the runtime carries the action out, then calls
// Follow.
func (h *History) Reconcile(ne *wire.NewEpoch, applied uint64, log Log) Action {
	switch {
	case applied == 0:
		return Keep
	case ne.LastSeq == 0:
		return Discard
	case applied >= ne.LastSeq:
		e, ok := log.EpochAt(ne.LastSeq)
		if !ok || e != ne.PrevEpoch {
			return Discard
		}
		if applied > ne.LastSeq {
			return Truncate
		}
		return Keep
	case ne.PrevEpoch == h.verified:
		// We followed (or led) PrevEpoch in this process after checking
		// our history against its primary, so everything we hold is a
		// prefix of PrevEpoch's history, and so of the new primary's up
		// to LastSeq (its record there is a PrevEpoch record). Without
		// this a primary that regains its own lease (a new epoch) would
		// make every lagging standby discard its history.
		return Keep
	default:
		if e, ok := log.EpochAt(applied); ok && e == ne.PrevEpoch {
			return Keep
		}
		return Discard
	}
}

// Follow records that we follow ne's epoch, reconciled: its history
// starts after ne.LastSeq, and we verified ours against it.
func (h *History) Follow(ne *wire.NewEpoch) {
	h.prevEpoch, h.start, h.verified = ne.PrevEpoch, ne.LastSeq+1, ne.Epoch
	h.epochs = h.epochs[:0]
}
