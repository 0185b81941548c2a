package node

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/transport"
)

// TestMemNetworkFaults runs a primary and two standbys over the in-memory
// network with seeded loss, duplication, reordering and delay: every
// command is answered, and every replica ends with the same state hash and
// the same journal length.
func TestMemNetworkFaults(t *testing.T) {
	defer goleak.VerifyNone(t)
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			faults := bus.Faults{DropPpm: 50_000, DuplicatePpm: 50_000, ReorderPpm: 100_000, DelayMax: 200 * time.Microsecond}
			mem := bus.NewMemNetwork(seed, faults)
			c := newCluster(t, 3)
			for id := uint32(1); id <= 3; id++ {
				host := netip.AddrFrom4([4]byte{10, 0, 0, byte(id)})
				c.addrs[id] = netip.AddrPortFrom(host, 7000)
			}
			c.group = netip.MustParseAddrPort("239.1.1.1:7100")
			defer c.closeAll()
			for id := uint32(1); id <= 3; id++ {
				host := c.addrs[id].Addr()
				c.start(id, func(cfg *nodeconfig.Config) { cfg.Network = transport.MemNetwork{Net: mem, Host: host} })
			}
			conn, err := mem.Listen(netip.MustParseAddrPort("10.0.0.9:5000"), nil)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := client.Dial(client.Options{Core: client.Config{Session: 3, ResendAfterNs: int64(100 * time.Millisecond)}, Primary: c.addrs[1], Conn: conn, Idle: testIdle})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 10_000, Count: 5_000, Seed: seed, Drain: 20 * time.Second}, nil)
			if err != nil {
				t.Fatalf("load: %v (%+v) primary %+v", err, rep, c.nodes[1].Status().Sequencer)
			}
			c.waitConverged(20 * time.Second)
			st := mem.Stats()
			if st.Dropped == 0 || st.Duplicated == 0 || st.Reordered == 0 {
				t.Fatalf("the network injected no faults: %+v", st)
			}
			var naks uint64
			for id := uint32(2); id <= 3; id++ {
				s := c.nodes[id].Status()
				naks += s.Node.NaksSent
				if s.Journal.LastSeq != c.nodes[1].Status().Applied {
					t.Fatalf("standby %d journal ends at %d", id, s.Journal.LastSeq)
				}
			}
			if naks == 0 {
				t.Fatal("5% loss and no NAK")
			}
		})
	}
}
