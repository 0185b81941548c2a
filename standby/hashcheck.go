package standby

// HashCheck compares the primary's state hashes (HASH frames) with this
// replica's own at the same seq. Both sides take a hash at every seq that
// is a multiple of the agreed interval; whichever arrives first waits in a
// small bounded ring for the other. A mismatch is a divergence alarm: the
// replicas applied the same commands and reached different states, which
// must never happen with a deterministic state machine.

// HashRing bounds the hashes remembered on each side.
const HashRing = 64

type seqHash struct {
	seq, hash uint64
}

// HashStats counts comparisons.
type HashStats struct {
	Matched, Mismatched, Expired uint64
	LastMismatchSeq              uint64
}

// HashCheck is the pure comparison core.
type HashCheck struct {
	local, remote [HashRing]seqHash
	stats         HashStats
}

// Local records this replica's hash after applying seq. It returns false on
// a mismatch with a remote hash already received for seq.
func (h *HashCheck) Local(seq, hash uint64) bool {
	return h.put(&h.local, &h.remote, seq, hash)
}

// Remote records the primary's hash at seq. It returns false on a mismatch
// with this replica's hash at seq.
func (h *HashCheck) Remote(seq, hash uint64) bool {
	return h.put(&h.remote, &h.local, seq, hash)
}

func (h *HashCheck) put(mine, other *[HashRing]seqHash, seq, hash uint64) bool {
	i := seq % HashRing
	if o := other[i]; o.seq == seq && seq != 0 {
		other[i] = seqHash{}
		if o.hash != hash {
			h.stats.Mismatched++
			h.stats.LastMismatchSeq = seq
			return false
		}
		h.stats.Matched++
		return true
	}
	if mine[i].seq != 0 && mine[i].seq != seq {
		h.stats.Expired++
	}
	mine[i] = seqHash{seq, hash}
	return true
}

// Stats returns the counters.
func (h *HashCheck) Stats() HashStats { return h.stats }

// Reset forgets every hash waiting on either side, keeping the counters.
// Call it whenever this replica's history changes under it (a discarded
// suffix, a new primary's epoch, a snapshot installed): a hash kept from
// the old history compared with the new one at the same seq would be a
// false divergence alarm.
func (h *HashCheck) Reset() {
	h.local, h.remote = [HashRing]seqHash{}, [HashRing]seqHash{}
}
