package arbiter

// Fence remembers the highest epoch accepted and refuses anything older.
// The journal and the standby put one in front of every frame they accept:
// a deposed primary still sends under its old epoch, and after a newer
// epoch has been seen those frames must change nothing. Equal epochs are
// accepted (the current leader's stream); newer ones are accepted and
// become the highest.
//
// The zero value is ready to use and accepts every epoch (the highest is
// 0). To carry the fence across a restart, call Accept with the persisted
// highest epoch before anything else. A Fence is not safe for concurrent
// use; its owner serialises calls like every other core.
type Fence struct {
	highestEpoch uint64
}

// Accept returns nil and raises the highest epoch if epoch is at least the
// highest accepted so far, and otherwise returns a *Stale (matching
// ErrStaleEpoch) and changes nothing. The accept path does not allocate; the
// refusal allocates the small error, and a hot loop that only needs to drop
// and count stale frames can call Refuses instead.
func (f *Fence) Accept(epoch uint64) error {
	if epoch < f.highestEpoch {
		return &Stale{Epoch: epoch, Highest: f.highestEpoch}
	}
	f.highestEpoch = epoch
	return nil
}

// Refuses reports whether Accept would refuse epoch, without changing the
// fence and without allocating.
func (f *Fence) Refuses(epoch uint64) bool { return epoch < f.highestEpoch }

// Highest returns the highest epoch accepted so far (0 for a new fence).
func (f *Fence) Highest() uint64 { return f.highestEpoch }
