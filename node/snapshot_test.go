package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seqbus/seqbus/engine"
	"github.com/seqbus/seqbus/journal"
	"github.com/seqbus/seqbus/nodeconfig"
	"github.com/seqbus/seqbus/sequencer"
	"github.com/seqbus/seqbus/standby"
	"github.com/seqbus/seqbus/wire"

	"github.com/seqbus/seqbus/client"
)

// rebuildObserver records where each node's rebuilds started from.
type rebuildObserver struct {
	mu      sync.Mutex
	rebuilt map[uint32][]uint64
}

func (o *rebuildObserver) Applied(uint32, uint64, uint64, []byte) {}
func (o *rebuildObserver) Installed(uint32, uint64)               {}
func (o *rebuildObserver) Released(nodeconfig.ReleaseEvent)       {}
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

// waitNewestSnapshot waits for the snapshot at seq to be written in dir
// and finished by n (either role writes it off its agent, after the pass,
// and compacts behind it at a later pass: the file appears before the
// older ones go, so the file alone is not the end).
func waitNewestSnapshot(t *testing.T, n *Node, dir string, seq uint64) {
	t.Helper()
	want := fmt.Sprintf("%020d.snap", seq)
	deadline := time.Now().Add(10 * time.Second)
	for {
		names, _, _ := snapshotFiles(t, dir)
		st := n.Status()
		if len(names) > 0 && names[len(names)-1] == want && st.Applied >= seq && st.SnapshotsWriting == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot %s not written and finished in %s: %v (applied %d, %d writing)", want, dir, names, st.Applied, st.SnapshotsWriting)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	small := func(cfg *nodeconfig.Config) {
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
		waitNewestSnapshot(t, c.nodes[2], c.dirs[2], c.nodes[2].Status().Applied/every*every)
		// The primary writes its snapshots off its agent too.
		waitNewestSnapshot(t, c.nodes[1], c.dirs[1], c.nodes[1].Status().Applied/every*every)
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

// TestRejoinBehindWindowFetchesAtMostTwice (issue 15 item 4): a standby
// restarted behind the primary by more than its receive window, while the
// primary's latest snapshot is not ahead of it and commands keep coming,
// used to fetch that snapshot, ignore it ("not ahead of us") and fetch it
// again on the next live frame, for as long as the load lasted. It must
// rejoin with at most two snapshot fetches, and the primary must serve a
// bounded number of chunks to it.
func TestRejoinBehindWindowFetchesAtMostTwice(t *testing.T) {
	defer goleak.VerifyNone(t)
	const every = 40_000
	c := newCluster(t, 2)
	defer c.closeAll()
	cfg := func(cfg *nodeconfig.Config) {
		cfg.SnapshotEvery = every
		// Releases must not wait for the stopped standby: this test is
		// about its rejoin, not about gating.
		cfg.Unsafe.NoGating = cfg.ID == 1
	}
	c.start(1, cfg)
	c.start(2, cfg)
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	load := func(count uint64, rate float64, seed uint64) {
		t.Helper()
		rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: rate, Count: count, Seed: seed, Drain: 20 * time.Second}, nil)
		if err != nil {
			t.Fatalf("load: %v (%+v)", err, rep)
		}
	}
	// Primary and standby snapshot at 40k; the standby stops at 42k.
	load(42_000, 50_000, 1)
	c.waitConverged(10 * time.Second)
	c.stop(2)
	// 15k more: the standby is behind by more than its 8192-message window,
	// and the primary's snapshot (40k) is behind the standby (42k) and not
	// stale enough (17k < every/2) for the old code to cut a fresh one.
	load(15_000, 50_000, 2)
	// Live traffic while it rejoins, flowing before it starts: its first
	// frames are then live ones far past its window. Started after it, a
	// fast machine let the standby repair the whole gap by NAK first (a
	// heartbeat names the tail) and never fetch: the scenario untested.
	errc := make(chan error, 1)
	go func() {
		rep, err := cl.Load(context.Background(), client.LoadConfig{Rate: 20_000, Count: 30_000, Seed: 3, Drain: 20 * time.Second}, nil)
		if err != nil {
			err = fmt.Errorf("load: %w (%+v)", err, rep)
		}
		errc <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); c.nodes[1].Released() < 57_000+1_000; {
		if time.Now().After(deadline) {
			t.Fatalf("the live load did not start: released %d", c.nodes[1].Released())
		}
		time.Sleep(time.Millisecond)
	}
	c.start(2, cfg)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	c.waitConverged(20 * time.Second)
	p, s := c.nodes[1].Status(), c.nodes[2].Status()
	t.Logf("standby: fetches %d installed %d naks %d retransmits %d; primary: snapshots %d chunks sent %d refused %d",
		s.Node.SnapshotFetches, s.Node.SnapshotsInstalled, s.Node.NaksSent, s.Node.RetransmitsReceived,
		p.Node.Snapshots, p.Node.SnapshotChunksSent, p.Node.SnapshotChunksRefused)
	if s.Node.SnapshotFetches > 2 {
		t.Fatalf("the rejoining standby fetched %d snapshots; at most 2", s.Node.SnapshotFetches)
	}
	// Every chunk was asked for: at most a burst per request the standby
	// made (its re-asks grow with the machine's slowness, so a fixed
	// bound flaked: 6,918 chunks for one fetch under
	// scripts/test-under-load), and the requests are those of at most two
	// fetches (checked above). A standby that repaired the whole gap by
	// NAK before a live frame past its window reached it (rare since the
	// load runs first) fetched nothing, and no chunk may have been sent.
	fetch, ok := s.Fetch.(standby.FetchStats)
	if !ok {
		t.Fatalf("standby status fetch %T", s.Fetch)
	}
	if bound := fetch.Requests * nodeconfig.SnapshotChunkBurst; p.Node.SnapshotChunksSent > bound {
		t.Fatalf("the primary sent %d snapshot chunks to one rejoining standby, which made %d requests (bound %d)",
			p.Node.SnapshotChunksSent, fetch.Requests, bound)
	}
}

