package node

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/transport"
	"github.com/seqbus/seqbus/wire"
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
	fs := joinedFS("/j")
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

// mcastCaptureNetwork captures what the node multicasts to the group.
type mcastCaptureNetwork struct {
	nopNetwork
	mc *captureEndpoint
}

func (c *mcastCaptureNetwork) MulticastSender(netip.AddrPort, string, int) (transport.Endpoint, error) {
	return c.mc, nil
}

// A primary that gives its lease up tells its standbys with a HEARTBEAT
// marked FlagLeaseReleased, after the release.
func TestGivingUpTheLeaseTellsTheStandbys(t *testing.T) {
	nw := &mcastCaptureNetwork{mc: &captureEndpoint{}}
	n, _, arb := leasedPrimaryWith(t, func(c *nodeconfig.Config) { c.Network = nw })
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(arb.releases()) != 1 {
		t.Fatalf("releases %+v", arb.releases())
	}
	var marked int
	for _, d := range nw.mc.sent {
		f, _, err := wire.Parse(d.pkt)
		if err == nil && f.Type == wire.TypeHeartbeat && f.Flags&wire.FlagLeaseReleased != 0 && f.Epoch == 2 {
			marked++
		}
	}
	if marked != 1 {
		t.Fatalf("%d heartbeats marked lease-released among %d multicast, want 1", marked, len(nw.mc.sent))
	}
}

// A primary that gives its lease up tells each of its clients' addresses,
// once, with a NOT_LEADING of the epoch it led, so they ask the arbiter
// who leads at once.
func TestGivingUpTheLeaseTellsTheClients(t *testing.T) {
	nw := &captureNetwork{uc: &captureEndpoint{}}
	n, _, _ := leasedPrimaryWith(t, func(c *nodeconfig.Config) { c.Network = nw })
	other := netip.MustParseAddrPort("10.0.0.10:7")
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	n.Deliver(commandFrame(8, 1, 100), other)
	n.Deliver(commandFrame(9, 1, 100), replayClient) // a second session at the same address
	nw.uc.sent = nil
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	told := map[netip.AddrPort]int{}
	for _, d := range nw.uc.sent {
		if f, _, err := wire.Parse(d.pkt); err == nil && f.Type == wire.TypeNotLeading && f.Epoch == 2 && f.Node == 1 {
			told[d.to]++
		}
	}
	if len(told) != 2 || told[replayClient] != 1 || told[other] != 1 {
		t.Fatalf("NOT_LEADING sent %v, want one to each of %v and %v", told, replayClient, other)
	}
	if got := n.Status().Node.NotLeadingSent; got != 2 {
		t.Fatalf("NotLeadingSent %d, want 2", got)
	}
}

// A standby that hears its primary's lease-released HEARTBEAT asks for
// the lease at its next tick instead of at its next retry; an unmarked
// heartbeat changes nothing.
func TestStandbyAsksAtOnceWhenItsPrimaryGaveTheLeaseUp(t *testing.T) {
	// Refused with 500 ms left on node 2's lease: the keeper retries only
	// after RetryNs.
	arb := &muteArbiter{answer: true, remainingNs: 500_000_000}
	clk := &stepClock{ns: 1}
	cfg := handStandbyConfig(clk, func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil })
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	primary := cfg.Peers[2]
	o := wire.Origin{Stream: 9, Node: 2, Epoch: 1}
	ne := wire.NewEpoch{Origin: o, History: testHistory}
	n.Deliver(ne.Append(nil), primary)
	n.Tick() // the first acquire, refused
	if arb.requests != 1 || n.Epoch() != 1 {
		t.Fatalf("after the first tick: %d requests, epoch %d; want 1, following epoch 1", arb.requests, n.Epoch())
	}
	heartbeat := func(released bool) {
		hb := wire.Heartbeat{Origin: o, LeaseReleased: released, History: testHistory}
		n.Deliver(hb.Append(nil), primary)
		clk.ns += 1_000_000
		n.Tick()
	}
	heartbeat(false)
	if arb.requests != 1 {
		t.Fatalf("an unmarked heartbeat made the standby ask again (%d requests)", arb.requests)
	}
	heartbeat(true)
	if arb.requests != 2 || n.Status().Node.LeaseReleasesHeard != 1 {
		t.Fatalf("after the marked heartbeat: %d requests, %d heard; want 2, 1", arb.requests, n.Status().Node.LeaseReleasesHeard)
	}
}

