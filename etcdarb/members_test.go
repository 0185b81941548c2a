package etcdarb

import (
	"github.com/seqbus/seqbus/internal/etcdtest"
	"testing"
	"time"
)

// TestMemberFailures kills etcd members under a holder that renews every
// 500 ms (2 s lease, 150 ms margin), on a cluster of its own with a 250 ms
// election timeout (25 ms heartbeat). etcd answers nothing for about one
// to three election timeouts after its leader dies (measured here: 0.7-1.9
// s with a 500 ms election timeout, up to 0.9 s with 250 ms), and the
// holder survives only if its view (lease - margin after its last
// renewal was sent) outlasts that: a 1 s lease (850 ms) does not; a 2 s
// lease with a 250 ms election timeout does, with room to spare.
//
//  1. Kill etcd's raft leader (1 of 3): an election follows, and the
//     holder must keep its lease without a single moment of MayLead
//     false; the longest gap between grants is logged.
//  2. Restart it on its data dir, then kill 2 of 3: renewals fail, the
//     holder's MayLead goes false when its lease runs out, and nobody
//     acquires (etcd has no quorum to write with).
//  3. Restart one: quorum is back and leadership resumes.
func TestMemberFailures(t *testing.T) {
	cl := etcdtest.StartTimed(t, t.TempDir(), 25, 250)
	eps := cl.Endpoints()
	const leaseNs = 2 * second
	a := startNode(t, eps, 1, 1, leaseNs, true)
	holder := waitLeader(t, 3*time.Second, a)
	b := startNode(t, eps, 1, 2, leaseNs, true)
	time.Sleep(500 * time.Millisecond)

	// 1. Kill etcd's leader.
	dead := cl.LeaderIndex()
	_, before, _ := holder.snapshot()
	killNs := monoNs()
	cl.Kill(dead)
	time.Sleep(3 * time.Second)
	ivs, grants, _ := holder.snapshot()
	if len(ivs) != 1 || !holder.mayLead() {
		for _, g := range grants[len(before)-1:] {
			t.Logf("grant at %v sent %v", time.Duration(g.atNs), time.Duration(g.sentAtNs))
		}
		t.Logf("killed etcd leader at about %v; stats %+v", time.Duration(killNs), holder.c.Stats())
		t.Fatalf("holder's lease broke while 1 of 3 etcd members was down: intervals %v", ivs)
	}
	var gapMaxNs int64
	for i := len(before); i < len(grants); i++ {
		gapMaxNs = max(gapMaxNs, grants[i].atNs-grants[i-1].atNs)
	}
	usableNs := holder.cfg.LeaseDurationNs - holder.cfg.MarginNs
	if gapMaxNs >= usableNs {
		t.Errorf("longest gap between grants %v exceeds the usable lease %v", time.Duration(gapMaxNs), time.Duration(usableNs))
	}
	t.Logf("MEASURED etcd leader killed: longest gap between grants %v (renew interval %v), stats %+v",
		time.Duration(gapMaxNs), time.Duration(holder.cfg.RenewIntervalNs), holder.c.Stats())
	cl.StartMember(dead)
	cl.WaitHealthy(etcdtest.UpBound)

	// 2. Kill two of three.
	survivor := (dead + 1) % 3
	for i := range 3 {
		if i != survivor {
			cl.Kill(i)
		}
	}
	killedNs := monoNs()
	waitFor(t, time.Duration(holder.cfg.LeaseDurationNs)+time.Second, "the holder's lease to run out", func() bool {
		return !holder.mayLead()
	})
	lostAfter := time.Duration(monoNs() - killedNs)
	time.Sleep(1500 * time.Millisecond)
	if a.mayLead() || b.mayLead() {
		t.Fatal("a node leads while etcd has no quorum")
	}
	st := holder.c.Stats()
	if st.Errors+st.Timeouts == 0 {
		t.Errorf("no failed request counted without quorum: %+v", st)
	}
	t.Logf("MEASURED quorum lost: holder stopped leading after %v; stats %+v", lostAfter, st)

	// 3. Quorum back.
	restarted := (survivor + 1) % 3
	cl.StartMember(restarted)
	cl.WaitHealthy(etcdtest.UpBound)
	waitLeader(t, 5*time.Second, a, b)
	checkSafety(t, a, b)
}
