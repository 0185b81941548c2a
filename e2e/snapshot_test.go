package e2e

import (
	"os"
	"testing"
	"time"
)

// TestLateStandbyCatchesUpBySnapshot replaces standby B with an empty one
// after the cluster has sequenced 300k commands: the new B is far more
// than its window (8192 messages) behind, so it must fetch a snapshot from
// the primary, install it, repair the rest with NAKs and end identical to
// the primary. A restart afterwards must recover B from the installed
// snapshot plus its journal.
//
// B has to be a member (a --peer of the primary) from the start, because
// the primary releases nothing without every peer's ack: a standby that is
// absent for the first phase would stall it. Replacing B's disk is the
// way to start a member late.
func TestLateStandbyCatchesUpBySnapshot(t *testing.T) {
	begin := time.Now()
	const phase1, phase2 = 300_000, 100_000
	c := newCluster(t, clusterOptions{snapshotEvery: 50_000, fsync: "none"})
	c.startAll()
	c.startLoad(1, 100_000, phase1, 60*time.Second).finish(t, 2*time.Minute)

	b := c.b()
	b.p.stop(t)
	if err := os.RemoveAll(b.dir); err != nil {
		t.Fatal(err)
	}
	atJoin := mustStatus(t, c.primary())
	c.start(b)
	// New commands right away: B sees DATA far beyond its window before
	// NAK repair could bring it there (the retransmit budget alone needs
	// ~100 ms for 300k commands).
	load := c.startLoad(2, 100_000, phase2, 60*time.Second)
	sum := load.finish(t, 2*time.Minute)
	c.stopAll()
	st := c.finalCheck()
	bs, p := st[2], st[0]
	t.Logf("B joined empty with the primary at %d: SnapshotFetches %d SnapshotsInstalled %d NaksSent %d RetransmitsReceived %d, journal [%d, %d]; primary: Snapshots %d SnapshotChunksSent %d NeedSnapshots %d; client 2 duplicates %d; wall %v",
		atJoin.Applied, bs.Node["SnapshotFetches"], bs.Node["SnapshotsInstalled"], bs.Node["NaksSent"], bs.Node["RetransmitsReceived"],
		bs.Journal.FirstSeq, bs.Journal.LastSeq, p.Node["Snapshots"], p.Node["SnapshotChunksSent"], p.Sequencer["NeedSnapshots"], sum.Duplicates,
		time.Since(begin).Round(time.Millisecond))
	if bs.Node["SnapshotsInstalled"] < 1 || bs.Node["SnapshotFetches"] < 1 {
		t.Errorf("B: SnapshotFetches %d SnapshotsInstalled %d, want >= 1", bs.Node["SnapshotFetches"], bs.Node["SnapshotsInstalled"])
	}
	if bs.Journal.FirstSeq <= atJoin.Applied-8192 {
		t.Errorf("B's journal starts at %d: it replayed history instead of installing a snapshot near %d", bs.Journal.FirstSeq, atJoin.Applied)
	}

	// B alone, restarted: snapshot + journal must give the same state.
	c.start(b)
	again := mustStatus(t, b)
	b.p.stop(t)
	final := mustStatus(t, b)
	t.Logf("B restarted: %s", lastLine(b.p.log(), "msg=recovered"))
	if again.Applied != p.Applied || final.StateHash != p.StateHash {
		t.Errorf("B restarted: applied %d hash %#x, want %d %#x", again.Applied, final.StateHash, p.Applied, p.StateHash)
	}
}
