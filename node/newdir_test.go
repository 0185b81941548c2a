package node

import (
	"testing"

	"github.com/seqbus/seqbus/arbiter"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
)

// A node whose directory is new (storage.Storage.NewDirectory: empty when
// it started, never led nor caught up since) leads an arbiter's first
// term, but gives back one another node may hold a history for (here a
// later one with a member: replica.MayLeadTerm has the whole rule): the
// arbiter can take it for an in-sync member only because its directory
// was replaced or wiped since, and leading would start the history over
// and un-happen everything released (a wiped standby promoted while the
// primary was down did so before). It asks for the lease no more until
// it has caught up (refetching), and it sends no ack while new. The
// scripted arbiter's in-sync version is its epoch: epoch 1 is a first
// term.
func TestNewDirectoryDeclinesALaterTerm(t *testing.T) {
	for _, c := range []struct {
		name  string
		epoch uint64
		fs    func() *journal.MemFS
		lead  bool
	}{
		{"new directory, first term", 1, journal.NewMemFS, true},
		{"new directory, later term", 2, journal.NewMemFS, false},
		{"joined directory, later term", 2, func() *journal.MemFS { return joinedFS("/j") }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &stepClock{ns: 1}
			arb := &scriptedArbiter{}
			arb.epoch.Store(c.epoch)
			cfg := handStandbyConfig(clk, func(k *arbiter.Keeper) (arbiter.Backend, error) { arb.k = k; return arb, nil })
			cfg.FS = c.fs()
			n, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			n.Tick() // the keeper asks; the arbiter grants
			st := n.Status()
			if led := n.Role() == nodeconfig.RolePrimary; led != c.lead {
				t.Fatalf("granted epoch %d: role %s (status new_directory %v), want leading %v", c.epoch, n.Role(), st.NewDirectory, c.lead)
			}
			if c.lead {
				if st.NewDirectory || st.Node.LeadsDeclinedNewDirectory != 0 {
					t.Fatalf("leading: new_directory %v, declined %d", st.NewDirectory, st.Node.LeadsDeclinedNewDirectory)
				}
				return
			}
			if !st.NewDirectory || !st.Refetching || st.Node.LeadsDeclinedNewDirectory != 1 || st.Node.LeasesReleased != 1 {
				t.Fatalf("declined: new_directory %v refetching %v declined %d leases released %d, want true, true, 1, 1",
					st.NewDirectory, st.Refetching, st.Node.LeadsDeclinedNewDirectory, st.Node.LeasesReleased)
			}
			if rel := arb.releases(); len(rel) != 1 || rel[0].Epoch != c.epoch || !rel[0].Declined {
				t.Fatalf("releases %+v, want one of epoch %d, declined", rel, c.epoch)
			}
			clk.ns += 10 * arbiter.DefaultLeaseDurationNs
			n.Tick()
			if n.Role() == nodeconfig.RolePrimary {
				t.Fatal("asked again and led while new")
			}
		})
	}
}
