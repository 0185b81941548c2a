package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWipedStandbyDoesNotLead is a double fault: both nodes die at once
// under load, and the in-sync standby's directory is lost (a replaced
// disk, a volume recreated empty). The wiped node comes back first: the
// witness still lists it in the in-sync set and grants it the lease, and
// before, it led from seq 1 and the primary, on its return, discarded the
// history every client had seen. Now the wiped node, its directory new,
// gives the lease back declined, and the witness undoes the grant
// (arbiter.Arbiter.Decline): the node that holds the history is the last
// holder again, so when it comes back it leads with no operator, the
// wiped one catches up, and every check holds: nothing a client saw was
// lost. (A witness that restarted between the grant and the decline
// cannot undo it; then the operator names the node: seqbus witness
// override, TestWitnessOverrideAfterLostPrimary.)
func TestWipedStandbyDoesNotLead(t *testing.T) {
	begin := time.Now()
	c := newFailoverCluster(t, failoverOptions{})
	lc, md, p, pst := c.warmLoad()
	sb := c.other(p)
	waitFor(t, 20*time.Second, "the standby in the in-sync set", func() bool {
		s, ok := readStatus(p.dir)
		return ok && s.Node["InSyncMembers"] == 1
	})
	for _, m := range c.nodes {
		signal(t, m.p, syscall.SIGKILL)
	}
	for _, m := range c.nodes {
		<-m.p.done
	}
	if err := os.RemoveAll(sb.dir); err != nil {
		t.Fatal(err)
	}
	startMember(t, sb)
	waitFor(t, 20*time.Second, "the wiped node to decline the lease", func() bool {
		s, ok := readStatus(sb.dir)
		return ok && s.Node["LeadsDeclinedNewDirectory"] > 0
	})
	if s := mustStatus(t, sb); s.Role == "primary" || s.Applied != 0 {
		t.Fatalf("the wiped node %d: role %s applied %d, want a standby with nothing", sb.id, s.Role, s.Applied)
	}
	waitFor(t, 10*time.Second, "the witness to undo the declined grant", func() bool {
		return strings.Contains(c.wit.p.log(), "grant undone")
	})
	startMember(t, p)
	nw, nst := c.waitLeader(20*time.Second, 0, pst.Epoch+1)
	if nw != p {
		t.Fatalf("node %d leads epoch %d, want node %d (the history's)", nw.id, nst.Epoch, p.id)
	}
	if strings.Contains(c.wit.p.log(), "NO NODE MAY BE PROMOTED") {
		t.Fatal("the witness refused the node with the history")
	}
	lc.finish(t, 90*time.Second)
	final := c.waitConverged(30 * time.Second)
	c.stopAll(final)
	f := c.verify(final, lc, md)
	t.Logf("node %d led epoch %d; both SIGKILLed, node %d's directory removed; it declined, the grant was undone, node %d leads epoch %d; wall %v",
		p.id, pst.Epoch, sb.id, p.id, nst.Epoch, time.Since(begin).Round(time.Millisecond))
	requireClean(t, f)
}
