package node

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
)

// noSpareFS fails the creation of the journal's next segment while full
// is set, as a full disk would.
type noSpareFS struct {
	journal.FS
	full atomic.Bool
}

var errNoSpace = errors.New("no space left on device")

func (f *noSpareFS) OpenFile(name string, flag int, perm os.FileMode) (journal.File, error) {
	if filepath.Base(name) == journal.SpareSegmentName && f.full.Load() {
		return nil, errNoSpace
	}
	return f.FS.OpenFile(name, flag, perm)
}

// tickUntil ticks the node until cond holds: the journal prepares its
// next segment on a goroutine of its own (bounded in count and time).
func tickUntil(t *testing.T, n *Node, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !cond(); i++ {
		if i == 100_000 || time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
		n.Tick()
		time.Sleep(100 * time.Microsecond)
	}
}

// A journal that cannot prepare its next segment is warned of at the
// tick, once an episode, with the room left before the roll that will
// need the disk; status shows it; once the disk has room again the
// retry succeeds and the warning ends.
func TestSpareSegmentFailureWarnsEarly(t *testing.T) {
	fs := &noSpareFS{FS: journal.NewMemFS()}
	fs.full.Store(true)
	log := &lockedLog{}
	n, clk := drivenPrimaryOnFS(t, journal.SyncNone, nopNetwork{}, fs, "/j", func(c *nodeconfig.Config) {
		c.Journal.PrepareAhead = true
		c.Log = slog.New(slog.NewTextHandler(log, nil))
	})
	n.Deliver(commandFrame(7, 1, 100), replayClient)
	tickUntil(t, n, "warned of the spare", func() bool { return n.Status().Journal.NextSegmentError != "" })
	st := n.Status()
	if !strings.Contains(st.Journal.NextSegmentError, errNoSpace.Error()) || st.Journal.RoomBytes <= 0 || st.Node.SpareSegmentFailures != 1 {
		t.Fatalf("status: next segment %q, room %d, failures %d", st.Journal.NextSegmentError, st.Journal.RoomBytes, st.Node.SpareSegmentFailures)
	}
	for range 10 {
		clk.ns += int64(time.Millisecond)
		n.Tick()
	}
	if got := log.count("JOURNAL CANNOT PREPARE ITS NEXT SEGMENT"); got != 1 || n.Status().Node.SpareSegmentFailures != 1 {
		t.Fatalf("%d warnings, %d failures counted in one episode; want 1", got, n.Status().Node.SpareSegmentFailures)
	}
	fs.full.Store(false)
	clk.ns += journal.SpareRetryNs
	tickUntil(t, n, "prepared the spare again", func() bool { return n.Status().Journal.NextSegmentError == "" })
	if log.count("journal's next segment prepared again") != 1 || n.Status().Node.SpareSegmentFailures != 1 {
		t.Fatalf("recovery: log %q", log.String())
	}
}
