package auth

import (
	"errors"

	"github.com/seqbus/seqbus/wire"
)

// InstallEveryNs bounds the key derivations Frames.Verify makes for epochs
// not yet held (a new primary's first frames): at most one per
// millisecond, so a flood of forged frames with made-up epochs costs a
// table lookup each.
const InstallEveryNs = 1_000_000

// Frames seals and verifies the frames of one node of one stream. Which
// key signs what:
//
//   - replication (DATA, HEARTBEAT, RETRANSMIT, HASH, NEW_EPOCH, snapshots,
//     ACK, NAK): the stream's key for the frame's epoch (DataKey), so a
//     frame captured in one epoch verifies under nothing after the keys of
//     old epochs are retired (KeyringEpochs are held). A RETRANSMIT
//     carries the epoch its records were sequenced in, which may be far
//     older, so it is signed under the sender's current epoch instead
//     (keyEpoch): a node refetching history needs no old key, and a
//     captured RETRANSMIT of an old epoch verifies under nothing current
//     either;
//   - lease requests and replies: the key this node shares with the
//     witness alone (LeaseKey);
//   - COMMAND, OUTPUT, REPLAY_REQUEST, REPLAY_END and market-data recovery:
//     the stream's client key (ClientKey).
//
// Replayed DATA is refused by Fresh, an EpochFilter keyed by (epoch, seq)
// that advances only for frames whose MAC verified.
//
// Frames is pure (time is passed in) and not safe for concurrent use:
// it holds hash state. Seal and Verify do not allocate, except Verify's
// bounded derivation of a new epoch's key and Seal's once per epoch.
type Frames struct {
	ring *Keyring
	// sealEpoch is the highest epoch this node sealed a frame other than
	// a RETRANSMIT under: its current epoch, which signs its
	// RETRANSMITs (keyEpoch).
	sealEpoch     uint64
	lease         *MAC
	client        *MAC
	replay        EpochFilter
	lastInstallNs int64
}

// NewFrames returns the frame keys of node id on stream. It derives keys
// and allocates: call it once, at start-up.
func NewFrames(master *MasterKey, stream uint16, id uint32) *Frames {
	return &Frames{
		ring:          NewKeyring(master, stream),
		lease:         NewMAC(LeaseKey(master, stream, id)),
		client:        NewMAC(ClientKey(master, stream)),
		lastInstallNs: -InstallEveryNs,
	}
}

// Verdict is what Verify found.
type Verdict uint8

const (
	// Verified: the MAC is good under a key already held.
	Verified Verdict = iota
	// VerifiedNewEpoch: the MAC is good under the key of an epoch above
	// every epoch accepted, derived and installed for it; the keys of
	// epochs more than one below it were retired (the previous epoch's
	// stays, so acks and retransmits in flight at a failover still
	// verify, and the fence judges them).
	VerifiedNewEpoch
	// NoMAC: the frame carries no tag.
	NoMAC
	// UnknownKey: no key is held for the frame's epoch and none was
	// derived (an epoch below the highest accepted, the derivation rate
	// limit, or a full keyring refusing an old epoch); or a RETRANSMIT
	// whose tag fails under its key epoch: it names no signing epoch,
	// and a deposed primary's or a newer primary's (signed under their
	// own epochs) fail so.
	UnknownKey
	// BadMAC: the tag does not verify.
	BadMAC
)

// OK reports whether the frame verified.
func (v Verdict) OK() bool { return v == Verified || v == VerifiedNewEpoch }

// clientClass reports whether frames of type t are signed with the
// client key.
func clientClass(t wire.Type) bool {
	return t == wire.TypeCommand || t == wire.TypeOutput || t == wire.TypeReplayRequest || t == wire.TypeReplayEnd || t == wire.TypeNotLeading || wire.IsMDRecovery(t)
}

// Seal appends to dst the frame with FlagMAC set and its tag under the key
// of its class, and returns the extended slice. A frame whose header does
// not parse (never, for a frame the caller built) is appended unsealed.
// The key of the frame's own epoch is derived on its first frame (once
// per epoch); otherwise Seal does not allocate when dst has room for the
// frame and TagLen bytes.
func (a *Frames) Seal(dst, frame []byte) []byte {
	h, err := wire.ParseHeader(frame)
	if err != nil {
		return append(dst, frame...)
	}
	b := wire.Seal(dst, frame)
	switch {
	case wire.IsLease(h.Type):
		b = a.lease.Sign(b, b)
	case clientClass(h.Type):
		b = a.client.Sign(b, b)
	default:
		if h.Type != wire.TypeRetransmit {
			a.sealEpoch = max(a.sealEpoch, h.Epoch)
		}
		e := keyEpoch(h.Type, h.Epoch, a.sealEpoch)
		if !a.ring.Has(e) {
			_ = a.ring.Install(e) // our own epoch: derived once per epoch
		}
		b, _ = a.ring.Sign(b, b, e)
	}
	return b
}

