package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/etcdarb"
	"github.com/seqbus/seqbus/internal/etcdtest"
	"github.com/seqbus/seqbus/nodeconfig"
)

// TestEtcdArbiterFailover runs two nodes whose lease comes from a real
// 3-member etcd cluster instead of the UDP witness: the same keeper,
// fencing, gating and step-down code. The primary stops under load; the
// standby is granted a higher epoch after the etcd lease expires, the
// client resends there, and every answered command is in the new
// primary's history.
func TestEtcdArbiterFailover(t *testing.T) {
	etcdtest.Need(t)
	ec := etcdtest.Start(t, t.TempDir())
	lease := arbiter.DefaultConfig()
	c := newCluster(t, 2)
	defer c.closeAll()
	// A long in-sync timeout, as in TestFailoverOnPrimaryLoss: under
	// CI-like load the default 200 ms once left the standby outside the
	// in-sync set when the primary stopped, and then, rightly, nobody led.
	withEtcd := func(cfg *nodeconfig.Config) {
		cfg.Lease, cfg.InSyncTimeoutNs = lease, int64(2*time.Second)
		cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) {
			return etcdarb.New(etcdarb.Config{Endpoints: ec.Endpoints(), Stream: cfg.Stream, Node: arbiter.NodeID(cfg.ID), LeaseDurationNs: lease.LeaseDurationNs}, k)
		}
	}
	c.start(1, withEtcd)
	c.start(2, withEtcd)
	// Bounded waits, generous: a 3-member etcd cluster and two -race
	// nodes on a loaded 2-core machine take seconds to settle.
	first := c.waitPrimary(30*time.Second, 0)
	var mu sync.Mutex
	answered := map[uint64]engine.OutputKind{}
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 12}, Primary: c.addrs[first], Idle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	loadDone := make(chan struct{})
	// On a failure below, the load must end before the test does (the
	// next test's leak check would see its goroutine).
	defer func() { cl.Close(); <-loadDone }()
	go func() {
		defer close(loadDone)
		_, err := cl.Load(context.Background(), client.LoadConfig{Rate: 3_000, Count: 9_000, Seed: 4, Drain: 30 * time.Second},
			func(r client.Result) {
				mu.Lock()
				answered[r.ClientOrderID] = r.Kind
				mu.Unlock()
			})
		done <- err
	}()
	time.Sleep(time.Second)
	c.waitInSync(first, 10*time.Second)
	stoppedAt := time.Now()
	c.stop(first)
	second := c.waitPrimary(30*time.Second, first)
	t.Logf("etcd arbiter: node %d promoted %v after node %d stopped", second, time.Since(stoppedAt), first)
	cl.SetPrimary(c.addrs[second]) // no witness to follow: the test points the client
	if err := <-done; err != nil {
		t.Fatalf("load: %v", err)
	}
	st := c.nodes[second].Status()
	dir := c.dirs[second]
	c.closeAll()
	inJournal := journalCommands(t, dir)
	mu.Lock()
	defer mu.Unlock()
	for id := range answered {
		if inJournal[[2]uint64{12, id}] == 0 {
			t.Fatalf("order %d was answered but is not in the new primary's history", id)
		}
	}
	if st.Epoch <= 1 {
		t.Fatalf("new primary at epoch %d", st.Epoch)
	}
}
