package auth

// HistoryEpochs bounds the keys a Frames holds for history: epochs older
// than every epoch its Keyring holds, or below the highest it accepted,
// wanted only for RETRANSMITs of records sequenced under them (a primary
// resending its journal to a node that refetches it, and that node
// verifying them). A refetch runs in seq order, so the epochs it needs
// come in ascending runs; four slots let a repair that re-asks for an
// earlier run reuse its key. At the bound the oldest-installed slot is
// replaced.
const HistoryEpochs = 4

// historyKeys is HistoryEpochs data keys of one stream, kept apart from
// the Keyring so that resending history never evicts a live epoch's key
// and the ring's rule (a full ring refuses an epoch below all it holds)
// never refuses history. The zero value is empty and ready.
type historyKeys struct {
	slots [HistoryEpochs]keyringSlot
	n     int // slots in use
	next  int // the slot the next install replaces once full
}

// find returns epoch's MAC, or nil.
func (h *historyKeys) find(epoch uint64) *MAC {
	for i := range h.slots[:h.n] {
		if h.slots[i].epoch == epoch {
			return h.slots[i].mac
		}
	}
	return nil
}

// install holds m for epoch, replacing the oldest-installed slot when
// full.
func (h *historyKeys) install(epoch uint64, m *MAC) {
	if h.n < HistoryEpochs {
		h.slots[h.n] = keyringSlot{epoch: epoch, mac: m}
		h.n++
		return
	}
	h.slots[h.next] = keyringSlot{epoch: epoch, mac: m}
	h.next = (h.next + 1) % HistoryEpochs
}
