package node

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/nodeconfig"
)

// TestInSyncStandbyLossAndRejoin: the only standby dies under load; the
// primary has it removed from the in-sync set through the witness and
// releases again without it (running alone) while it is still down; the
// standby comes back, catches up, is re-added; then the primary dies and
// the standby takes over with every answered command in its history.
func TestInSyncStandbyLossAndRejoin(t *testing.T) {
	defer goleak.VerifyNone(t)
	lease := arbiter.DefaultConfig()
	w, waddr := startWitness(t, lease)
	defer w.Close()
	c := newCluster(t, 2)
	defer c.closeAll()
	withWitness := func(cfg *nodeconfig.Config) { cfg.Witness = waddr; cfg.Lease = lease }
	c.start(1, withWitness)
	if p := c.waitPrimary(5*time.Second, 0); p != 1 {
		t.Fatalf("primary %d", p)
	}
	c.start(2, withWitness)
	waitInSync := func(want []arbiter.NodeID) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st := c.nodes[1].Status()
			if slices.Equal(st.InSync.Members, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("in-sync set %v, want %v", st.InSync.Members, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitInSync([]arbiter.NodeID{2})

	var mu sync.Mutex
	var answers []time.Time
	answered := map[uint64]bool{}
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 5}, Primary: c.addrs[1], Idle: testIdle, Witness: waddr, Nodes: c.addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	done := make(chan error, 1)
	go func() {
		_, err := cl.Load(context.Background(), client.LoadConfig{Rate: 2_000, Count: 12_000, Seed: 5, Drain: 30 * time.Second}, func(r client.Result) {
			mu.Lock()
			answers = append(answers, time.Now())
			if r.Kind == engine.KindAck {
				answered[r.ClientOrderID] = true
			}
			mu.Unlock()
		})
		done <- err
	}()
	time.Sleep(time.Second)
	downAt := time.Now()
	c.stop(2)
	waitInSync(nil)
	removedIn := time.Since(downAt)
	// Releases resume with the standby still down.
	before := cl.Stats().Answered
	deadline := time.Now().Add(5 * time.Second)
	for cl.Stats().Answered <= before+100 {
		if time.Now().After(deadline) {
			t.Fatal("releases did not resume without the dead standby")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	var pause time.Duration
	for i := 1; i < len(answers); i++ {
		if answers[i].After(downAt) {
			pause = max(pause, answers[i].Sub(answers[i-1]))
		}
	}
	mu.Unlock()
	t.Logf("standby removed from the in-sync set %v after it died; longest pause in answers %v (timeout %v)",
		removedIn, pause, time.Duration(nodeconfig.DefaultInSyncTimeoutNs))
	if st := c.nodes[1].Status(); st.Node.RunningAlone == 0 {
		t.Fatal("the primary did not report running alone")
	}
	time.Sleep(500 * time.Millisecond)
	c.start(2, withWitness)
	waitInSync([]arbiter.NodeID{2})
	time.Sleep(300 * time.Millisecond)
	c.stop(1)
	if p := c.waitPrimary(10*time.Second, 1); p != 2 {
		t.Fatalf("primary %d after the failover", p)
	}
	if err := <-done; err != nil {
		t.Fatalf("load: %v", err)
	}
	installed := c.nodes[2].Status().Node.SnapshotsInstalled
	c.closeAll()
	// The restarted standby may have caught up by a snapshot (it fell
	// more than its window behind while it was down: under load, it
	// once did): its journal then starts past it, and what the snapshot
	// holds is the old primary's history below that point, in the old
	// primary's journal (one epoch, so the same seqs).
	inJournal, first := journalOrderSeqs(t, c.dirs[2])
	oldSeqs, _ := journalOrderSeqs(t, c.dirs[1])
	t.Logf("new primary: journal from %d, %d snapshots installed", first, installed)
	mu.Lock()
	defer mu.Unlock()
	for id := range answered {
		key := [2]uint64{5, id}
		if _, ok := inJournal[key]; ok {
			continue
		}
		if seq, ok := oldSeqs[key]; ok && seq < first && installed > 0 {
			continue // in the snapshot the standby installed
		}
		t.Fatalf("order %d was acknowledged but is not in the new primary's history (its journal from %d; %d snapshots installed; old primary's seq %d)",
			id, first, installed, oldSeqs[key])
	}
}

// TestNotInSyncNeverPromoted: a standby that fell out of the in-sync set is
// refused the lease by the witness when the primary dies.
func TestNotInSyncNeverPromoted(t *testing.T) {
	defer goleak.VerifyNone(t)
	lease := arbiter.DefaultConfig()
	w, waddr := startWitness(t, lease)
	defer w.Close()
	c := newCluster(t, 3)
	defer c.closeAll()
	withWitness := func(cfg *nodeconfig.Config) { cfg.Witness = waddr; cfg.Lease = lease }
	c.start(1, withWitness)
	c.waitPrimary(5*time.Second, 0)
	c.start(2, withWitness)
	// Node 3 starts and is stopped: if it ever joined the set, it is
	// removed once silent.
	c.start(3, withWitness)
	time.Sleep(500 * time.Millisecond)
	c.stop(3)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(c.nodes[1].Status().InSync.Members, []arbiter.NodeID{2}) {
		if time.Now().After(deadline) {
			t.Fatalf("in-sync set %v, want [2]", c.nodes[1].Status().InSync.Members)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.stop(1)
	// Restart node 3 (behind) at once: only node 2 may be granted.
	c.start(3, withWitness)
	p := c.waitPrimary(10*time.Second, 1)
	if p != 2 {
		t.Fatalf("node %d promoted; only the in-sync node 2 may be", p)
	}
	if st := w.Stats(); st.Denied() == 0 {
		t.Fatalf("witness denied nothing: %+v", st)
	}
}
