package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestWitnessOverrideAfterLostPrimary is the in-sync rule's dead end and
// the operator's way out, with real nodes: the standby stops (planned),
// so the primary runs alone and the witness empties the set; the primary
// is then lost (SIGKILL, never restarted). The standby, restarted, is
// refused as not in sync and the witness says NO NODE MAY BE PROMOTED.
// The operator stops the witness, runs `seqbus witness override --allow`
// for the standby, and starts the witness again: the standby leads a
// newer epoch and answers a client.
func TestWitnessOverrideAfterLostPrimary(t *testing.T) {
	c := newFailoverCluster(t, failoverOptions{})
	c.startAll()
	p, pst := c.waitLeader(10*time.Second, 0, 1)
	sb := c.other(p)
	waitFor(t, 20*time.Second, "the standby in the in-sync set", func() bool {
		s, ok := readStatus(p.dir)
		return ok && s.Node["InSyncMembers"] == 1
	})
	sb.p.stop(t)
	waitFor(t, 20*time.Second, "the primary running alone", func() bool {
		s, ok := readStatus(p.dir)
		return ok && s.Node["InSyncMembers"] == 0 && s.Role == "primary"
	})
	killProc(t, p.p)
	startMember(t, sb)
	waitFor(t, 20*time.Second, "the witness to say no node may be promoted", func() bool {
		return strings.Contains(c.wit.p.log(), "NO NODE MAY BE PROMOTED")
	})
	if s, ok := readStatus(sb.dir); !ok || s.Role == "primary" {
		t.Fatalf("node %d leads before the override: %+v", sb.id, s)
	}
	c.overrideAllow(sb.id)
	leader, st := c.waitLeader(20*time.Second, p.id, pst.Epoch+1)
	if leader != sb {
		t.Fatalf("node %d leads, want node %d", leader.id, sb.id)
	}
	lc := c.dialClient(sb)
	lc.start(failoverRate, 200)
	lc.waitAnswered(t, 200, 30*time.Second)
	lc.finish(t, 30*time.Second)
	t.Logf("after the override node %d leads epoch %d (the lost primary led %d)", sb.id, st.Epoch, pst.Epoch)
}
