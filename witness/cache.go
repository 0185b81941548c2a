package witness

import (
	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/wire"
)

// cacheEntry is the last request a node sent and the arbiter's decision on
// it. A request with the same node, request ID, type and epoch is a resend
// (a duplicated datagram, or a client retrying the same ID after a lost
// reply) and is answered from here without asking the arbiter again.
type cacheEntry struct {
	node      arbiter.NodeID
	requestID uint64
	reqType   wire.Type
	reqEpoch  uint64
	decision  arbiter.Decision
	// decidedAtNs is the witness time of the decision; usedAtNs the last
	// time the entry was hit or written, for least-recently-used eviction.
	decidedAtNs int64
	usedAtNs    int64
}

// matches reports whether a request is a resend of the cached one.
func (e *cacheEntry) matches(requestID uint64, t wire.Type, epoch uint64) bool {
	return e.requestID == requestID && e.reqType == t && e.reqEpoch == epoch
}

// replyCache is a fixed table of NodeTableMax entries, one per node,
// searched linearly: 64 entries is a few hundred nanoseconds at worst, and
// a fixed array cannot grow under a flood of forged node IDs.
type replyCache struct {
	entries [NodeTableMax]cacheEntry
	n       int
}

// lookup returns the entry of node, or nil.
func (c *replyCache) lookup(node arbiter.NodeID) *cacheEntry {
	for i := range c.entries[:c.n] {
		if c.entries[i].node == node {
			return &c.entries[i]
		}
	}
	return nil
}

// put records e as node e.node's last request, replacing its previous one.
// When the table is full and e.node is new, the least recently used entry
// is overwritten and evicted is true.
func (c *replyCache) put(e cacheEntry) (evicted bool) {
	if old := c.lookup(e.node); old != nil {
		*old = e
		return false
	}
	if c.n < len(c.entries) {
		c.entries[c.n] = e
		c.n++
		return false
	}
	oldest := 0
	for i := range c.entries {
		if c.entries[i].usedAtNs < c.entries[oldest].usedAtNs {
			oldest = i
		}
	}
	c.entries[oldest] = e
	return true
}

// len is the number of nodes remembered.
func (c *replyCache) len() int { return c.n }
