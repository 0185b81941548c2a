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
	// While B is down nothing may be released: the gate needs its ack.
	// (Statuses are rewritten every 100 ms; 250 ms apart they must agree.)
	time.Sleep(250 * time.Millisecond)
	r1 := mustStatus(t, c.primary()).Released
	time.Sleep(250 * time.Millisecond)
	r2 := mustStatus(t, c.primary()).Released
	if r2 != r1 {
		t.Errorf("primary released %d -> %d while B was down", r1, r2)
	}
	if load.p.exited() {
		t.Fatalf("the load finished while B was down: releases did not wait for B")
	}
	c.start(b)
	downFor := time.Since(killedAt)
	atRestart := mustStatus(t, c.primary())
	recovered := recoveredApplied(t, b.p.log())
	t.Logf("B killed at applied >= %d, down %v, recovered applied %d from its journal; primary at %d on restart (gap %d)",
		before.Applied, downFor.Round(time.Millisecond), recovered, atRestart.Applied, int64(atRestart.Applied)-int64(recovered))
	if recovered < before.Applied {
		t.Errorf("B recovered applied %d from its journal, below the %d it reported before SIGKILL", recovered, before.Applied)
	}
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
