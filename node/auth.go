package node

import (
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/wire"
)

// Frame authentication (Config.Key set): every frame this node sends is
// sealed with a MAC and every frame it receives must carry a good one, or
// it is dropped and counted before any core sees it. Which key signs what,
// the bounded derivation of a new epoch's key and the DATA replay window
// are auth.Frames'; the node counts its verdicts.

// seal returns frame with FlagMAC and its tag (in n.sealBuf), or frame
// itself without a key.
func (n *Node) seal(frame []byte) []byte {
	if n.auth == nil {
		return frame
	}
	n.sealBuf = n.auth.Seal(n.sealBuf[:0], frame)
	return n.sealBuf
}

// verify checks a received frame's MAC; false means drop (counted).
func (n *Node) verify(f *wire.Frame, now int64) bool {
	switch n.auth.Verify(f, n.tm.Fence().Highest(), now) {
	case auth.Verified, auth.VerifiedNewEpoch:
		return true
	case auth.NoMAC:
		n.stats.DropNoMAC++
	case auth.UnknownKey:
		n.stats.DropUnknownKey++
	default:
		n.stats.DropBadMAC++
	}
	return false
}

// fresh advances the DATA replay window (after the MAC verified and the
// sender was found to be a configured node, so nothing from outside the
// cluster can move it) and reports whether the frame is new.
func (n *Node) fresh(f *wire.Frame) bool {
	if n.auth == nil || n.auth.Fresh(f) {
		return true
	}
	n.stats.DropReplay++
	return false
}
