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
//     old epochs are retired (KeyringEpochs are held);
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
	ring          *Keyring
	history       historyKeys // keys for RETRANSMITs of old epochs' records
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
	// derived (an epoch not above every epoch accepted, the derivation
	// rate limit, or a full keyring refusing an old epoch).
	UnknownKey
	// BadMAC: the tag does not verify.
	BadMAC
)

// OK reports whether the frame verified.
func (v Verdict) OK() bool { return v == Verified || v == VerifiedNewEpoch }

// clientClass reports whether frames of type t are signed with the
// client key.
func clientClass(t wire.Type) bool {
	return t == wire.TypeCommand || t == wire.TypeOutput || t == wire.TypeReplayRequest || t == wire.TypeReplayEnd || wire.IsMDRecovery(t)
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
		if !a.ring.Has(h.Epoch) {
			_ = a.ring.Install(h.Epoch) // our own epoch: derived once per epoch
		}
		s, err := a.ring.Sign(b, b, h.Epoch)
		if err != nil {
			// An epoch older than every one a full ring holds: history
			// resent under the epoch it was sequenced in.
			s = a.historyMAC(h.Epoch).Sign(b, b)
		}
		b = s
	}
	return b
}

// historyMAC returns the history key of epoch, derived (allocating) when
// not held: Seal's, for our own RETRANSMITs of old epochs' records, at
// most a few derivations per NAK answered (its epochs ascend).
func (a *Frames) historyMAC(epoch uint64) *MAC {
	m := a.history.find(epoch)
	if m == nil {
		m = a.ring.newMAC(epoch)
		a.history.install(epoch, m)
	}
	return m
}

// Verify checks a received frame's MAC. highestEpoch is the highest epoch
// the node accepted: a key is derived for an unheld epoch only at or
// above it (deriveCurrent) or for a RETRANSMIT below it (verifyHistory),
// and at most once per InstallEveryNs of nowNs (monotonic nanoseconds).
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
		err = a.ring.Verify(f.Signed, f.Tag, f.Epoch)
		if !errors.Is(err, ErrUnknownKey) {
			break
		}
		switch {
		case f.Epoch >= highestEpoch:
			installed, err = a.deriveCurrent(f, highestEpoch, nowNs)
		case f.Type == wire.TypeRetransmit:
			err = a.verifyHistory(f, nowNs)
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

// deriveCurrent derives, at the rate limit, the key of f's epoch, at or
// above the highest accepted, and installs it in the ring for a good
// tag: a new primary's first frames (installed reports it, and the
// keys of epochs more than one below it are retired), or the highest
// accepted itself: keys live in memory, so a node restarted while the
// same epoch leads, its journal holding that epoch, must derive it again
// or drop every frame of its own term.
func (a *Frames) deriveCurrent(f *wire.Frame, highestEpoch uint64, nowNs int64) (installed bool, err error) {
	if nowNs-a.lastInstallNs < InstallEveryNs {
		return false, ErrUnknownKey
	}
	a.lastInstallNs = nowNs
	if err := a.ring.VerifyInstall(f.Signed, f.Tag, f.Epoch); err != nil {
		return false, err
	}
	if f.Epoch > highestEpoch {
		a.retireBelow(f.Epoch)
		return true, nil
	}
	return false, nil
}

// verifyHistory verifies a RETRANSMIT of an epoch below the highest
// accepted under the history keys: the primary resends history under the
// epoch each record was sequenced in, and a node that refetches it (an
// empty or set-aside journal, a history discarded at a fork) never held
// those keys, or retired them. An unheld key is derived at the rate
// limit shared with deriveCurrent and kept only for a good tag, so
// forged RETRANSMITs of made-up epochs cost a lookup each; the ring is
// never touched, so history never evicts a live epoch's key.
func (a *Frames) verifyHistory(f *wire.Frame, nowNs int64) error {
	if m := a.history.find(f.Epoch); m != nil {
		return m.Verify(f.Signed, f.Tag)
	}
	if nowNs-a.lastInstallNs < InstallEveryNs {
		return ErrUnknownKey
	}
	a.lastInstallNs = nowNs
	m := a.ring.newMAC(f.Epoch)
	if err := m.Verify(f.Signed, f.Tag); err != nil {
		return err
	}
	a.history.install(f.Epoch, m)
	return nil
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
