package etcdarb

import (
	"errors"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
)

// bareClient is a Client with no etcd connection and no worker: enough to
// test Tick's mailbox, which is all the node's 1 ms loop touches.
func bareClient(tb testing.TB) (*Client, *arbiter.Keeper) {
	tb.Helper()
	k, err := arbiter.NewKeeper(1, arbiter.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return &Client{cfg: Config{Node: 1, LeaseDurationNs: second}, keeper: k, wake: make(chan struct{}, 1)}, k
}

// takeJob is the worker's side of the mailbox.
func takeJob(c *Client) (job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.queued, c.hasQueued
	c.hasQueued = false
	return j, ok
}

func putResult(c *Client, r arbiter.Reply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nResults == maxResults {
		copy(c.results[:], c.results[1:])
		c.nResults--
	}
	c.results[c.nResults] = r
	c.nResults++
}

func TestTickQueuesAndDelivers(t *testing.T) {
	c, k := bareClient(t)
	k.SetWantLead(true)
	c.Tick(0, nil)
	j, ok := takeJob(c)
	if !ok || j.req.Kind != arbiter.RequestAcquire || j.req.SentAtNs != 0 {
		t.Fatalf("first tick queued %+v %v", j, ok)
	}
	// A newer request replaces a queued one (the worker was busy).
	c.Tick(arbiter.DefaultRetryNs, nil)
	c.Tick(2*arbiter.DefaultRetryNs, nil)
	j, ok = takeJob(c)
	if !ok || j.req.SentAtNs != 2*arbiter.DefaultRetryNs || c.stats.replaced.Load() != 1 {
		t.Fatalf("queued %+v, replaced %d", j, c.stats.replaced.Load())
	}
	// The grant is delivered to the keeper and to the callback, in order.
	putResult(c, grantReply(j.req.ID, 5, second, 1, set(), 0))
	var seen []arbiter.Reply
	c.Tick(2*arbiter.DefaultRetryNs+1, func(r arbiter.Reply) { seen = append(seen, r) })
	if len(seen) != 1 || !k.MayLead(2*arbiter.DefaultRetryNs+2) || k.Epoch() != 5 {
		t.Fatalf("delivered %v, view %+v", seen, k.View())
	}
	// A proposal rides on the next renew only, and survives a replacement.
	if err := c.ProposeInSync(1, []arbiter.NodeID{2}); err != nil {
		t.Fatal(err)
	}
	if err := c.ProposeInSync(0, nil); !errors.Is(err, arbiter.ErrProposal) {
		t.Fatal("base version 0 accepted")
	}
	if err := c.ProposeInSync(1, make([]arbiter.NodeID, arbiter.MaxInSyncMembers+1)); !errors.Is(err, arbiter.ErrProposal) {
		t.Fatal("9 members accepted")
	}
	k.Hurry(0)
	c.Tick(2*arbiter.DefaultRetryNs+3, nil)
	k.Hurry(0)
	c.Tick(2*arbiter.DefaultRetryNs+4, nil)
	j, _ = takeJob(c)
	if j.req.Kind != arbiter.RequestRenew || j.proposal.BaseVersion != 1 || j.proposal.N != 1 || j.proposal.Members[0] != 2 {
		t.Fatalf("renew job %+v", j)
	}
	// A proposal of epoch 5 queued on its renew does not ride on a renew
	// of epoch 6 that replaces it (a new term granted meanwhile): no
	// arbiter may accept it under another epoch (replica.InSync.StartTerm
	// forgot its additions).
	if err := c.ProposeInSync(1, []arbiter.NodeID{2}); err != nil {
		t.Fatal(err)
	}
	k.Hurry(0)
	c.Tick(2*arbiter.DefaultRetryNs+5, nil)
	c.mu.Lock()
	queued := c.queued
	c.mu.Unlock()
	if queued.req.Epoch != 5 || queued.proposal.BaseVersion != 1 {
		t.Fatalf("renew of epoch 5 queued %+v", queued)
	}
	putResult(c, grantReply(queued.req.ID, 6, second, 1, set(), 0))
	c.Tick(2*arbiter.DefaultRetryNs+6, nil) // delivers the grant of epoch 6
	k.Hurry(0)
	c.Tick(2*arbiter.DefaultRetryNs+7, nil)
	j, _ = takeJob(c)
	if k.Epoch() != 6 || j.req.Kind != arbiter.RequestRenew || j.req.Epoch != 6 || j.proposal.BaseVersion != 0 {
		t.Fatalf("keeper epoch %d, renew job %+v: want a renew of epoch 6 without the epoch-5 proposal", k.Epoch(), j)
	}
	// After Close nothing is queued.
	c.closed = true
	k.Hurry(0)
	c.Tick(2*arbiter.DefaultRetryNs+8, nil)
	if _, ok := takeJob(c); ok {
		t.Fatal("queued after close")
	}
}

func TestTickAllocs(t *testing.T) {
	c, k := bareClient(t)
	k.SetWantLead(true)
	nowNs := int64(0)
	var delivered int
	deliver := func(arbiter.Reply) { delivered++ }
	if n := testing.AllocsPerRun(1000, func() { nowNs++; c.Tick(nowNs, deliver) }); n != 0 {
		t.Errorf("idle Tick allocates %v", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		nowNs += arbiter.DefaultRetryNs
		c.Tick(nowNs, deliver)
		j, _ := takeJob(c)
		putResult(c, denyReply(j.req.ID, &state{termRev: 3}))
		c.Tick(nowNs, deliver)
	}); n != 0 {
		t.Errorf("Tick that queues and delivers allocates %v", n)
	}
	if delivered == 0 {
		t.Fatal("nothing delivered")
	}
}

func BenchmarkTickIdle(b *testing.B) {
	c, _ := bareClient(b)
	b.ReportAllocs()
	for i := range b.N {
		c.Tick(int64(i), nil)
	}
}

func BenchmarkTickQueueDeliver(b *testing.B) {
	c, k := bareClient(b)
	k.SetWantLead(true)
	b.ReportAllocs()
	nowNs := int64(0)
	for range b.N {
		nowNs += arbiter.DefaultRetryNs
		c.Tick(nowNs, nil)
		j, _ := takeJob(c)
		putResult(c, denyReply(j.req.ID, &state{termRev: 3}))
		c.Tick(nowNs, nil)
	}
}
