package demo

import (
	"net/netip"
	"time"

	"github.com/seqbus/seqbus/client"
)

// demoNodeAddrs are the nodes' unicast addresses, by id: where the
// market-data consumer asks for what its feed lost.
func demoNodeAddrs(d *demo) []netip.AddrPort {
	ids := d.IDs()
	out := make([]netip.AddrPort, 0, len(ids))
	for _, id := range ids {
		out = append(out, d.Nodes[id])
	}
	return out
}

// mdCatchUp waits, at most max, until the consumer has delivered the last
// market-data update the final primary released (its recovery fills the
// tail by re-request), so the summary counts every update.
func mdCatchUp(md *client.MarketData, released func() uint64, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if r := released(); r > 0 && md.Next() > r {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
