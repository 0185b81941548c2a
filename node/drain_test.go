package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/wire"
)

// A standby granted the lease whose journal cannot make what it applied
// durable (the promotion's drain: write, then fsync) does not lead: its
// journal is broken for good, and it gives the lease up at once, so the
// arbiter grants the next epoch to another standby now, and asks for it
// no more. Before, it kept the lease it could not lead under: every tick
// promoted it again and failed again, and nobody led until its disk watch
// stopped the renewals and the lease ran out.
func TestStandbyWhoseDrainFailedGivesTheLeaseUp(t *testing.T) {
	clk := &stepClock{ns: 1}
	arb := &scriptedArbiter{}
	arb.epoch.Store(2)
	fs := journal.NewMemFS()
	cfg := handStandbyConfig(clk, func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil })
	cfg.FS, cfg.Journal.Policy = fs, journal.SyncGroup
	cfg.Journal.GroupRecords, cfg.Journal.GroupWindowNs = 1<<20, 1<<40 // nothing synced before the drain
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	// Follow node 2's epoch 1 and apply one record, written, not synced.
	from, o := cfg.Peers[2], wire.Origin{Stream: 9, Node: 2, Epoch: 1}
	ne := wire.NewEpoch{Origin: o, History: testHistory}
	n.Deliver(ne.Append(nil), from)
	n.Deliver(buyData(o, 1), from)
	if st := n.Status(); st.Applied != 1 || st.Durable != 0 {
		t.Fatalf("applied %d durable %d, want 1 and 0", st.Applied, st.Durable)
	}
	fs.SetSyncError(errors.New("EIO"))
	n.Tick() // the keeper asks, the arbiter grants epoch 2: the drain's fsync fails
	for i := range 5 {
		if n.Role() != nodeconfig.RoleStandby {
			t.Fatalf("tick %d: leading on a journal that could not drain", i)
		}
		clk.ns += arbiter.DefaultRenewIntervalNs
		n.Tick()
	}
	rel := arb.releases()
	if len(rel) != 1 || rel[0].Kind != arbiter.RequestRelease || rel[0].Epoch != 2 || rel[0].Node != 1 {
		t.Fatalf("releases %+v, want one of epoch 2 by node 1, at the failed drain", rel)
	}
	if arb.k.MayLead(n.nowNs()) {
		t.Fatal("the keeper holds the lease again after giving it up")
	}
	n.mu.Lock()
	broken, jerrs, released := n.st.Broken(), n.stats.JournalErrors, n.stats.LeasesReleased
	n.mu.Unlock()
	if !broken || jerrs != 1 || released != 1 {
		t.Fatalf("broken %v, JournalErrors %d, LeasesReleased %d: want the journal broken, one error, one release", broken, jerrs, released)
	}
	if !n.Status().JournalFailed {
		t.Fatal("status does not say the journal failed")
	}
}

// A standby whose journal fails while it cuts its suffix at a new
// primary's fork (records the old primary never had acknowledged) stays
// a standby that will never lead (its journal broken: the cut may be half
// done), logs it once and counts each retry (every NEW_EPOCH repeat
// retries it). Before, it logged every repeat, up to a line a
// millisecond, and its journal was not marked broken.
func TestFailedReconcileBreaksTheJournal(t *testing.T) {
	clk := &stepClock{ns: 1}
	n := manualNode(t, nodeconfig.RoleStandby, clk)
	defer n.Close()
	var logs bytes.Buffer
	n.cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	from := n.cfg.Peers[1]
	o := wire.Origin{Stream: 9, Node: 1, Epoch: 1}
	ne := wire.NewEpoch{Origin: o, History: testHistory}
	n.Deliver(ne.Append(nil), from)
	for seq := uint64(1); seq <= 3; seq++ {
		n.Deliver(buyData(o, seq), from)
	}
	if st := n.Status(); st.Applied != 3 {
		t.Fatalf("applied %d, want 3", st.Applied)
	}
	n.cfg.FS.(*journal.MemFS).SetSyncError(errors.New("EIO"))
	ne = wire.NewEpoch{Origin: wire.Origin{Stream: 9, Node: 1, Epoch: 2}, PrevEpoch: 1, LastSeq: 1, History: testHistory}
	for range 3 { // the first and two repeats
		n.Deliver(ne.Append(nil), from)
	}
	n.mu.Lock()
	broken, jerrs := n.st.Broken(), n.stats.JournalErrors
	n.mu.Unlock()
	if !broken || jerrs != 3 {
		t.Fatalf("broken %v, JournalErrors %d: want the journal broken, 3 errors", broken, jerrs)
	}
	if k := strings.Count(logs.String(), "reconcile with the new primary failed"); k != 1 {
		t.Fatalf("logged %d times, want once:\n%s", k, logs.String())
	}
}