// TestSnapshotChunksBoundedPerStandby (issue 15 item 4): a standby that
// asks for the same snapshot over and over is served at most
// DefaultSnapshotTransfersPerStandby copies of it a second; the rest is
// refused and counted.
func TestSnapshotChunksBoundedPerStandby(t *testing.T) {
	clk := &stepClock{ns: 1}
	n := manualNode(t, nodeconfig.RolePrimary, clk)
	defer n.Close()
	from := netip.MustParseAddrPort("10.0.0.3:1")
	b := wire.NewBatch(0)
	b.Reset(wire.TypeCommand, wire.Origin{Node: 5}, 1)
	for id := uint64(1); id <= 20; id++ {
		b.Add(engine.AppendRequest(nil, 3, id, &engine.Request{Op: engine.OpNewOrder, Instrument: 1, Side: engine.Buy, Type: engine.Limit, Price: int64(id), Qty: 1}))
	}
	n.Deliver(b.Bytes(), netip.MustParseAddrPort("10.0.0.9:5"))
	if n.Status().Applied != 20 {
		t.Fatalf("applied %d", n.Status().Applied)
	}
	req := wire.SnapshotRequest{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 1}}
	frame := req.Append(nil)
	for range 1000 { // 1000 requests within 100 ms: one budget window
		clk.ns += 100_000
		n.Deliver(frame, from)
	}
	st := n.Status()
	chunks := n.snaps.Chunks()
	t.Logf("snapshot of %d chunks; sent %d, refused %d", chunks, st.Node.SnapshotChunksSent, st.Node.SnapshotChunksRefused)
	if st.Node.SnapshotChunksSent > sequencer.DefaultSnapshotTransfersPerStandby*chunks || st.Node.SnapshotChunksRefused == 0 {
		t.Fatalf("1000 requests of a %d-chunk snapshot: %d chunks sent, %d refused", chunks, st.Node.SnapshotChunksSent, st.Node.SnapshotChunksRefused)
	}
	// A standby not behind gets nothing at all.
	ahead := wire.SnapshotRequest{Origin: wire.Origin{Stream: 9, Node: 2, Epoch: 1}, SnapshotSeq: 20}
	sent := st.Node.SnapshotChunksSent
	n.Deliver(ahead.Append(nil), from)
	if st := n.Status(); st.Node.SnapshotChunksSent != sent || st.Node.SnapshotRequestsNotBehind != 1 {
		t.Fatalf("a standby at our applied seq was sent chunks: %+v", st.Node)
	}
}

