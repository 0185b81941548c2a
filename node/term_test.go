package node

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/engine"
)

// scriptedArbiter grants every request at once, at epoch, with node 2 in
// the in-sync set: a witness whose next grant the test chooses.
type scriptedArbiter struct {
	k     *arbiter.Keeper
	epoch atomic.Uint64
	mu    sync.Mutex
}

func (a *scriptedArbiter) Tick(nowNs int64, deliver func(arbiter.Reply)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	req, ok := a.k.Tick(nowNs)
	if !ok {
		return
	}
	members, _ := arbiter.MakeInSyncSet([]arbiter.NodeID{2}, arbiter.NodeNone)
	r := arbiter.Reply{Kind: arbiter.ReplyGrant, RequestID: req.ID, Epoch: a.epoch.Load(),
		DurationNs: arbiter.DefaultLeaseDurationNs, InSyncVersion: a.epoch.Load(), Members: members}
	r.Deliver(a.k)
	deliver(r)
}

func (a *scriptedArbiter) ProposeInSync(uint64, []arbiter.NodeID) error { return nil }
func (a *scriptedArbiter) Close() error                                 { return nil }

// TestNewerEpochOfOurOwnIsNotAStepDown (issue 15 item 3): a primary at
// epoch 2 is granted epoch 3 itself (as when a retried acquire crossed
// its grant, or its lease lapsed and came back to it). It goes on leading
// at epoch 3: no step-down, and the outputs waiting in the gate for a
// standby's ack are kept and released once the standby acknowledges them.
func TestNewerEpochOfOurOwnIsNotAStepDown(t *testing.T) {
	c := newCluster(t, 2)
	defer c.closeAll()
	arb := &scriptedArbiter{}
	arb.epoch.Store(2)
	n := c.start(1, func(cfg *Config) {
		cfg.Role, cfg.Epoch = RoleStandby, 0
		cfg.NewArbiter = func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil }
	})
	deadline := time.Now().Add(5 * time.Second)
	for n.Role() != RolePrimary || n.Epoch() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("not primary at epoch 2: %+v", n.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	const orders = 10
	for range orders {
		if _, err := cl.Submit(&engine.Request{Op: engine.OpNewOrder, Side: engine.Buy, Type: engine.Limit, Price: 10, Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for n.Status().Applied < orders {
		if time.Now().After(deadline) {
			t.Fatal("primary did not apply")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The outputs wait for node 2, which is not running. The next grant
	// is epoch 3, to this same node.
	arb.epoch.Store(3)
	for n.Epoch() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("not at epoch 3: %+v", n.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := n.Status()
	if st.Role != RolePrimary.String() || st.Node.StepDowns != 0 || st.Node.OutputsDroppedAtGate != 0 || st.Node.NewTerms != 1 {
		t.Fatalf("after a newer epoch of its own: role %s, step-downs %d, outputs dropped %d, new terms %d; want primary, 0, 0, 1",
			st.Role, st.Node.StepDowns, st.Node.OutputsDroppedAtGate, st.Node.NewTerms)
	}
	if count, from, to, _ := n.LastStepDown(); count != 0 {
		t.Fatalf("stepped down from %d to %d", from, to)
	}
	// The standby arrives, follows epoch 3 and acks: the kept outputs go.
	c.start(2, nil)
	deadline = time.Now().Add(10 * time.Second)
	for cl.Stats().Answered < orders {
		if time.Now().After(deadline) {
			t.Fatalf("kept outputs not released after the standby caught up: %+v, client %+v", n.Status(), cl.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
