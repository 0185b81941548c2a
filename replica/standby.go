package replica

// Standby is the following role's protocol state that is not the window
// itself: which node leads the epoch followed, the fence a frame of the
// replication stream must pass, and when to acknowledge (durable before
// ack). Inputs are method calls with nowNs; it returns decisions and
// never calls back. The zero value follows nobody; Reset at every
// (re)start of following.
type Standby struct {
	cfg            StandbyConfig
	primary        uint32 // the node leading the followed epoch (0: none known)
	lastPrimaryNs  int64  // when a frame of it last passed the fence
	ackSent        uint64 // the last ack sent
	lastAckNs      int64
	lastEpochAskNs int64
}

// StandbyConfig configures a Standby's acks.
type StandbyConfig struct {
	// AckIntervalNs: a periodic ack goes at least this often (liveness for
	// the primary's in-sync set).
	AckIntervalNs int64
	// AckDelayNs batches acks: a moved ack waits until this long after the
	// previous one (0: at once).
	AckDelayNs int64
	// NoFencing (UNSAFE, mutation tests): frames of older epochs pass.
	NoFencing bool
}

// NewStandby returns a Standby with cfg.
func NewStandby(cfg StandbyConfig) Standby { return Standby{cfg: cfg} }

// Reset starts following anew: the next ack goes whatever it says.
func (s *Standby) Reset() { s.ackSent = 0 }

// Primary is the node leading the followed epoch (0: none known yet).
func (s *Standby) Primary() uint32 { return s.primary }

// LastPrimaryNs is when a frame of the primary last passed the fence.
func (s *Standby) LastPrimaryNs() int64 { return s.lastPrimaryNs }

// AckSent is the last ack sent.
func (s *Standby) AckSent() uint64 { return s.ackSent }

// Verdict is what the fence says of a replication frame.
type Verdict uint8

const (
	// Pass: the frame is of the followed epoch.
	Pass Verdict = iota
	// Stale: an older epoch (or one the journal's fence refuses): drop.
	Stale
	// AwaitNewEpoch: a newer epoch, accepted only through its NEW_EPOCH
	// (which says where its history forks from ours): drop, and ask its
	// primary to repeat NEW_EPOCH (AskNewEpoch).
	AwaitNewEpoch
)

var verdictNames = [...]string{"pass", "stale", "await-new-epoch"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "verdict?"
}

// Fence judges a frame stamped frameEpoch against the followed epoch;
// refused is the journal fence's verdict on frameEpoch.
func (s *Standby) Fence(frameEpoch, epoch uint64, refused bool) Verdict {
	if (frameEpoch < epoch || refused) && !s.cfg.NoFencing {
		return Stale
	}
	if frameEpoch > epoch {
		return AwaitNewEpoch
	}
	return Pass
}

// SawPrimary records that a frame of node id passed the fence at nowNs,
// and reports whether id is a primary other than the one known (the
// runtime then finds its address and restarts a snapshot fetch in
// flight from it).
func (s *Standby) SawPrimary(id uint32, nowNs int64) (changed bool) {
	changed = id != s.primary
	s.primary, s.lastPrimaryNs = id, nowNs
	return changed
}

// AskNewEpoch reports whether to ask the primary of a newer epoch to
// repeat its NEW_EPOCH now: at most once a millisecond.
func (s *Standby) AskNewEpoch(nowNs int64) bool {
	if nowNs-s.lastEpochAskNs < 1_000_000 {
		return false
	}
	s.lastEpochAskNs = nowNs
	return true
}

// Ack is the seq a standby may acknowledge: what the window applied in
// order and the journal holds durably (durable before ack).
func Ack(windowAck, durable uint64) uint64 { return min(windowAck, durable) }

// AckDue reports whether to send ack now: it moved (and the batching
// delay has passed), or periodic is set and the interval passed. The
// runtime sends it, then calls Acked.
func (s *Standby) AckDue(ack uint64, nowNs int64, periodic bool) bool {
	if ack == s.ackSent && !(periodic && nowNs-s.lastAckNs >= s.cfg.AckIntervalNs) {
		return false
	}
	if ack != s.ackSent && s.cfg.AckDelayNs > 0 && nowNs-s.lastAckNs < s.cfg.AckDelayNs {
		return false // batched: the ticker sends it once the delay has passed
	}
	return true
}

// Acked records that ack was sent at nowNs.
func (s *Standby) Acked(ack uint64, nowNs int64) { s.ackSent, s.lastAckNs = ack, nowNs }

// NewEpochStep is what a NEW_EPOCH means to a node at epoch.
type NewEpochStep uint8

const (
	// NewEpochStale: older than the epoch we lead or follow: drop it.
	NewEpochStale NewEpochStep = iota
	// NewEpochRepeat: the epoch we follow, repeated: its sender leads it.
	NewEpochRepeat
	// NewEpochFollow: a newer epoch: a primary steps down first (unless
	// UNSAFE NoFencing, which keeps leading and ignores it); then
	// reconcile the history (History.Reconcile), follow (History.Follow)
	// and note its sender as the primary.
	NewEpochFollow
	// NewEpochIgnore: UNSAFE NoFencing on a primary: a deposed primary
	// that never steps down.
	NewEpochIgnore
)

var newEpochStepNames = [...]string{"stale", "repeat", "follow", "ignore"}

func (n NewEpochStep) String() string {
	if int(n) < len(newEpochStepNames) {
		return newEpochStepNames[n]
	}
	return "new-epoch-step?"
}

// OnNewEpoch decides what a NEW_EPOCH of neEpoch means to a node at
// epoch (leading it when primary).
func (s *Standby) OnNewEpoch(neEpoch, epoch uint64, primary bool) NewEpochStep {
	return newEpochStep(neEpoch, epoch, primary, s.cfg.NoFencing)
}

// newEpochStep is OnNewEpoch's rule, shared with Roles.NewEpoch.
func newEpochStep(neEpoch, epoch uint64, primary, noFencing bool) NewEpochStep {
	switch {
	case neEpoch < epoch:
		return NewEpochStale
	case neEpoch == epoch:
		return NewEpochRepeat
	case primary && noFencing:
		return NewEpochIgnore
	}
	return NewEpochFollow
}
