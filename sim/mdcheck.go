package sim

import (
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/wire"
)

// Invariant 8 (issue 20, item 3): market data has no hole. Every MD seq
// of the released history was sent to the market-data group by some node
// (counted as it is sent, before the network's loss): what a primary
// applied but never released before it crashed or was deposed is
// published by the next one. A consumer that loses a datagram recovers it
// by re-request (client.MarketData; not simulated here); a seq no node
// ever sent it can recover only from a book snapshot.

// onPublishedMD records the MD seqs of a frame sent to the group.
func (c *checker) onPublishedMD(pkt []byte) {
	f, _, err := wire.Parse(pkt)
	if err != nil || f.Type != wire.TypeOutput {
		return
	}
	it := f.Messages()
	for {
		_, msg, ok := it.Next()
		if !ok {
			return
		}
		if o, err := engine.ParseOutput(msg); err == nil && o.Kind == engine.KindMarketData {
			c.publishedMD[o.MDSeq] = true
		}
	}
}

// DiagMDPastRing marks a hole a node reported itself: it had to publish
// updates its ring no longer held (md.RepublishMissed), the bound the
// README states. Seen: a primary applies commands, snapshots past them,
// crashes before releasing them, restarts (its ring refilled only from
// the older kept snapshot on) and is promoted again. A consumer
// recovers those updates only from a book snapshot. (Until the snapshot
// writer synced the journal first, bug H, a crash could also keep a
// snapshot past the journal's end and leave the ring nothing below it.)
const DiagMDPastRing = "DIAG-md-past-ring"

// checkPublishedMD runs at the end of a live run, when the released
// history is the whole history.
func (c *checker) checkPublishedMD() {
	for _, sn := range c.s.nodes[1:] {
		if sn.n != nil {
			c.mdPastRing += sn.n.Status().MD.RepublishMissed
		}
	}
	var missing, first uint64
	for seq := uint64(1); ; seq++ {
		if _, ok := c.mdBySeq[seq]; !ok {
			break
		}
		if !c.publishedMD[seq] {
			if missing == 0 {
				first = seq
			}
			missing++
		}
	}
	if missing > 0 && c.mdPastRing > 0 {
		c.violate(8, "%d market-data updates of the released history were never published (first md seq %d); %s: nodes reported %d updates past their ring", missing, first, DiagMDPastRing, c.mdPastRing)
	} else if missing > 0 {
		c.violate(8, "%d market-data updates of the released history were never published (first md seq %d)", missing, first)
	}
}
