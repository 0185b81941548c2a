package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWholeClusterKilled kills both nodes with SIGKILL at once under load
// (a power cut of the nodes' rack, a bad deploy) and restarts them on
// their own disks a moment later, the witness running on: with no node
// alive to hand over to, the witness must grant a newer epoch to one of
// the restarted nodes from what their journals hold, the client must find
// it and resend, and every check must hold (nothing the client saw lost,
// the journals equal, the market data without a hole). seqbus chaos
// --faults kill-all runs the same fault at two to five nodes.
func TestWholeClusterKilled(t *testing.T) {
	begin := time.Now()
	c := newFailoverCluster(t, failoverOptions{})
	lc, md, old, ost := c.warmLoad()
	for _, m := range c.nodes {
		signal(t, m.p, syscall.SIGKILL)
	}
	killedAt := time.Now()
	for _, m := range c.nodes {
		<-m.p.done
	}
	answeredAtKill := lc.answered()
	time.Sleep(300 * time.Millisecond) // both down for a moment, as in a power cut
	for _, m := range c.nodes {
		startMember(t, m)
	}
	nw, nst := c.waitLeader(20*time.Second, 0, ost.Epoch+1)
	leadsAfter := time.Since(killedAt)
	lc.finish(t, 60*time.Second)
	final := c.waitConverged(20 * time.Second)
	if final != nw {
		t.Errorf("node %d leads at the end; node %d led first after the restart", final.id, nw.id)
	}
	c.stopAll(final)
	f := c.verify(final, lc, md)
	t.Logf("node %d led epoch %d; both nodes SIGKILLed at %d answers, restarted 300 ms later; node %d leads epoch %d %v after the kill; client failovers %d; wall %v",
		old.id, ost.Epoch, answeredAtKill, nw.id, nst.Epoch, leadsAfter.Round(time.Millisecond), lc.cl.Failovers(), time.Since(begin).Round(time.Millisecond))
	if lc.answered() <= answeredAtKill {
		t.Errorf("no answer after the restart (answered %d at the kill, %d at the end)", answeredAtKill, lc.answered())
	}
	requireClean(t, f)
}

// warmLoad starts the witness and the nodes, a market-data observer and
// the failover load, waits for the load's warm-up answers and returns
// who leads after them.
func (c *fcluster) warmLoad() (*loadClient, *mdObserver, *member, status) {
	c.t.Helper()
	c.startAll()
	first, _ := c.waitLeader(10*time.Second, 0, 1)
	md := c.observeMarketData()
	lc := c.dialClient(first)
	lc.start(failoverRate, failoverCount)
	lc.waitAnswered(c.t, failoverWarmup, 30*time.Second)
	p, st := c.waitLeader(10*time.Second, 0, 1)
	return lc, md, p, st
}

// overrideAllow is the operator's way out of the in-sync rule's dead
// end: stop the witness, name node id with seqbus witness override
// --allow, start the witness again.
func (c *fcluster) overrideAllow(id uint32) {
	c.t.Helper()
	c.wit.p.stop(c.t)
	o := startProc(c.t, c.wit.host, "witness-override", "witness", "override", "--dir", c.wit.dir,
		"--allow", strconv.Itoa(int(id)), "--accept-loss")
	if err := o.wait(c.t, 20*time.Second); err != nil || !strings.Contains(o.log(), "written to") {
		c.t.Fatalf("override: %v\n%s", err, o.log())
	}
	c.startWitness()
}
