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
// gives the lease back; the market halts, and the witness refuses the node
// that holds the history (the wiped node was the last holder) until the
// operator names it (seqbus witness override --allow). Then that node
// leads, the wiped one catches up, and every check holds: nothing a
// client saw was lost.
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
	startMember(t, p)
	waitFor(t, 20*time.Second, "the witness to refuse the node with the history", func() bool {
		return strings.Contains(c.wit.p.log(), "NO NODE MAY BE PROMOTED")
	})
	for _, m := range c.nodes {
		if s := mustStatus(t, m); s.Role == "primary" {
			t.Fatalf("node %d leads epoch %d before the override", m.id, s.Epoch)
		}
	}
	c.overrideAllow(p.id)
	nw, nst := c.waitLeader(20*time.Second, 0, pst.Epoch+1)
	if nw != p {
		t.Fatalf("node %d leads epoch %d after the override, want node %d", nw.id, nst.Epoch, p.id)
	}
	lc.finish(t, 90*time.Second)
	final := c.waitConverged(30 * time.Second)
	c.stopAll(final)
	f := c.verify(final, lc, md)
	t.Logf("node %d led epoch %d; both SIGKILLed, node %d's directory removed; it declined, node %d leads epoch %d after the override; wall %v",
		p.id, pst.Epoch, sb.id, p.id, nst.Epoch, time.Since(begin).Round(time.Millisecond))
	requireClean(t, f)
}
