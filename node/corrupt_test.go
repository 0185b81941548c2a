package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/nodeconfig"
)

// TestCorruptJournalIsSetAsideAndRefetched: a standby's journal damaged
// in the middle between restarts is not served from and not skipped
// over: the node sets the whole journal aside (kept for a post-mortem),
// says it will not lead, refetches the state from the primary and
// converges to the same state hash. A torn tail is cut, reported and
// repaired from the primary.
func TestCorruptJournalIsSetAsideAndRefetched(t *testing.T) {
	defer goleak.VerifyNone(t)
	c := newCluster(t, 2)
	defer c.closeAll()
	small := func(cfg *nodeconfig.Config) { cfg.Journal.SegmentBytes = 64 << 10 }
	c.start(1, small)
	c.start(2, small)
	cl, err := client.Dial(client.Options{Core: client.Config{Session: 8}, Primary: c.addrs[1], Idle: testIdle})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	load := func(seed uint64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cl.Load(ctx, client.LoadConfig{Rate: 5000, Count: 3000, Seed: seed}, nil); err != nil {
			t.Fatal(err)
		}
	}
	load(1)
	c.waitConverged(10 * time.Second)
	c.stop(2)

	// Flip bytes in the middle of the first segment: damage that is not a
	// torn tail.
	segs, _ := filepath.Glob(filepath.Join(c.dirs[2], "*.seg"))
	if len(segs) < 2 {
		t.Fatalf("want several segments, got %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 2; i < len(b)/2+8; i++ {
		b[i] ^= 0xFF
	}
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := c.start(2, small)
	st := s.Status()
	// Refetching until it has caught up with the primary, which may
	// already be done by the time Status is read (the idle primary's
	// heartbeat and a retransmit are enough): either state is right.
	if st.Node.JournalsSetAside != 1 || (!st.Refetching && st.Node.RefetchesDone != 1) {
		t.Fatalf("corrupt journal: set aside %d, refetching %v, refetches done %d", st.Node.JournalsSetAside, st.Refetching, st.Node.RefetchesDone)
	}
	aside, _ := filepath.Glob(filepath.Join(c.dirs[2], "*.corrupt-*"))
	if len(aside) < len(segs) {
		t.Fatalf("set aside %v, want every segment kept", aside)
	}
	load(2) // live traffic lets it see the primary's head
	c.waitConverged(20 * time.Second)
	if s.Status().Refetching {
		t.Fatal("still refetching after converging")
	}

	// A torn tail: the last segment cut mid-record.
	c.stop(2)
	segs, _ = filepath.Glob(filepath.Join(c.dirs[2], "*.seg"))
	last := segs[len(segs)-1]
	b, err = os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b) // segments may be zero-filled past the last record
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end < 100 {
		t.Fatalf("last segment %s holds %d bytes", last, end)
	}
	if err := os.Truncate(last, int64(end-7)); err != nil {
		t.Fatal(err)
	}
	s = c.start(2, small)
	st = s.Status()
	if st.Node.TornTailBytes == 0 || st.Node.JournalsSetAside != 0 {
		t.Fatalf("torn tail: cut %d bytes, set aside %d", st.Node.TornTailBytes, st.Node.JournalsSetAside)
	}
	load(3)
	c.waitConverged(20 * time.Second)
	for _, f := range aside {
		if !strings.Contains(f, ".corrupt-") {
			t.Fatal(f)
		}
	}
}
