package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/bus"
	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/witness"
)

// startWitness runs a witness on loopback with lease cfg.
func startWitness(t testing.TB, lease arbiter.Config) (*witness.Server, netip.AddrPort) {
	return startWitnessWith(t, lease, func(*witness.Config) {})
}

func startWitnessWith(t testing.TB, lease arbiter.Config, mutate func(*witness.Config)) (*witness.Server, netip.AddrPort) {
	t.Helper()
	conn, err := bus.ListenUnicast(bus.UnicastConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := witness.DefaultConfig()
	cfg.Arbiter = lease
	mutate(&cfg)
	w, err := witness.New(cfg, conn, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w, conn.LocalAddr()
}

func (c *cluster) waitPrimary(timeout time.Duration, not uint32) uint32 {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for id, n := range c.nodes {
			if id != not && n.Role() == nodeconfig.RolePrimary {
				return id
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	var seen []string
	for id, n := range c.nodes {
		st := n.Status()
		seen = append(seen, fmt.Sprintf("node %d %s epoch %d applied %d in-sync %v (version %d)", id, st.Role, st.Epoch, st.Applied, st.InSync.Members, st.InSync.Version))
	}
	slices.Sort(seen)
	c.t.Fatalf("no primary within %v (other than node %d): %s", timeout, not, strings.Join(seen, "; "))
	return 0
}

// waitInSync waits until primary p's in-sync set, as the arbiter
// confirmed it, holds a standby: only a member may take over, so a test
// that stops p before then has, rightly, no new primary.
func (c *cluster) waitInSync(p uint32, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for len(c.nodes[p].Status().InSync.Members) == 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d: no standby confirmed in sync within %v", p, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// journalCommands reads every (session, client order id) a journal holds.
func journalCommands(t testing.TB, dir string) map[[2]uint64]int {
	t.Helper()
	out := map[[2]uint64]int{}
	eachJournalCommand(t, dir, func(_ uint64, key [2]uint64) { out[key]++ })
	return out
}

// journalOrderSeqs maps each (session, client order id) in the journal
// in dir to the seq it was journaled at (the last, if repeated), and
// returns the journal's first seq (0: empty).
func journalOrderSeqs(t testing.TB, dir string) (map[[2]uint64]uint64, uint64) {
	t.Helper()
	out := map[[2]uint64]uint64{}
	first := eachJournalCommand(t, dir, func(seq uint64, key [2]uint64) { out[key] = seq })
	return out, first
}

// eachJournalCommand calls fn with the seq and (session, client order id)
// of every command in the journal in dir, and returns its first seq (0:
// empty).
func eachJournalCommand(t testing.TB, dir string, fn func(seq uint64, key [2]uint64)) uint64 {
	t.Helper()
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.First() == 0 {
		return 0
	}
	err = j.ReadFrom(j.First(), func(_, seq uint64, payload []byte) bool {
		if h, err := engine.ParseCommand(payload); err == nil {
			fn(seq, [2]uint64{h.Session, h.ClientOrderID})
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return j.First()
}

// TestFailoverOnPrimaryLoss: three nodes and a witness; the primary dies
// under load; a standby is granted epoch+1, promotes, and the client finds
// it through the witness and resends. Every command is answered, and every
// answered command is in the new primary's journal.
func TestFailoverOnPrimaryLoss(t *testing.T) {
	defer goleak.VerifyNone(t)
	lease := arbiter.DefaultConfig()
	w, waddr := startWitness(t, lease)
	defer w.Close()
	c := newCluster(t, 3)
	defer c.closeAll()
	// The in-sync timeout is long: the subject is the failover, and under
	// CI-like load (go test -p 4 beside a disk writer) the default 200 ms
	// once dropped both standbys of this race-instrumented process from
	// the in-sync set before the stop, so that, rightly, none could be
	// promoted.
	for id := uint32(1); id <= 3; id++ {
		c.start(id, func(cfg *nodeconfig.Config) {
			cfg.Witness, cfg.Lease, cfg.InSyncTimeoutNs = waddr, lease, int64(2*time.Second)
		})
	}
	first := c.waitPrimary(5*time.Second, 0)
	answered := map[uint64]engine.OutputKind{}
	cl, err := client.Dial(client.Options{
		Core: client.Config{Session: 11}, Primary: c.addrs[first], Idle: testIdle,
		Witness: waddr, Nodes: c.addrs,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	done := make(chan error, 1)
	var rep client.LoadReport
	go func() {
		var err error
		rep, err = cl.Load(context.Background(), client.LoadConfig{Rate: 5_000, Count: 15_000, Seed: 3, Drain: 30 * time.Second},
			func(r client.Result) { answered[r.ClientOrderID] = r.Kind })
		done <- err
	}()
	time.Sleep(time.Second)
	c.waitInSync(first, 10*time.Second)
	killedAt := time.Now()
	c.stop(first)
	second := c.waitPrimary(10*time.Second, first)
	t.Logf("node %d promoted %v after node %d stopped", second, time.Since(killedAt), first)
	if err := <-done; err != nil {
		t.Fatalf("load: %v %+v", err, rep)
	}
	if cl.Failovers() == 0 {
		t.Fatal("the client never switched primary")
	}
	st := c.nodes[second].Status()
	if st.Epoch < 2 {
		t.Fatalf("new primary at epoch %d", st.Epoch)
	}
	c.waitConverged2(second, 10*time.Second)
	dir := c.dirs[second]
	c.closeAll()
	inJournal := journalCommands(t, dir)
	for id := range answered {
		if inJournal[[2]uint64{11, id}] == 0 {
			t.Fatalf("client order %d was answered but is not in the new primary's history", id)
		}
	}
	if len(answered) != 15_000 {
		t.Fatalf("answered %d of 15000", len(answered))
	}
}

// waitConverged2 waits until every running node matches primary p.
func (c *cluster) waitConverged2(p uint32, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ps := c.nodes[p].Status()
		ok := true
		for _, n := range c.nodes {
			s := n.Status()
			if s.Applied != ps.Applied || s.StateHash != ps.StateHash {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not converged on primary %d", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
