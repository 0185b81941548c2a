package etcdarb

import (
	"context"
	"github.com/seqbus/seqbus/internal/etcdtest"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

// BenchmarkEtcd measures one acquire (read, lease grant, transaction) and
// one renew (keep-alive, check transaction) against a real 3-member
// cluster on loopback, run by the worker's own code path.
func BenchmarkEtcd(b *testing.B) {
	cl := etcdtest.Start(b, b.TempDir())
	k, _ := arbiter.NewKeeper(1, arbiter.DefaultConfig())
	c, err := New(Config{Endpoints: cl.Endpoints(), Prefix: "/seqbus-bench", Node: 1, LeaseDurationNs: second}, k)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	stream := 0
	b.Run("Acquire", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			stream++
			c.keys = makeKeys("/seqbus-bench", uint16(stream))
			r, err := c.acquire(ctx, arbiter.Request{ID: 1, Kind: arbiter.RequestAcquire, Node: 1})
			if err != nil || !r.Granted() {
				b.Fatalf("acquire: %+v %v", r, err)
			}
		}
	})
	b.Run("Renew", func(b *testing.B) {
		stream++
		c.keys = makeKeys("/seqbus-bench", uint16(stream))
		r, err := c.acquire(ctx, arbiter.Request{ID: 1, Kind: arbiter.RequestAcquire, Node: 1})
		if err != nil || !r.Granted() {
			b.Fatalf("acquire: %+v %v", r, err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			r, err := c.renew(ctx, arbiter.Request{ID: uint64(i + 2), Kind: arbiter.RequestRenew, Node: 1, Epoch: r.Epoch}, &arbiter.InSyncProposal{})
			if err != nil || !r.Granted() {
				b.Fatalf("renew: %+v %v", r, err)
			}
		}
	})
}
