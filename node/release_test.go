package node

import (
	"errors"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
)

// released returns the release requests the arbiter got.
func (a *scriptedArbiter) releases() []arbiter.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arbiter.Request(nil), a.released...)
}

// A primary that closes gives its lease up (one release of its epoch),
// so a standby need not wait the lease out; a standby that closes
// releases nothing.
func TestClosingPrimaryGivesItsLeaseUp(t *testing.T) {
	n, _, arb := leasedPrimary(t)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	rel := arb.releases()
	if len(rel) != 1 || rel[0].Kind != arbiter.RequestRelease || rel[0].Epoch != 2 || rel[0].Node != 1 {
		t.Fatalf("releases %+v, want one of epoch 2 by node 1", rel)
	}
	if n.stats.LeasesReleased != 1 || arb.k.MayLead(n.nowNs()) {
		t.Fatalf("LeasesReleased %d, may lead %v after the release", n.stats.LeasesReleased, arb.k.MayLead(n.nowNs()))
	}
}

// A primary whose journal fsync fails can never make anything durable
// again, so nothing it holds can be released: it stops, gives its lease
// up at once and asks for it no more (before, it kept renewing a lease
// under which nothing could ever be released: the market halted until an
// operator restarted it).
func TestPrimaryWhoseSyncFailedGivesItsLeaseUp(t *testing.T) {
	fs := journal.NewMemFS()
	n, clk, arb := leasedPrimaryWith(t, func(c *nodeconfig.Config) {
		c.FS = fs
		c.Journal.Policy = journal.SyncGroup
	})
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	fs.SetSyncError(errors.New("EIO"))
	clk.ns += 1_000_000 // past the group window: a sync is due
	if n.SyncStep() {
		t.Fatal("the sync succeeded on a failing disk")
	}
	rel := arb.releases()
	if len(rel) != 1 || rel[0].Epoch != 2 {
		t.Fatalf("releases %+v after the failed fsync, want one of epoch 2", rel)
	}
	n.mu.Lock()
	broken, syncErrs := n.st.Broken(), n.stats.SyncErrors
	n.mu.Unlock()
	if !broken || syncErrs != 1 {
		t.Fatalf("broken %v, SyncErrors %d: want the journal broken", broken, syncErrs)
	}
	for range 5 {
		clk.ns += arbiter.DefaultRenewIntervalNs
		n.Tick()
	}
	if arb.k.MayLead(n.nowNs()) {
		t.Fatal("the keeper leads again after the release")
	}
	if rel := arb.releases(); len(rel) != 1 {
		t.Fatalf("%d releases, want 1", len(rel))
	}
}
