package node

import (
	"errors"

	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/wire"
)

// Frame authentication (Config.Key set): every frame this node sends is
// sealed with a MAC and every frame it receives must carry a good one, or
// it is dropped and counted before any core sees it. Which key signs what
// (package auth has the derivations):
//
//   - replication (DATA, HEARTBEAT, RETRANSMIT, HASH, NEW_EPOCH, snapshots,
//     ACK, NAK): the stream's key for the frame's epoch, so a frame
//     captured in one epoch verifies under nothing after the keys of old
//     epochs are retired (four epochs are held; see auth.Keyring);
//   - lease requests and replies: the key this node shares with the
//     witness alone;
//   - COMMAND, OUTPUT, REPLAY_REQUEST and REPLAY_END: the stream's client
//     key.
//
// Replayed DATA is dropped by a replay window keyed by (epoch, seq), which
// advances only after the MAC verified.

// installEveryNs bounds key derivations for epochs not yet held (a new
// primary's first frames): at most one per millisecond, so a flood of
// forged frames with made-up epochs costs a table lookup each.
const installEveryNs = 1_000_000

type nodeAuth struct {
	ring     *auth.Keyring
	lease    *auth.MAC
	client   *auth.MAC
	replay   auth.EpochFilter
	lastInst int64
}

func newNodeAuth(key *auth.MasterKey, stream uint16, id uint32) *nodeAuth {
	return &nodeAuth{
		ring:     auth.NewKeyring(key, stream),
		lease:    auth.NewMAC(auth.LeaseKey(key, stream, id)),
		client:   auth.NewMAC(auth.ClientKey(key, stream)),
		lastInst: -installEveryNs,
	}
}

// seal returns frame with FlagMAC and its tag (in n.sealBuf), or frame
// itself without a key.
func (n *Node) seal(frame []byte) []byte {
	a := n.auth
	if a == nil {
		return frame
	}
	h, err := wire.ParseHeader(frame)
	if err != nil {
		return frame // never: the node built it
	}
	b := wire.Seal(n.sealBuf[:0], frame)
	switch {
	case wire.IsLease(h.Type):
		b = a.lease.Sign(b, b)
	case h.Type == wire.TypeCommand || h.Type == wire.TypeOutput || h.Type == wire.TypeReplayRequest || h.Type == wire.TypeReplayEnd || wire.IsMDRecovery(h.Type):
		b = a.client.Sign(b, b)
	default:
		if !a.ring.Has(h.Epoch) {
			_ = a.ring.Install(h.Epoch) // our own epoch: derived once per epoch
		}
		b, _ = a.ring.Sign(b, b, h.Epoch)
	}
	n.sealBuf = b
	return b
}

// verify checks a received frame's MAC; false means drop (counted).
func (n *Node) verify(f *wire.Frame, now int64) bool {
	a := n.auth
	if f.Tag == nil {
		n.stats.DropNoMAC++
		return false
	}
	var err error
	switch {
	case wire.IsLease(f.Type):
		err = a.lease.Verify(f.Signed, f.Tag)
	case f.Type == wire.TypeCommand || f.Type == wire.TypeOutput || f.Type == wire.TypeReplayRequest || f.Type == wire.TypeReplayEnd || wire.IsMDRecovery(f.Type):
		err = a.client.Verify(f.Signed, f.Tag)
	default:
		err = a.ring.Verify(f.Signed, f.Tag, f.Epoch)
		if errors.Is(err, auth.ErrUnknownKey) && f.Epoch > n.tm.Fence().Highest() && now-a.lastInst >= installEveryNs {
			a.lastInst = now
			err = a.ring.VerifyInstall(f.Signed, f.Tag, f.Epoch)
			if err == nil {
				n.retireOldKeys(f.Epoch)
			}
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, auth.ErrUnknownKey):
		n.stats.DropUnknownKey++
		return false
	default:
		n.stats.DropBadMAC++
		return false
	}
	return true
}

// fresh advances the DATA replay window (after the MAC verified and the
// sender was found to be a configured node, so nothing from outside the
// cluster can move it) and reports whether the frame is new.
func (n *Node) fresh(f *wire.Frame) bool {
	if n.auth == nil || f.Type != wire.TypeData {
		return true
	}
	if err := n.auth.replay.Accept(f.Epoch, f.Seq); err != nil {
		n.stats.DropReplay++
		return false
	}
	return true
}

// retireOldKeys forgets the keys of epochs more than one below epoch: a
// frame of those epochs is dropped at the MAC. The previous epoch's key
// stays, so acks and retransmits in flight at a failover still verify
// (the fence then judges them).
func (n *Node) retireOldKeys(epoch uint64) {
	if n.auth != nil && epoch > 1 {
		n.auth.ring.RetireBelow(epoch - 1)
	}
}