// keyEpoch is the epoch whose data key signs a replication frame of type
// t stamped with epoch, given current, the signer's current epoch (when
// sealing) or the highest epoch the verifier accepted: the frame's own
// epoch, except for a RETRANSMIT of an older epoch's records, which is
// signed under current. The primary resends history under the epoch each
// record was sequenced in, possibly many failovers back: a node
// refetching it (an empty or set-aside journal, or history discarded at a
// fork) never held those keys, and a captured RETRANSMIT of an old epoch
// must not verify again once that epoch is over.
func keyEpoch(t wire.Type, epoch, current uint64) uint64 {
	if t == wire.TypeRetransmit {
		return max(epoch, current)
	}
	return epoch
}

// Verify checks a received frame's MAC. highestEpoch is the highest epoch
// the node accepted: a RETRANSMIT of an older epoch verifies under its
// key (keyEpoch), and a key is derived for an unheld epoch only at or
// above it (deriveCurrent), at most once per InstallEveryNs of nowNs
// (monotonic nanoseconds).
func (a *Frames) Verify(f *wire.Frame, highestEpoch uint64, nowNs int64) Verdict {
	if f.Tag == nil {
		return NoMAC
	}
	var err error
	installed := false
	switch {
	case wire.IsLease(f.Type):
		err = a.lease.Verify(f.Signed, f.Tag)
	case clientClass(f.Type):
		err = a.client.Verify(f.Signed, f.Tag)
	default:
		e := keyEpoch(f.Type, f.Epoch, highestEpoch)
		err = a.ring.Verify(f.Signed, f.Tag, e)
		if errors.Is(err, ErrUnknownKey) && e >= highestEpoch {
			installed, err = a.deriveCurrent(f, e, highestEpoch, nowNs)
		}
		if errors.Is(err, ErrBadMAC) && f.Type == wire.TypeRetransmit {
			// A RETRANSMIT names no signing epoch (its records' epoch
			// may be older): one that fails under ours was signed under
			// an epoch we do not follow (a deposed primary's, or a newer
			// one whose NEW_EPOCH has not reached us yet) as often as it
			// is forged.
			err = ErrUnknownKey
		}
	}
	switch {
	case err == nil && installed:
		return VerifiedNewEpoch
	case err == nil:
		return Verified
	case errors.Is(err, ErrUnknownKey):
		return UnknownKey
	default:
		return BadMAC
	}
}

// deriveCurrent derives, at the rate limit, the key of epoch (f's key
// epoch), at or above the highest accepted, and installs it in the ring
// for a good tag: a new primary's first frames (installed reports it,
// and the keys of epochs more than one below it are retired), or the
// highest accepted itself: keys live in memory, so a node restarted
// while the same epoch leads, its journal holding that epoch, must
// derive it again or drop every frame of its own term.
func (a *Frames) deriveCurrent(f *wire.Frame, epoch, highestEpoch uint64, nowNs int64) (installed bool, err error) {
	if nowNs-a.lastInstallNs < InstallEveryNs {
		return false, ErrUnknownKey
	}
	a.lastInstallNs = nowNs
	if err := a.ring.VerifyInstall(f.Signed, f.Tag, epoch); err != nil {
		return false, err
	}
	if epoch > highestEpoch {
		a.retireBelow(epoch)
		return true, nil
	}
	return false, nil
}

// Fresh advances the DATA replay window and reports whether the frame is
// new; frames of other types are always fresh. Call it only after the MAC
// verified and the sender was found to be a configured node, so nothing
// from outside the cluster can move the window.
func (a *Frames) Fresh(f *wire.Frame) bool {
	if f.Type != wire.TypeData {
		return true
	}
	return a.replay.Accept(f.Epoch, f.Seq) == nil
}

// retireBelow forgets the keys of epochs more than one below epoch.
func (a *Frames) retireBelow(epoch uint64) {
	if epoch > 1 {
		a.ring.RetireBelow(epoch - 1)
	}
}

// Epochs appends the epochs whose data keys are held to dst, for logs and
// tests.
func (a *Frames) Epochs(dst []uint64) []uint64 { return a.ring.Epochs(dst) }
