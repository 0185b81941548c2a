package auth

import "fmt"

// MaxPeers bounds a PeerRing: the nodes a witness holds lease keys for. It
// matches the witness's reply-cache bound (witness.NodeTableMax); a venue
// cluster has two or three nodes.
const MaxPeers = 64

// PeerRing holds the pre-keyed lease MACs (LeaseKey) of a fixed set of
// nodes of one stream: what a witness verifies requests and signs replies
// with. The set is fixed when the ring is made, from configuration, so a
// request from an unconfigured node ID costs one table scan and fails with
// ErrUnknownKey; it never derives a key or displaces a real one. It is not
// safe for concurrent use.
type PeerRing struct {
	stream uint16
	n      int
	peers  [MaxPeers]peerSlot
}

type peerSlot struct {
	node uint32
	mac  *MAC
}

// NewPeerRing derives the lease key of every node in nodes. It returns an
// error wrapping ErrUnknownKey for more than MaxPeers nodes or a duplicate.
func NewPeerRing(master *MasterKey, stream uint16, nodes []uint32) (*PeerRing, error) {
	if len(nodes) > MaxPeers {
		return nil, fmt.Errorf("%w: %d peers, at most %d", ErrUnknownKey, len(nodes), MaxPeers)
	}
	p := &PeerRing{stream: stream}
	for _, node := range nodes {
		if p.find(node) != nil {
			return nil, fmt.Errorf("%w: node %d listed twice", ErrUnknownKey, node)
		}
		p.peers[p.n] = peerSlot{node: node, mac: NewMAC(LeaseKey(master, stream, node))}
		p.n++
	}
	return p, nil
}

// Stream returns the stream whose lease keys the ring holds.
func (p *PeerRing) Stream() uint16 { return p.stream }

// Has reports whether node's key is held.
func (p *PeerRing) Has(node uint32) bool { return p.find(node) != nil }

// Sign appends msg's tag under node's lease key to dst, or returns dst and
// ErrUnknownKey for a node not in the ring. It does not allocate when dst
// has TagLen bytes of spare capacity.
func (p *PeerRing) Sign(dst, msg []byte, node uint32) ([]byte, error) {
	s := p.find(node)
	if s == nil {
		return dst, ErrUnknownKey
	}
	return s.mac.Sign(dst, msg), nil
}

// Verify checks tag against msg under node's lease key: nil, ErrUnknownKey
// for a node not in the ring, or ErrBadMAC. It does not allocate.
func (p *PeerRing) Verify(msg, tag []byte, node uint32) error {
	s := p.find(node)
	if s == nil {
		return ErrUnknownKey
	}
	return s.mac.Verify(msg, tag)
}

func (p *PeerRing) find(node uint32) *peerSlot {
	for i := range p.peers[:p.n] {
		if p.peers[i].node == node {
			return &p.peers[i]
		}
	}
	return nil
}