// heldSnapshotFS is the real filesystem, except that creating a snapshot
// file waits until release is closed: a disk that takes as long as the
// test likes to write one.
type heldSnapshotFS struct {
	journal.OSFS
	release chan struct{}
	held    chan struct{} // closed when the first snapshot write waits
	once    sync.Once
}

func (f *heldSnapshotFS) OpenFile(name string, flag int, perm os.FileMode) (journal.File, error) {
	if strings.HasSuffix(name, ".snap.tmp") {
		f.once.Do(func() { close(f.held) })
		<-f.release
	}
	return f.OSFS.OpenFile(name, flag, perm)
}

// TestPrimarySnapshotWriteOffTheAgent: the primary cuts its periodic
// snapshot on the agent (the encoding is the state at its seq) but writes
// the file (create, write, fsync, rename, compaction) off it, as a standby
// does. While the disk holds the first snapshot's write, commands go on
// being sequenced, replicated and answered, past the next cut too (it
// waits for the disk behind the first); once the disk lets go both are
// written in order. Before, the primary wrote inline and answered nothing
// until the disk returned.
func TestPrimarySnapshotWriteOffTheAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	const every = 500
	c := newCluster(t, 2)
	defer c.closeAll()
	disk := &heldSnapshotFS{release: make(chan struct{}), held: make(chan struct{})}
	released := false
	defer func() { // before closeAll: a node waiting for the disk could not close
		if !released {
			close(disk.release)
		}
	}()
	c.start(1, func(cfg *nodeconfig.Config) { cfg.SnapshotEvery = every; cfg.FS = disk })
	c.start(2, func(cfg *nodeconfig.Config) { cfg.SnapshotEvery = every })
	cl := dialClient(t, c.addrs[1], 7)
	defer cl.Close()
	const count = 2*every + every/2
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := cl.Load(ctx, client.LoadConfig{Rate: 20_000, Count: count, Seed: 3, Drain: 10 * time.Second}, nil)
	if err != nil || rep.Answered != count {
		t.Fatalf("load with the snapshot write held: %v (answered %d of %d)", err, rep.Answered, count)
	}
	select {
	case <-disk.held:
	default:
		t.Fatal("the primary never started a snapshot write")
	}
	if names, _, _ := snapshotFiles(t, c.dirs[1]); len(names) != 0 {
		t.Fatalf("snapshot files %v while the disk held the write", names)
	}
	close(disk.release)
	released = true
	waitNewestSnapshot(t, c.nodes[1], c.dirs[1], 2*every)
	names, _, _ := snapshotFiles(t, c.dirs[1])
	if want := []string{fmt.Sprintf("%020d.snap", every), fmt.Sprintf("%020d.snap", 2*every)}; !slices.Equal(names, want) {
		t.Fatalf("snapshots %v, want %v", names, want)
	}
	if st := c.nodes[1].Status(); st.Node.SnapshotWaitNsMax != 0 {
		t.Fatalf("the agent waited %v for the disk with two snapshots pending", time.Duration(st.Node.SnapshotWaitNsMax))
	}
}
