package etcdarb

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/arbiter"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The integration tests run on the real monotonic clock: monoNs is the
// process's monotonic time, shared by every driven node so their lease
// intervals can be compared.
var monoStart = time.Now()

func monoNs() int64 { return int64(time.Since(monoStart)) }

// interval is a span [startNs, endNs) during which a node's keeper said
// MayLead, with the epoch it led under.
type interval struct {
	startNs, endNs int64
	epoch          uint64
}

// grantEvent is one grant the keeper used.
type grantEvent struct {
	atNs, sentAtNs int64
	epoch          uint64
	version        uint64
	members        []arbiter.NodeID
}

// driven is one node: a keeper and a Client ticked every millisecond by a
// goroutine, as the node runtime does, recording when it may lead.
type driven struct {
	tb  testing.TB
	id  arbiter.NodeID
	cfg arbiter.Config
	k   *arbiter.Keeper
	c   *Client

	mu        sync.Mutex
	paused    bool
	leading   bool
	cur       interval
	intervals []interval
	grants    []grantEvent
	denies    []arbiter.Reply

	stop chan struct{}
	done chan struct{}
}

func testKeeperConfig(leaseNs int64) arbiter.Config {
	cfg := arbiter.DefaultConfig()
	cfg.LeaseDurationNs = leaseNs
	cfg.RenewIntervalNs = leaseNs / 4
	return cfg
}

// startNode builds a keeper and a Client for id on endpoints and starts
// ticking it; want says whether it contends at once. Cleanup stops it.
func startNode(tb testing.TB, endpoints []string, stream uint16, id arbiter.NodeID, leaseNs int64, want bool) *driven {
	tb.Helper()
	return startNodeOf(tb, endpoints, stream, id, leaseNs, want, 0)
}

// startNodeOf is startNode for a node whose directory holds history id
// history (0: none), which its requests name (arbiter.Keeper.SetHistory).
func startNodeOf(tb testing.TB, endpoints []string, stream uint16, id arbiter.NodeID, leaseNs int64, want bool, history uint64) *driven {
	tb.Helper()
	cfg := testKeeperConfig(leaseNs)
	k, err := arbiter.NewKeeper(id, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	k.SetHistory(history)
	c, err := New(Config{Endpoints: endpoints, Prefix: "/seqbus-test", Stream: stream, Node: id, LeaseDurationNs: leaseNs}, k)
	if err != nil {
		tb.Fatal(err)
	}
	k.SetWantLead(want)
	d := &driven{tb: tb, id: id, cfg: cfg, k: k, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	tb.Cleanup(d.kill)
	return d
}

func (d *driven) loop() {
	defer close(d.done)
	for {
		select {
		case <-d.stop:
			return
		case <-time.After(time.Millisecond):
		}
		d.mu.Lock()
		if !d.paused {
			d.c.Tick(monoNs(), d.onReply)
			d.observe(monoNs())
		}
		d.mu.Unlock()
	}
}

// onReply runs inside Tick, after the keeper saw r.
func (d *driven) onReply(r arbiter.Reply) {
	if !r.Granted() {
		d.denies = append(d.denies, r)
		return
	}
	v := d.k.View()
	if v.Epoch != r.Epoch {
		return // the keeper did not use it
	}
	d.grants = append(d.grants, grantEvent{atNs: monoNs(), sentAtNs: v.SentAtNs, epoch: r.Epoch,
		version: r.InSyncVersion, members: slices.Clone(r.Members.Slice())})
}

// observe records MayLead transitions (called with d.mu held).
func (d *driven) observe(nowNs int64) {
	may := d.k.MayLead(nowNs)
	switch {
	case may && !d.leading:
		d.leading, d.cur = true, interval{startNs: nowNs, epoch: d.k.Epoch()}
	case may && d.k.Epoch() != d.cur.epoch:
		d.closeInterval(nowNs)
		d.leading, d.cur = true, interval{startNs: nowNs, epoch: d.k.Epoch()}
	case !may && d.leading:
		d.closeInterval(nowNs)
	}
}

func (d *driven) closeInterval(endNs int64) {
	d.cur.endNs = endNs
	d.intervals = append(d.intervals, d.cur)
	d.leading = false
}

// kill is a crash: the node stops ticking at once, its Client is closed
// (an operation in flight is abandoned) and revokes nothing. A lease it
// held stays "its" until its view ends, which closes the last interval.
func (d *driven) kill() {
	d.mu.Lock()
	already := d.paused
	d.paused = true
	if d.leading {
		v := d.k.View()
		d.closeInterval(v.SentAtNs + v.DurationNs - d.cfg.MarginNs)
	}
	d.mu.Unlock()
	if already {
		return
	}
	close(d.stop)
	<-d.done
	if err := d.c.Close(); err != nil {
		d.tb.Errorf("close node %d: %v", d.id, err)
	}
}

// release is a graceful stop: the node stops leading, gives its lease up
// (Keeper.Release, then Client.Release) and closes, which waits for the
// release to reach etcd.
func (d *driven) release() { d.giveBack(false) }

// decline is release for a grant the node will not lead under (its
// directory is new: the request marked Declined).
func (d *driven) decline() { d.giveBack(true) }

func (d *driven) giveBack(declined bool) {
	d.mu.Lock()
	d.paused = true
	now := monoNs()
	if d.leading {
		d.closeInterval(now)
	}
	if req, ok := d.k.Release(now); ok {
		req.Declined = declined
		d.c.Release(req)
	}
	d.mu.Unlock()
	close(d.stop)
	<-d.done
	if err := d.c.Close(); err != nil {
		d.tb.Errorf("close node %d: %v", d.id, err)
	}
}

func (d *driven) setWant(want bool) {
	d.mu.Lock()
	d.k.SetWantLead(want)
	d.mu.Unlock()
}

// propose attaches an in-sync proposal to the next renew and sends it at
// once, as node.maintainInSync does.
func (d *driven) propose(base uint64, members ...arbiter.NodeID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.c.ProposeInSync(base, members); err != nil {
		d.tb.Fatal(err)
	}
	d.k.Hurry(monoNs())
}

func (d *driven) mayLead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leading
}

func (d *driven) lastGrant() (grantEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.grants) == 0 {
		return grantEvent{}, false
	}
	return d.grants[len(d.grants)-1], true
}

