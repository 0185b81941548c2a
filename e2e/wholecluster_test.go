package e2e

import (
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
	c.startAll()
	first, _ := c.waitLeader(10*time.Second, 0, 1)
	md := c.observeMarketData()
	lc := c.dialClient(first)
	lc.start(failoverRate, failoverCount)
	lc.waitAnswered(t, failoverWarmup, 30*time.Second)
	old, ost := c.waitLeader(10*time.Second, 0, 1)
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
