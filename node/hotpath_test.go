package node

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/seqbus/seqbus/journal"
)

// drivenPrimary is a static primary driven by hand (no Start, so no
// syncer drains syncKick: a kick stays visible in the channel).
func drivenPrimary(tb testing.TB, policy journal.SyncPolicy) (*Node, *stepClock) {
	tb.Helper()
	clk := &stepClock{ns: 1}
	cfg := Config{
		ID: 1, Stream: 9, Dir: "/j", FS: journal.NewMemFS(), Network: nopNetwork{}, Clock: clk,
		Listen: netip.MustParseAddrPort("10.0.0.1:1"), Group: netip.MustParseAddrPort("239.1.1.1:2"),
		Peers:           map[uint32]netip.AddrPort{replayStandby: netip.MustParseAddrPort("10.0.0.3:1")},
		NewStateMachine: smallEngine, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Role: RolePrimary, Epoch: 1, Journal: journal.Options{Policy: policy, SegmentBytes: 1 << 16},
		PublisherCapacity: 256, MaxSessions: 4,
	}
	n, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	return n, clk
}

// Under fsync none a command is durable when its batch is written, and
// nobody is woken for it: no send on syncKick (issue 18, item 2).
func TestSyncNoneWakesNoSyncer(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncNone)
	for i := range uint64(5) {
		n.Deliver(commandFrame(7, i+1, 100), replayClient)
		clk.ns += int64(time.Millisecond)
		n.Tick()
	}
	st := n.Status()
	if st.Applied != 5 || st.Durable != 5 {
		t.Fatalf("applied %d durable %d, want 5 and 5", st.Applied, st.Durable)
	}
	if k := len(n.syncKick); k != 0 {
		t.Fatalf("fsync none kicked the syncer (%d kick pending)", k)
	}
}

// Under fsync group a batch that appended something wakes the syncer; a
// tick with nothing new to sync does not.
func TestSyncGroupKicksOnlyForUnsynced(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncGroup)
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	if k := len(n.syncKick); k != 1 {
		t.Fatalf("an append did not kick the syncer (%d pending)", k)
	}
	<-n.syncKick
	clk.ns += int64(50 * time.Millisecond)
	if !n.SyncStep() {
		t.Fatal("the group commit did not sync")
	}
	if st := n.Status(); st.Durable != 1 {
		t.Fatalf("durable %d after the sync, want 1", st.Durable)
	}
	for range 3 {
		clk.ns += int64(time.Millisecond)
		n.Tick()
	}
	if k := len(n.syncKick); k != 0 {
		t.Fatalf("ticks with nothing to sync kicked the syncer (%d pending)", k)
	}
}

// The status file is marshalled and written with the node's lock free: a
// slow disk delays no command (issue 18, item 5). The write hook checks
// that the lock is free while it runs, on the ticker's path and Close's.
func TestStatusWrittenOffTheLock(t *testing.T) {
	n, clk := drivenPrimary(t, journal.SyncNone)
	n.cfg.StatusFile = t.TempDir() + "/status.json"
	var writes, lockedWrites int
	var last Status
	n.statusWrite = func(path string, b []byte) error {
		writes++
		if !n.mu.TryLock() {
			lockedWrites++
		} else {
			n.mu.Unlock()
		}
		if err := json.Unmarshal(b, &last); err != nil {
			t.Errorf("status does not parse: %v", err)
		}
		return writeFileAtomic(path, b)
	}
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	clk.ns += int64(time.Millisecond)
	n.publishStatus()
	if writes != 1 || last.Applied != 1 || last.Role != "primary" {
		t.Fatalf("%d writes, last applied %d role %q; want 1 write of applied 1 as primary", writes, last.Applied, last.Role)
	}
	n.Deliver(commandFrame(7, 2, 100), replayClient)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if writes != 2 || last.Applied != 2 {
		t.Fatalf("Close: %d writes, last applied %d; want the final status (2 writes, applied 2)", writes, last.Applied)
	}
	if lockedWrites != 0 {
		t.Fatalf("%d of %d status writes ran under the node's lock", lockedWrites, writes)
	}
	b, err := os.ReadFile(n.cfg.StatusFile)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk Status
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.Applied != 2 {
		t.Fatalf("status.json on disk: applied %d, err %v", onDisk.Applied, err)
	}
}
