package witness

import (
	"errors"
	"fmt"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/auth"
	"github.com/seqbus/seqbus/wire"
)

// dropNone: verify's "accepted".
const dropNone = DropReasonsMax

// witnessAuth holds the witness's keys: one per configured node for the
// lease protocol, the stream's client key for queries, and a replay window
// per node over request IDs. Filters are in memory: after a witness
// restart each captured request can be replayed once, which can delay a
// failover by at most one lease (never grant a second leader: epochs and
// the quarantine still hold).
type witnessAuth struct {
	peers   *auth.PeerRing
	client  *auth.MAC
	filters map[arbiter.NodeID]*auth.Filter // one per configured node, built up front
	buf     []byte
}

func newWitnessAuth(cfg Config) (*witnessAuth, error) {
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("%w: a key needs the node ids it serves (Nodes)", ErrConfig)
	}
	stream := cfg.Stream
	if stream == 0 {
		stream = 1
	}
	peers, err := auth.NewPeerRing(cfg.Key, stream, cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	a := &witnessAuth{peers: peers, client: auth.NewMAC(auth.ClientKey(cfg.Key, stream)),
		filters: map[arbiter.NodeID]*auth.Filter{}, buf: make([]byte, 0, wire.HeaderLen+64+4*wire.MaxMembers+wire.TagLen)}
	for _, id := range cfg.Nodes {
		a.filters[arbiter.NodeID(id)] = &auth.Filter{}
	}
	return a, nil
}

// verify checks a request's MAC: requests under the sender's node key,
// queries under the client key.
func (a *witnessAuth) verify(f *wire.Frame) DropReason {
	if f.Tag == nil {
		return DropNoMAC
	}
	var err error
	if f.Type == wire.TypeLeaseQuery {
		err = a.client.Verify(f.Signed, f.Tag)
	} else {
		err = a.peers.Verify(f.Signed, f.Tag, f.Node)
	}
	switch {
	case err == nil:
		return dropNone
	case errors.Is(err, auth.ErrUnknownKey):
		return DropUnknownNode
	}
	return DropBadMAC
}

// fresh advances node's replay window with requestID (call only after the
// MAC verified) and reports whether it was new.
func (a *witnessAuth) fresh(node arbiter.NodeID, requestID uint64) bool {
	f := a.filters[node]
	return f != nil && f.ValidateCounter(requestID, auth.CounterLimit)
}

// seal signs a reply for the node that sent the request: an info under
// the client key, a grant or deny under that node's key.
func (a *witnessAuth) seal(reply []byte, dest uint32) []byte {
	h, err := wire.ParseHeader(reply)
	if err != nil {
		return reply
	}
	b := wire.Seal(a.buf[:0], reply)
	if h.Type == wire.TypeLeaseInfo {
		b = a.client.Sign(b, b)
	} else {
		b, _ = a.peers.Sign(b, b, dest)
	}
	a.buf = b
	return b
}