func (d *driven) snapshot() (intervals []interval, grants []grantEvent, denies []arbiter.Reply) {
	d.mu.Lock()
	defer d.mu.Unlock()
	intervals = slices.Clone(d.intervals)
	if d.leading {
		intervals = append(intervals, interval{startNs: d.cur.startNs, endNs: monoNs(), epoch: d.cur.epoch})
	}
	return intervals, slices.Clone(d.grants), slices.Clone(d.denies)
}

// waitFor polls cond every 5 ms until it holds or bound passes.
func waitFor(tb testing.TB, bound time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLeader waits for one of nodes to lead and returns it.
func waitLeader(tb testing.TB, bound time.Duration, nodes ...*driven) *driven {
	tb.Helper()
	var leader *driven
	waitFor(tb, bound, "a leader", func() bool {
		for _, n := range nodes {
			if n.mayLead() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// checkSafety asserts that no two nodes' MayLead intervals overlap and
// that epochs grow from one holder's term to the next.
func checkSafety(tb testing.TB, nodes ...*driven) {
	tb.Helper()
	type owned struct {
		interval
		id arbiter.NodeID
	}
	var all []owned
	for _, n := range nodes {
		ivs, _, _ := n.snapshot()
		for _, iv := range ivs {
			all = append(all, owned{iv, n.id})
		}
	}
	slices.SortFunc(all, func(a, b owned) int { return int(a.startNs - b.startNs) })
	for i := 1; i < len(all); i++ {
		prev, cur := all[i-1], all[i]
		if prev.id != cur.id && cur.startNs < prev.endNs {
			tb.Errorf("nodes %d and %d both led: [%d, %d) epoch %d and [%d, %d) epoch %d",
				prev.id, cur.id, prev.startNs, prev.endNs, prev.epoch, cur.startNs, cur.endNs, cur.epoch)
		}
		if prev.id != cur.id && cur.epoch <= prev.epoch {
			tb.Errorf("node %d led epoch %d after node %d led epoch %d: epochs must grow per new holder",
				cur.id, cur.epoch, prev.id, prev.epoch)
		}
		if cur.epoch < prev.epoch {
			tb.Errorf("epoch went back from %d to %d", prev.epoch, cur.epoch)
		}
	}
}

// query reads the stream's state through a node's Client.
func query(tb testing.TB, d *driven) (arbiter.NodeID, uint64, InSync) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, e, s, err := d.c.Query(ctx)
	if err != nil {
		tb.Fatalf("query: %v", err)
	}
	return h, e, s
}
