package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/internal/netns"
	"github.com/seqbus/seqbus/journal"
)

// TestJournalWithoutItsSnapshot starts a node on a journal that begins
// after seq 1 (as a standby's does once it installed a snapshot) whose
// snapshot file is gone. Replaying that journal onto an empty state
// machine would invent a state no replica ever had, so the node must
// refuse to start, or start with nothing applied; it must never claim the
// journal's last seq.
func TestJournalWithoutItsSnapshot(t *testing.T) {
	netns.Require(t)
	host := netns.New(t)
	dir := filepath.Join(t.TempDir(), "node")
	j, _, err := journal.Open(journal.OSFS{}, dir, journal.Options{Policy: journal.SyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	const snapSeq, last = 1000, 1200
	if err := j.ResetTo(snapSeq); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for seq := uint64(snapSeq + 1); seq <= last; seq++ {
		r := engine.Request{Op: engine.OpNewOrder, Instrument: 0, Side: engine.Buy, Type: engine.Limit, Price: 1000, Qty: 1}
		buf = engine.AppendRequest(buf[:0], 1, seq, &r)
		if err := j.Append(1, seq, buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, host, "node", "node", "--id", "2", "--dir", dir, "--listen", "127.0.0.1:7101",
		"--group", groupAddr+":7100", "--iface", "lo", "--fsync", "none")
	var st status
	waitFor(t, 20*time.Second, "the node to exit or report a status", func() bool {
		if p.exited() {
			return true
		}
		s, ok := readStatus(dir)
		st = s
		return ok
	})
	if p.exited() {
		if p.err == nil {
			t.Fatalf("node exited 0 on a journal it cannot replay")
		}
		t.Logf("node refused to start (%v): %s", p.err, lastLine(p.log(), "journal"))
		return
	}
	if st.Applied != 0 {
		t.Errorf("node recovered applied %d from a journal starting at %d with no snapshot: a state no replica had", st.Applied, snapSeq+1)
	}
}