// A primary whose disk stops making its writes durable (a hung device:
// the fsync never returns, nothing fails) gives its lease up once the
// in-sync timeout passed with records waiting, so a standby whose disk
// works leads, instead of renewing a lease under which nothing can be
// released for as long as the disk hangs. It asks for no lease while the
// disk is stalled, and contends again once the disk caught up.
func TestPrimaryWhoseDiskStallsGivesItsLeaseUp(t *testing.T) {
	// The bound is the in-sync timeout unless --disk-stall-after sets
	// its own, longer (a disk whose fsyncs stall now and then) or shorter.
	for _, tc := range []struct {
		name                   string
		insync, stall, timeout int64
	}{
		{"the in-sync timeout", 50_000_000, 0, 50_000_000},
		{"its own, past the in-sync timeout", 30_000_000, 80_000_000, 80_000_000},
		{"its own, before the in-sync timeout", 0, 40_000_000, 40_000_000},
	} {
		t.Run(tc.name, func(t *testing.T) { diskStallGivesLeaseUp(t, tc.insync, tc.stall, tc.timeout) })
	}
}

func diskStallGivesLeaseUp(t *testing.T, insync, stall, timeout int64) {
	n, clk, arb := leasedPrimaryWith(t, func(c *nodeconfig.Config) {
		c.Journal.Policy = journal.SyncGroup
		c.InSyncTimeoutNs, c.DiskStallNs = insync, stall
	})
	n.Deliver(commandFrame(7, 1, 100), replayClient) // written; no SyncStep: the fsync hangs
	stalls := func() uint64 { n.mu.Lock(); defer n.mu.Unlock(); return n.stats.DiskStalls }
	start := clk.ns
	for clk.ns-start < timeout-2_000_000 {
		clk.ns += 1_000_000
		n.Tick()
	}
	if rel := arb.releases(); len(rel) != 0 || stalls() != 0 {
		t.Fatalf("before the timeout: releases %+v, DiskStalls %d", rel, stalls())
	}
	for range 3 {
		clk.ns += 1_000_000
		n.Tick()
	}
	if rel := arb.releases(); len(rel) != 1 || rel[0].Epoch != 2 || stalls() != 1 {
		t.Fatalf("past the timeout: releases %+v, DiskStalls %d; want one release of epoch 2, one stall", rel, stalls())
	}
	if d := n.Status().Disk; !d.Stalled || d.WaitingNs < timeout || d.StallAfterNs != timeout {
		t.Fatalf("status while stalled: %+v; want stalled, waiting at least %d ns of a bound of %d", d, timeout, timeout)
	}
	arb.epoch.Store(3) // the arbiter's next grant, should the node ask
	for range 5 {
		clk.ns += arbiter.DefaultRenewIntervalNs
		n.Tick()
	}
	if arb.k.MayLead(n.nowNs()) || n.Epoch() != 2 {
		t.Fatalf("the node asked for the lease while its disk was stalled (epoch %d)", n.Epoch())
	}
	if !n.SyncStep() { // the disk answers again
		t.Fatal("nothing to sync")
	}
	for range 3 {
		clk.ns += 1_000_000
		n.Tick()
	}
	if n.Epoch() != 3 || n.Role() != nodeconfig.RolePrimary || !arb.k.MayLead(n.nowNs()) {
		t.Fatalf("after the disk caught up: epoch %d role %s; want a new term, epoch 3", n.Epoch(), n.Role())
	}
	if d := n.Status().Disk; d.Stalled || d.WaitingNs != 0 {
		t.Fatalf("status after the disk caught up: %+v; want neither stalled nor waiting", d)
	}
}

// A primary paused (SIGSTOP, a descheduled VM) for longer than the
// in-sync timeout while its fsync was in flight is not stalled when it
// resumes: its fsync thread was paused too, and the wait counts only the
// time the node ran. It keeps its lease.
func TestPausedPrimaryIsNotADiskStall(t *testing.T) {
	const timeout = 50_000_000
	n, clk, arb := leasedPrimaryWith(t, func(c *nodeconfig.Config) {
		c.Journal.Policy = journal.SyncGroup
		c.InSyncTimeoutNs = timeout
	})
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	clk.ns += 1_000_000
	n.Tick()
	clk.ns += 3 * timeout // paused: no tick, no fsync
	n.Tick()
	n.SyncStep()
	for range 5 {
		clk.ns += 1_000_000
		n.Tick()
	}
	n.mu.Lock()
	stalls := n.stats.DiskStalls
	n.mu.Unlock()
	if rel := arb.releases(); len(rel) != 0 || stalls != 0 {
		t.Fatalf("after a pause: releases %+v, DiskStalls %d; want none", rel, stalls)
	}
}
