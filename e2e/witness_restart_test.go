package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// witnessRestartLease is TestWitnessRestartKeepsTheLeader's lease, and so
// the restarted witness's quarantine: the window in which the running
// primary's renew must reach it to keep its epoch. After the quarantine
// the witness refuses a renew of the lapsed lease (the primary then
// acquires a new epoch) and grants the standby a new epoch if it asks
// first. With the 1 s default, a primary or witness held off its CPU for
// a second around the restart (CI runs packages in parallel on 2 cores)
// turned the test into a failover, which is then the right outcome; 4 s
// leaves room for such a stall.
const witnessRestartLease = 4 * time.Second

// witnessDowntime is how long TestWitnessRestartKeepsTheLeader keeps the
// witness dead (the restart of issue 15 item 2): a second more than the
// lease, so the primary's view of its lease ends while the witness is
// down, as with the 2 s downtime and 1 s lease before.
const witnessDowntime = witnessRestartLease + time.Second

// TestWitnessRestartKeepsTheLeader (issue 15 item 2): the witness is
// SIGKILLed under load for longer than the lease (witnessDowntime) and
// restarted on the same --dir. The primary, still running, renews its
// epoch the moment the witness is back: the same node leads at the same
// epoch (no new epoch, no failover), nothing is lost, and releases pause
// from the end of the primary's view (lease minus margin after its last
// renewal) until a renew retried every 50 ms meets the restarted witness:
// at most the rest of the downtime plus one renew interval. The gap is
// measured and logged, not asserted (a loaded machine stretches it).
func TestWitnessRestartKeepsTheLeader(t *testing.T) {
	c := newFailoverCluster(t, failoverOptions{lease: witnessRestartLease})
	c.startAll()
	p, pst := c.waitLeader(10*time.Second, 0, 1)
	md := c.observeMarketData()
	lc := c.dialClient(p)
	lc.start(failoverRate, failoverCount)
	lc.waitAnswered(t, failoverWarmup, 30*time.Second)

	killedAt := killProc(t, c.wit.p)
	time.Sleep(witnessDowntime)
	restartedAt := time.Now()
	c.startWitness()
	var back status
	waitFor(t, 10*time.Second, "a node to hold the lease after the witness restart", func() bool {
		for _, m := range c.nodes {
			if s, ok := readStatus(m.dir); ok && s.Role == "primary" && s.Lease.Held && s.ID == m.id && statusNewerThan(m, restartedAt) {
				back = s
				return true
			}
		}
		return false
	})
	if back.ID != p.id || back.Epoch != pst.Epoch {
		t.Errorf("after a witness restart node %d leads at epoch %d; want node %d at epoch %d (no failover, no new epoch)",
			back.ID, back.Epoch, p.id, pst.Epoch)
	}
	lc.finish(t, 60*time.Second)
	final := c.waitConverged(20 * time.Second)
	fst := mustStatus(t, final)
	ost := mustStatus(t, c.other(final))
	c.stopAll(final)
	requireClean(t, c.verify(final, lc, md))
	if final.id != p.id || fst.Epoch != pst.Epoch {
		t.Errorf("final primary node %d epoch %d, want node %d epoch %d", final.id, fst.Epoch, p.id, pst.Epoch)
	}
	if fst.Node["StepDowns"] != 0 || ost.Node["Promotions"] != 0 {
		t.Errorf("step-downs of node %d: %d, promotions of node %d: %d; want none", final.id, fst.Node["StepDowns"], ost.ID, ost.Node["Promotions"])
	}

	// The release gap: the longest silence between two outputs at the
	// client from a second before the kill to the end.
	seen := lc.tap.snapshot()
	var gap time.Duration
	var gapFrom time.Time
	var prev time.Time
	for _, s := range seen {
		if s.at.Before(killedAt.Add(-time.Second)) {
			continue
		}
		if !prev.IsZero() && s.at.Sub(prev) > gap {
			gap, gapFrom = s.at.Sub(prev), prev
		}
		prev = s.at
	}
	restartLog, _ := findLogAfter(c.wit.p.log(), "serving", time.Time{})
	t.Logf("witness down %v (SIGKILL to restart %s, serving again %s): longest release gap %s from %s; bound: the downtime past the lease view (lease - margin after the last renewal) + renew interval = %s; leader node %d epoch %d before and after",
		witnessDowntime, ms(restartedAt.Sub(killedAt)), rel(restartLog.at, killedAt), ms(gap), rel(gapFrom, killedAt),
		ms(witnessDowntime-(witnessRestartLease-leaseMargin)+250*time.Millisecond), p.id, pst.Epoch)
}

// statusNewerThan reports whether m's status file was written after at,
// so a status from before the restart is not taken for the lease held
// again.
func statusNewerThan(m *member, at time.Time) bool {
	fi, err := os.Stat(filepath.Join(m.dir, "status.json"))
	return err == nil && fi.ModTime().After(at)
}
