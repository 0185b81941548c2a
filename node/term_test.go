package node

import (
	"sync"
	"sync/atomic"

	"github.com/seqbus/seqbus/arbiter"
)

// scriptedArbiter grants every request at once, at epoch, with node 2 in
// the in-sync set: a witness whose next grant the test chooses.
type scriptedArbiter struct {
	k        *arbiter.Keeper
	epoch    atomic.Uint64
	mu       sync.Mutex
	released []arbiter.Request
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
func (a *scriptedArbiter) Release(req arbiter.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.released = append(a.released, req)
}
