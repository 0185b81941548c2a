package e2e

import (
	"syscall"
	"testing"
	"time"
)

// TestStandbyKilledResumes kills standby B with SIGKILL in the middle of a
// load and restarts it on the same directory: B must recover from its own
// journal, repair the commands it missed with NAKs and retransmits (no
// snapshot), and end identical to the primary. Answers stall while B is
// down (releases need its ack) and resume once it is back.
//
// A second client sends missedCount commands while B is down, and B is
// restarted only once the primary has sequenced them, so B always has
// something to repair. Before, what B missed was whatever happened to be
// in flight at the kill: under CI's load the first client's window was
// full and B had all of it (gap 0), so it sent no NAK and the test failed.
func TestStandbyKilledResumes(t *testing.T) {
	begin := time.Now()
	const count = 300_000
	c := newCluster(t, clusterOptions{snapshotEvery: 10 * count, fsync: "group"})
	c.startAll()
	load := c.startLoad(1, 100_000, count, 60*time.Second)
	b := c.b()
	var before status
	waitFor(t, 60*time.Second, "B applied 100k", func() bool {
		s, ok := readStatus(b.dir)
		if ok {
			before = s
		}
		return ok && s.Applied >= 100_000
	})
	if err := b.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.p.done
	killedAt := time.Now()
	// The primary's first status written after B died: everything B
	// received is at or below its Applied.
	var atKill status
	waitFor(t, 20*time.Second, "a primary status written after the kill", func() bool {
		s, ok := readStatus(c.primary().dir)
		atKill = s
		return ok && statusNewerThan(c.primary(), killedAt)
	})
	const missedCount = 500
	missed := c.startLoad(2, 5_000, missedCount, 60*time.Second)
	var down status
	waitFor(t, 60*time.Second, "the primary to sequence the commands sent while B is down", func() bool {
		s, ok := readStatus(c.primary().dir)
		down = s
		return ok && s.Applied >= atKill.Applied+missedCount
	})
	if load.p.exited() || missed.p.exited() {
		t.Fatalf("a load finished while B was down: releases did not wait for B")
	}
	c.start(b)
	downFor := time.Since(killedAt)
	recovered := recoveredApplied(t, b.p.log())
	t.Logf("B killed at applied >= %d, down %v, recovered applied %d from its journal; primary at %d before the restart (gap %d)",
		before.Applied, downFor.Round(time.Millisecond), recovered, down.Applied, int64(down.Applied)-int64(recovered))
	if recovered < before.Applied {
		t.Errorf("B recovered applied %d from its journal, below the %d it reported before SIGKILL", recovered, before.Applied)
	}
	// While B was down nothing it lacked may be released: the gate needs
	// its ack, and B acks only what its journal holds.
	if down.Released > recovered {
		t.Errorf("primary released up to %d while B was down; B's journal holds only %d", down.Released, recovered)
	}
	if recovered >= down.Applied {
		t.Fatalf("B recovered %d, the primary had sequenced %d: nothing to repair", recovered, down.Applied)
	}
	missed.finish(t, 2*time.Minute)
	sum := load.finish(t, 2*time.Minute)
	c.stopAll()
	st := c.finalCheck()
	bs, p := st[2], st[0]
	t.Logf("B after restart: NaksSent %d RetransmitsReceived %d SnapshotsInstalled %d SnapshotFetches %d; primary: NaksReceived %d RetransmitFrames %d JournalFallbacks %d; client resent %d duplicates %d; wall %v",
		bs.Node["NaksSent"], bs.Node["RetransmitsReceived"], bs.Node["SnapshotsInstalled"], bs.Node["SnapshotFetches"],
		p.Sequencer["NaksReceived"], p.Sequencer["RetransmitFrames"], p.Sequencer["JournalFallbacks"], sum.Resent, sum.Duplicates,
		time.Since(begin).Round(time.Millisecond))
	if bs.Node["RetransmitsReceived"] == 0 || bs.Node["NaksSent"] == 0 {
		t.Errorf("B after restart: NaksSent %d RetransmitsReceived %d, want both > 0", bs.Node["NaksSent"], bs.Node["RetransmitsReceived"])
	}
	if bs.Node["SnapshotsInstalled"] != 0 || bs.Journal.FirstSeq != 1 {
		t.Errorf("B installed %d snapshots (journal from %d): want a resume from its own journal", bs.Node["SnapshotsInstalled"], bs.Journal.FirstSeq)
	}
}
