package etcdarb

import (
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/internal/etcdtest"
)

// TestNewDuringAnElection: a node that starts while etcd elects a leader
// (its leader just killed: reads fail with "leader changed" or "no
// leader" for about an election timeout) connects, because New retries
// its check until DialTimeoutNs rather than failing on the first error.
// Before, New returned ErrUnreachable ("did not answer within 2s") at
// once: TestEtcdFailoverPrimaryKilled's node exited at start so under
// CI's load, when the fresh cluster changed leaders as the node started.
func TestNewDuringAnElection(t *testing.T) {
	cl := etcdtest.StartTimed(t, t.TempDir(), 25, 250)
	eps := cl.Endpoints()
	for round := range 5 {
		dead := cl.LeaderIndex()
		cl.Kill(dead)
		k, _ := arbiter.NewKeeper(1, testKeeperConfig(second))
		start := time.Now()
		c, err := New(Config{Endpoints: eps, Prefix: "/seqbus-test", Stream: 40, Node: 1, LeaseDurationNs: second}, k)
		if err != nil {
			t.Fatalf("round %d: New %v after the leader was killed: %v", round, time.Since(start), err)
		}
		t.Logf("round %d: New took %v", round, time.Since(start))
		c.Close()
		cl.StartMember(dead)
		cl.WaitHealthy(etcdtest.UpBound)
	}
}
