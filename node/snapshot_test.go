package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/client"
)

// rebuildObserver records where each node's rebuilds started from.
type rebuildObserver struct {
	mu      sync.Mutex
	rebuilt map[uint32][]uint64
}

func (o *rebuildObserver) Applied(uint32, uint64, uint64, []byte) {}
func (o *rebuildObserver) Installed(uint32, uint64)               {}
func (o *rebuildObserver) Released(ReleaseEvent)                  {}
func (o *rebuildObserver) Rebuilt(id uint32, from uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rebuilt == nil {
		o.rebuilt = map[uint32][]uint64{}
	}
	o.rebuilt[id] = append(o.rebuilt[id], from)
}

// snapshotFiles lists the seqs of the snapshots in dir and the bytes the
// directory holds.
func snapshotFiles(t *testing.T, dir string) (seqs []string, bytes int64, segments int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		bytes += info.Size()
		switch {
		case strings.HasSuffix(e.Name(), ".snap"):
			seqs = append(seqs, e.Name())
		case strings.HasSuffix(e.Name(), ".seg"):
			segments++
		}
	}
	slices.Sort(seqs)
	return seqs, bytes, segments
}

// TestStandbySnapshotsAndCompacts (issue 15 item 12): a standby cuts its
// snapshots at the same seqs as the primary, compacts its journal behind
// them so its disk stays bounded over a long run, and recovers from its
// own snapshot on restart with the primary's state hash.
func TestStandbySnapshotsAndCompacts(t *testing.T) {
	defer goleak.VerifyNone(t)
	const every = 2000
	const segmentBytes = 32 << 10
	obs := &rebuildObserver{}
	c := newCluster(t, 2)
	defer c.closeAll()
	small := func(cfg *Config) {
		cfg.SnapshotEvery = every
		cfg.Journal.SegmentBytes = segmentBytes
		cfg.Observer = obs
	}
	c.start(1, small)
	c.start(2, small)
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	var maxBytes int64
	const rounds, perRound = 5, 8000
	for r := 0; r < rounds; r++ {
		rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 40_000, Count: perRound, Seed: uint64(r + 1), Drain: 10 * time.Second}, nil)
		if err != nil {
			t.Fatalf("load: %v (%+v)", err, rep)
		}
		c.waitConverged(10 * time.Second)
		_, b, _ := snapshotFiles(t, c.dirs[2])
		maxBytes = max(maxBytes, b)
	}
	p, s := c.nodes[1].Status(), c.nodes[2].Status()
	pSnaps, pBytes, _ := snapshotFiles(t, c.dirs[1])
	sSnaps, sBytes, sSegs := snapshotFiles(t, c.dirs[2])
	t.Logf("primary: applied %d journal %d..%d snapshots %v %d bytes", p.Applied, p.Journal.FirstSeq, p.Journal.LastSeq, pSnaps, pBytes)
	t.Logf("standby: applied %d journal %d..%d snapshots %v %d bytes in %d segments, at most %d bytes; snapshot encode %v write %v at most", s.Applied, s.Journal.FirstSeq, s.Journal.LastSeq, sSnaps, sBytes, sSegs, maxBytes, time.Duration(s.Node.SnapshotEncodeNsMax), time.Duration(s.Node.SnapshotWriteNsMax))
	if len(sSnaps) == 0 {
		t.Fatal("the standby cut no snapshot")
	}
	// Both cut at every multiple of `every`: the newest ones are the same
	// seqs (the primary may have cut one more on demand, never fewer).
	for _, name := range sSnaps {
		if !slices.Contains(pSnaps, name) {
			t.Fatalf("standby snapshot %s is not one of the primary's %v", name, pSnaps)
		}
	}
	if s.Node.Snapshots < uint64(rounds*perRound/every)-1 {
		t.Fatalf("standby cut %d snapshots over %d commands every %d", s.Node.Snapshots, rounds*perRound, every)
	}
	if s.Journal.FirstSeq <= 1 {
		t.Fatalf("the standby's journal was never compacted: first seq %d", s.Journal.FirstSeq)
	}
	// The bound: two snapshots and the segments holding the records since
	// the older one (every records of ~60 bytes: under 4 segments here).
	snapBytes := int64(0)
	for _, name := range sSnaps {
		info, err := os.Stat(filepath.Join(c.dirs[2], name))
		if err != nil {
			t.Fatal(err)
		}
		snapBytes = max(snapBytes, info.Size())
	}
	if bound := 2*snapBytes*2 + 6*segmentBytes; maxBytes > bound {
		t.Fatalf("standby directory reached %d bytes, bound %d", maxBytes, bound)
	}

	// Restart the standby: it recovers from its own newest snapshot and
	// replays only the journal after it.
	wantHash := p.StateHash
	newest := sSnaps[len(sSnaps)-1]
	c.stop(2)
	c.start(2, small)
	c.waitConverged(10 * time.Second)
	obs.mu.Lock()
	from := obs.rebuilt[2]
	obs.mu.Unlock()
	if len(from) != 2 || from[1] == 0 {
		t.Fatalf("standby rebuilds started from %v; want its own snapshot on the restart", from)
	}
	if name := fmt.Sprintf("%020d.snap", from[1]); name != newest {
		t.Fatalf("restart restored snapshot %s, newest on disk %s", name, newest)
	}
	if got := c.nodes[2].Status(); got.StateHash != wantHash || got.Node.SnapshotFetches != 0 {
		t.Fatalf("after restart: hash %x want %x, snapshot fetches %d", got.StateHash, wantHash, got.Node.SnapshotFetches)
	}
}
